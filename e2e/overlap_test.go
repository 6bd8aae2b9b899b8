// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// serverAndAgent is singleServer plus one agent.
const serverAndAgent = singleServer + `    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
`

// TestOverlapFirstServerFails: while the first server boots, the agent is staged —
// its files uploaded and the install script run, the unit neither enabled nor started. When
// the first server then fails (F1 diagnosed), the run stops with the diagnosis and the agent
// stays exactly so: binary and unit in place, unit disabled and inactive, no token file. The
// re-run with the inventory fixed resumes: the agent uploads nothing large again, is enabled and
// started, and is Ready.
func TestOverlapFirstServerFails(t *testing.T) {
	c := newCluster(t, 2)
	c.writeInventory(serverAndAgent, f1Config)
	r := c.k3strap(4*time.Minute, "apply", "--ignore-preflight-errors=CloudController", "--stall-grace=5s")
	defer r.dump(t)
	if r.code != 5 {
		t.Fatalf("apply exited %d, want 5 (bring-up)", r.code)
	}
	diagnosed := false
	for _, e := range r.ofType(events.Error) {
		diagnosed = diagnosed || e.Error.Diagnosis == "F1-cloud-controller"
	}
	if !diagnosed {
		t.Error("no F1 diagnosis")
	}
	staged := firstIndex(r, func(e events.Event) bool {
		return e.Host == "a1" && e.Step == "stage" && strings.Contains(e.Message, "ran the install script")
	})
	started := firstIndex(r, func(e events.Event) bool { return e.Host == "a1" && e.Step == "start" })
	if staged < 0 || started >= 0 {
		t.Errorf("a1: staged install at event %d (want one), start at event %d (want none)", staged, started)
	}
	state := c.exec(1, "sh", "-c", "test -x /usr/local/bin/k3s && echo binary; test -f /etc/systemd/system/k3s-agent.service && echo unit; "+
		"systemctl is-enabled k3s-agent; systemctl is-active k3s-agent; test -e /etc/rancher/k3s/cluster-token && echo token; true")
	if got := strings.Fields(state); strings.Join(got, " ") != "binary unit disabled inactive" {
		t.Errorf("a1 after the first server failed: %q, want binary and unit in place, disabled, inactive, no token file", state)
	}

	c.writeInventory(serverAndAgent, nil)
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("re-run exited %d", r.code)
	}
	for _, e := range r.ofType(events.UploadProgress) {
		if e.Host == "a1" && e.Upload != nil && e.Upload.File == "/usr/local/bin/k3s" {
			t.Errorf("the re-run uploaded a1's binary again")
			break
		}
	}
	ready := firstIndex(r, func(e events.Event) bool { return e.Host == "a1" && e.Step == "node" && e.Status == events.StatusOK })
	if ready < 0 {
		t.Error("a1 was not reported Ready")
	}
	if got := c.exec(1, "sh", "-c", "systemctl is-enabled k3s-agent; systemctl is-active k3s-agent"); strings.Join(strings.Fields(got), " ") != "enabled active" {
		t.Errorf("a1 k3s-agent after the re-run: %q, want enabled and active", got)
	}
}
