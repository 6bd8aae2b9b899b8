// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// A dry-run a script can use (docs/output.md): on an installed server, `apply --dry-run
// --detailed-exitcode` exits 0 with nothing pending; after a config change it exits 9, the JSON
// lines carry each change as data — config.yaml with the host's current sha256 (read here with
// sha256sum) and the new one, the restart of k3s — per host in the summary too, whose next line
// is the apply that makes them; the host is not changed.
func TestDryRunPlanScripted(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(clusterInv, clusterExtra(1, 0, nil))
	r := c.k3strap(4*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}

	same := c.k3strap(2*time.Minute, "apply", "--dry-run", "--detailed-exitcode")
	defer same.dump(t)
	if s := same.summary(t); same.code != 0 || s.ExitCode != 0 || s.Changes != 0 {
		t.Fatalf("unchanged dry-run: exit %d, summary %+v", same.code, s)
	}

	old := strings.Fields(c.exec(0, "sha256sum", k3s.PathConfig))[0]
	c.writeInventory(clusterInv, clusterExtra(1, 0, map[string]any{"config": "      node-external-ip: [192.0.2.1]"}))
	d := c.k3strap(2*time.Minute, "apply", "--dry-run", "--detailed-exitcode")
	defer d.dump(t)
	s := d.summary(t)
	if d.code != 9 || s.ExitCode != 9 || s.ExitMeaning != "changes pending" || !s.OK || s.Changes < 2 {
		t.Fatalf("dry-run with a change: exit %d, summary %+v", d.code, s)
	}
	var cfg, restart *events.Change
	for i, ch := range s.Hosts[0].Changes {
		switch {
		case ch.Kind == events.ChangeFile && ch.Path == k3s.PathConfig:
			cfg = &s.Hosts[0].Changes[i]
		case ch.Kind == events.ChangeService && ch.Action == "restart":
			restart = &s.Hosts[0].Changes[i]
		}
	}
	if cfg == nil || cfg.OldSHA256 != old || cfg.NewSHA256 == "" || cfg.NewSHA256 == old || cfg.Action != "replace" || cfg.Mode != "0600" || !cfg.Restart {
		t.Errorf("config.yaml change %+v (host's sha256 %s)", cfg, old)
	}
	if restart == nil || restart.Unit != "k3s" {
		t.Errorf("no restart of k3s among %+v", s.Hosts[0].Changes)
	}
	inEvents := 0
	for _, e := range d.events {
		if e.Change != nil {
			inEvents++
		}
	}
	if inEvents != len(s.Hosts[0].Changes) {
		t.Errorf("%d change events, %d changes in the summary", inEvents, len(s.Hosts[0].Changes))
	}
	if len(s.Next) != 1 || !strings.Contains(s.Next[0], "k3strap apply -f") || strings.Contains(s.Next[0], "--dry-run") {
		t.Errorf("next after a dry-run with changes: %q", s.Next)
	}
	if now := strings.Fields(c.exec(0, "sha256sum", k3s.PathConfig))[0]; now != old {
		t.Error("the dry-run changed config.yaml")
	}
}
