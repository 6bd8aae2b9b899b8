// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet"
)

// Offline sites in a push rollout (docs/fleet.md "Offline sites") on 5 hosts: five one-host
// sites, waves [store-1] [store-2 store-3] [store-4 store-5], unreachable sites tried 3 times
// 3 s apart. About 2 minutes on the simulator lane (the rollout with the cuts ~40 s).

var deferSites = []fleetSite{{"store-1", []int{0}}, {"store-2", []int{1}}, {"store-3", []int{2}}, {"store-4", []int{3}}, {"store-5", []int{4}}}

const deferFleetFile = `apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: stores
spec:
  sites:
    - path: "sites/*.yaml"
  defaults:
    k3s:
      version: v1.36.3+k3s1
      install: airgap
      airgap:
        amd64:
          binary: {{.Artifacts}}/k3s
          checksums: {{.Artifacts}}/sha256sum-amd64.txt
          images: {{.Artifacts}}/k3s-airgap-images-amd64.tar.zst
    ssh:
      user: root
      keyPath: {{.Key}}
      knownHosts: {{.KnownHosts}}
      connectTimeout: 2s
  rollout:
    canary: 1
    batch: 2
    concurrency: 2
    siteTimeout: 3m
    unreachable:
      attempts: 3
      retryAfter: 3s
      maxWait: 1m
`

// writeDeferFleet writes the fleet file and the five site inventories (sites in f1 get the F1
// configuration).
func (c *testCluster) writeDeferFleet(f1 ...string) {
	c.t.Helper()
	c.writeInventory(deferFleetFile, nil)
	fleetPath := filepath.Join(c.dir, "fleet.yaml")
	if err := os.Rename(c.inv, fleetPath); err != nil {
		c.t.Fatal(err)
	}
	c.inv = fleetPath
	if err := os.MkdirAll(filepath.Join(c.dir, "sites"), 0o755); err != nil {
		c.t.Fatal(err)
	}
	for _, s := range deferSites {
		d := siteInvData{Name: s.name, Addrs: []string{c.hosts[s.hosts[0]].Address}}
		for _, f := range f1 {
			d.F1 = d.F1 || f == s.name
		}
		writeSiteInv(c.t, filepath.Join(c.dir, "sites", s.name+".yaml"), d)
	}
}

