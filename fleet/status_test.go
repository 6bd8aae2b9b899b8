// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// TestStatusMerges: shard state files merge per site and record, the newest start winning;
// a running record without a lock holder is interrupted; a done site whose digest changed is
// marked; sites the fleet no longer lists are orphans, outside the totals.
func TestStatusMerges(t *testing.T) {
	f := testFleet(4, Rollout{}, nil)
	t1 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	rec := func(st events.SiteStatus, at time.Time, digest string) *Record {
		return &Record{Command: "apply", Status: st, Started: at, Finished: at.Add(time.Minute), Digest: digest, ExitCode: map[bool]int{true: 0, false: 5}[st == events.SiteDone], Exit: "x"}
	}
	old := &State{Version: StateVersion, Fleet: "test", Sites: map[string]*SiteState{
		"s1":   {Rollout: rec(events.SiteFailed, t1, "sha256:1")},
		"s2":   {Rollout: rec(events.SiteDone, t1, "sha256:old")},
		"gone": {Rollout: rec(events.SiteDone, t1, "sha256:g")},
	}}
	shard1 := &State{Version: StateVersion, Fleet: "test", Shard: "1/2", Sites: map[string]*SiteState{
		"s1": {Rollout: rec(events.SiteDone, t2, "sha256:1"), Cluster: &Observed{Versions: []string{"v1.36.3+k3s1"}, Nodes: 2, Ready: 2, At: t2},
			Doctor: &Record{Command: "doctor", Status: events.SiteWarnings, Verdict: "warnings", Started: t2}},
	}}
	shard2 := &State{Version: StateVersion, Fleet: "test", Shard: "2/2", Sites: map[string]*SiteState{
		"s3": {Rollout: &Record{Command: "apply", Status: events.SiteRunning, Started: t2}},
	}}
	rep := Status(f, map[string]*State{"old.json": old, "a.json": shard1, "b.json": shard2}, func(string) bool { return false })
	by := map[string]SiteReport{}
	for _, s := range rep.Sites {
		by[s.Site] = s
	}
	if s := by["s1"]; s.Status != "done" || s.Shard != "1/2" || s.Cluster == nil || s.Verdict != "warnings" {
		t.Errorf("s1 (newer shard record wins): %+v", s)
	}
	if s := by["s2"]; s.Status != "done" || !s.Changed {
		t.Errorf("s2 (digest changed since): %+v", s)
	}
	if s := by["s3"]; s.Status != "interrupted" {
		t.Errorf("s3 (running, no lock held): %+v", s)
	}
	if s := by["s4"]; s.Status != "pending" {
		t.Errorf("s4: %+v", s)
	}
	if s := by["gone"]; !s.Orphan {
		t.Errorf("gone: %+v", s)
	}
	if tt := rep.Totals; tt.Sites != 4 || tt.ByStatus["done"] != 2 || tt.ByStatus["interrupted"] != 1 || tt.Ready != 2 || tt.Seen != 1 || tt.Verdicts["warnings"] != 1 {
		t.Errorf("totals %+v", tt)
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, t2.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"fleet test: 4 site(s); state: a.json, b.json, old.json", "s1    1/2", "v1.36.3+k3s1  2/2    warnings",
		"s2    -      -     done (changed)", "inventory changed since", "s3    2/2    -     interrupted", "gone", "no longer in the fleet file",
		"totals: 2 done, 1 interrupted, 1 pending; nodes Ready 2/2 (seen on 1 of 4 sites); doctor: 1 warnings, 3 not run"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}