// TestFleetDefersOfflineSites: store-3 and store-5 are cut off (harness cut: their network
// cable unplugged) while the canary runs —
//   - store-3 is deferred on its first attempt and, healed meanwhile, done on its retry within
//     wave 2; store-5 stays cut: deferred after its 3 attempts, never counted as failed, so
//     wave 3's store-4 completes beside it; the run exits 10 (sites deferred); every other
//     site is up, store-5's host untouched; `fleet status` (plain and JSON) shows store-5
//     deferred, never reached, and when the others were;
//   - healed, the next rollout runs store-5 (the others are checked) and exits 0;
//   - a canary that fails (store-1 given the F1 configuration) still stops the rollout: exit 3,
//     no other site touched.
func TestFleetDefersOfflineSites(t *testing.T) {
	began := time.Now()
	c := newCluster(t, 5)
	c.writeDeferFleet()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	healed := map[int]bool{}
	defer func() {
		for _, i := range []int{2, 4} {
			if !healed[i] {
				_ = c.h.Heal(context.Background(), c.hosts[i].Index)
			}
		}
	}()

	a := c.start(4*time.Minute, "apply", "--ssh-config", "none")
	a.waitFor(t, 2*time.Minute, "the canary's connect", func(e events.Event) bool {
		return e.Site == "store-1" && e.Type == events.HostStep && e.Phase == events.PhaseConnect && e.Status == events.StatusOK
	})
	for _, i := range []int{2, 4} {
		if err := c.h.Cut(ctx, c.hosts[i].Index); err != nil {
			t.Fatal(err)
		}
	}
	cutAt := time.Now()
	first := a.waitFor(t, 3*time.Minute, "store-3 deferred", func(e events.Event) bool {
		return e.Type == events.SiteResultType && e.Site == "store-3"
	})
	if r := first.SiteResult; r.Status != events.SiteDeferred || r.Attempt != 1 || r.RetryInSeconds != 3 {
		t.Errorf("store-3's first result: %+v, want deferred, attempt 1, retry in 3 s", r)
	}
	if err := c.h.Heal(ctx, c.hosts[2].Index); err != nil {
		t.Fatal(err)
	}
	healed[2] = true
	r := a.wait(t)
	defer r.dump(t)
	t.Logf("rollout with two sites cut: %s (cut %s after the start)", r.duration.Round(time.Second), cutAt.Sub(a.start).Round(time.Second))
	if r.code != 10 {
		t.Fatalf("rollout with store-5 cut: exit %d, want 10 (sites deferred)", r.code)
	}
	// The fleet's summary is the last event without a site (each site's run has its own).
	var sum *events.SummaryInfo
	for _, e := range r.ofType(events.Summary) {
		if e.Site == "" {
			sum = e.Summary
		}
	}
	if sum == nil || sum.ExitMeaning != "sites deferred (unreachable)" || sum.ExitCode != 10 || !strings.Contains(strings.Join(sum.Next, "\n"), "unreachable, deferred: store-5") {
		t.Errorf("fleet summary %+v", sum)
	}
	res := siteResults(r)
	for _, name := range []string{"store-1", "store-2", "store-3", "store-4"} {
		if res[name].Status != events.SiteDone {
			t.Errorf("%s: %+v, want done", name, res[name])
		}
	}
	if s3 := res["store-3"]; s3.Attempt != 2 || s3.LastReached.IsZero() {
		t.Errorf("store-3 finished on attempt %d (want 2), last reached %v", s3.Attempt, s3.LastReached)
	}
	s5 := res["store-5"]
	if s5.Status != events.SiteDeferred || s5.Attempt != 3 || s5.RetryInSeconds != 0 || !s5.LastReached.IsZero() ||
		!strings.Contains(s5.Message, "unreachable after 3 attempt(s)") {
		t.Errorf("store-5: %+v, want deferred after 3 attempts, never reached", s5)
	}
	deferredEvents := 0
	for _, e := range r.ofType(events.SiteResultType) {
		if e.Site == "store-5" && e.SiteResult.Status == events.SiteDeferred {
			deferredEvents++
		}
		if e.SiteResult.Status == events.SiteFailed {
			t.Errorf("a site failed: %+v", e.SiteResult)
		}
	}
	if deferredEvents != 3 {
		t.Errorf("store-5 was reported deferred %d times, want once per attempt (3)", deferredEvents)
	}
	waveOrder(t, r)
	for _, s := range deferSites[:4] {
		c.siteUp(t, s)
	}
	st := c.readFleetState(t, "fleet.state.json")
	if ss := st.Sites["store-5"]; ss == nil || ss.Rollout == nil || ss.Rollout.Status != events.SiteDeferred || ss.Rollout.Attempts != 3 || !ss.Reached.IsZero() {
		t.Errorf("store-5's state: %+v", ss)
	}
	status := c.k3strap(time.Minute, "fleet", "status", "--output", "plain")
	t.Logf("fleet status:\n%s", status.stdout)
	if !strings.Contains(status.stdout, "REACHED") || !strings.Contains(status.stdout, "totals: 4 done, 1 deferred") {
		t.Errorf("fleet status (exit %d):\n%s", status.code, status.stdout)
	}
	for _, line := range strings.Split(status.stdout, "\n") {
		if strings.HasPrefix(line, "store-5 ") && !(strings.Contains(line, "deferred") && strings.Contains(line, "never")) {
			t.Errorf("store-5's status line: %s", line)
		}
		if strings.HasPrefix(line, "store-3 ") && (!strings.Contains(line, "done") || !strings.Contains(line, "s ago")) {
			t.Errorf("store-3's status line: %s", line)
		}
	}
	js := c.k3strap(time.Minute, "fleet", "status", "--output", "json")
	var rep fleet.Report
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
		t.Fatalf("fleet status --output json: %v\n%s", err, js.stdout)
	}
	for _, s := range rep.Sites {
		if deferred := s.Site == "store-5"; deferred != (s.Status == "deferred") || deferred != s.Reached.IsZero() {
			t.Errorf("fleet status JSON: %s status %s, last reached %v", s.Site, s.Status, s.Reached)
		}
	}

	c.noK3s(t, 4, "store-5 deferred") // nothing was changed on it

	// Healed, the next rollout runs store-5; the other sites are checked.
	if err := c.h.Heal(ctx, c.hosts[4].Index); err != nil {
		t.Fatal(err)
	}
	healed[4] = true
	r = c.k3strap(4*time.Minute, "apply", "--output", "json", "--ssh-config", "none")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("rollout after the heal: exit %d", r.code)
	}
	res = siteResults(r)
	for _, s := range deferSites {
		want := events.SiteChecked
		if s.name == "store-5" {
			want = events.SiteDone
		}
		if res[s.name].Status != want {
			t.Errorf("after the heal: %s %s, want %s", s.name, res[s.name].Status, want)
		}
	}
	c.siteUp(t, deferSites[4])

	// A failed canary still stops the rollout.
	c.writeDeferFleet("store-1")
	r = c.k3strap(3*time.Minute, "apply", "--output", "json", "--ssh-config", "none")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("canary F1: exit %d, want 3 (preflight)", r.code)
	}
	if touched := sitesTouched(r); len(touched) != 1 || !touched["store-1"] {
		t.Errorf("sites touched after the canary failed: %v", keys(touched))
	}
	t.Logf("TestFleetDefersOfflineSites took %s", time.Since(began).Round(time.Second))
}
