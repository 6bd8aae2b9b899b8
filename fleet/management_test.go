// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet/sitestatus"
	"github.com/k3strap/k3strap/installer"
)

// TestMergeManagement: push sites of the state files and SiteStatus objects merge — a
// pull site only the management cluster knows is added with its reported fields, a push site
// reported more recently takes the reported cluster view, a site never seen or seen longer
// than staleAfter ago is stale, totals count them; text and JSON carry it.
func TestMergeManagement(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f := testFleet(3, Rollout{}, nil)
	st := &State{Version: StateVersion, Fleet: "test", Sites: map[string]*SiteState{
		"s1": {Rollout: &Record{Command: "apply", Status: events.SiteDone, Digest: "sha256:1", Started: now.Add(-2 * time.Hour), Finished: now.Add(-2 * time.Hour)},
			Reached: now.Add(-2 * time.Hour), Cluster: &Observed{Versions: []string{"v1.35.0+k3s1"}, Nodes: 1, Ready: 1, At: now.Add(-2 * time.Hour)}},
		"s2": {Rollout: &Record{Command: "apply", Status: events.SiteDone, Digest: "sha256:2", Started: now.Add(-3 * time.Hour)}, Reached: now.Add(-3 * time.Hour)},
	}}
	rep := Status(f, map[string]*State{"state.json": st}, nil)
	no := false
	mgmt := []sitestatus.Site{
		{Name: "s1", Reported: true, Status: sitestatus.Status{Source: "push", Version: "v1.36.3+k3s1", NodesReady: 2, NodesTotal: 3, LastSeen: now.Add(-10 * time.Minute)}},
		{Name: "box-7", Reported: true, Status: sitestatus.Status{Source: "pull", Version: "v1.36.3+k3s1", NodesReady: 1, NodesTotal: 1, DoctorVerdict: "healthy",
			LastResult:      &sitestatus.Result{Command: "pull", ExitCode: 4, ExitMeaning: "a host step failed", Message: "install failed"},
			SourceReachable: &no, SourceMessage: "source unreachable", LastSeen: now.Add(-5 * time.Minute)}},
		{Name: "box-8"},
	}
	rep.MergeManagement("https://10.0.0.1:6443", mgmt, time.Hour, now)
	by := map[string]SiteReport{}
	var order []string
	for _, s := range rep.Sites {
		by[s.Site] = s
		order = append(order, s.Site)
	}
	if got := strings.Join(order, ","); got != "s1,s2,s3,box-7,box-8" {
		t.Errorf("order %s", got)
	}
	if s := by["s1"]; s.Stale || s.Source != "push" || s.Cluster.Ready != 2 || s.Cluster.Versions[0] != "v1.36.3+k3s1" || !s.LastSeen.Equal(now.Add(-10*time.Minute)) {
		t.Errorf("s1 (reported 10m ago): %+v", s)
	}
	if s := by["s2"]; !s.Stale || s.Source != "push" || s.Reported != nil {
		t.Errorf("s2 (reached 3h ago, never reported): %+v", s)
	}
	if s := by["s3"]; !s.Stale || s.Status != "pending" {
		t.Errorf("s3 (never seen): %+v", s)
	}
	if s := by["box-7"]; s.Stale || s.Source != "pull" || s.Status != "failed" || s.Verdict != "healthy" || s.Cluster.Nodes != 1 || s.Reported.SourceMessage != "source unreachable" {
		t.Errorf("box-7 (pull, reported 5m ago): %+v", s)
	}
	if s := by["box-8"]; !s.Stale || s.Source != "pull" || s.Status != "pending" || s.Reported != nil {
		t.Errorf("box-8 (credential made, never reported): %+v", s)
	}
	if tt := rep.Totals; tt.Sites != 5 || tt.Stale != 3 || tt.Ready != 3 || tt.Nodes != 4 || tt.ByStatus["failed"] != 1 {
		t.Errorf("totals %+v", tt)
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"management cluster https://10.0.0.1:6443: sites not seen for 1h0m0s are stale", "done (stale)", "last seen 3h ago",
		"pending (stale)", "never seen", "pull site; exit 4 (a host step failed): pull: install failed", "3 stale"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

// reportSink records the reports a run makes.
type reportSink struct {
	mu   sync.Mutex
	got  map[string]sitestatus.Status
	fail error
}

func (r *reportSink) report(_ context.Context, s *Site, st SiteState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.got[s.Name] = PushStatus(s, st)
	return nil
}

// TestRunReports: after each site's run its status is reported — the nodes seen, the result
// with its exit meaning, the digests; a site that failed is reported failed; a report that
// fails is a warning and the run's outcome is unchanged.
func TestRunReports(t *testing.T) {
	f := testFleet(2, Rollout{Canary: intp(0), MaxFailedSites: "1"}, nil)
	fk := newFake()
	fk.fail["s2"] = installer.KindInstall
	fk.nodes = []corev1.Node{{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3+k3s1"},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
	rs := &reportSink{got: map[string]sitestatus.Status{}}
	err, _ := runFleet(t, context.Background(), f, fk, t.TempDir(), "apply", func(o *RunOptions) {
		o.Report = rs.report
		o.Run = func(ctx context.Context, s *Site, command string, sink events.Sink, obs Observer) error {
			obs.HostContact("cp1", nil) // the host answered
			return fk.run(ctx, s, command, sink, obs)
		}
	})
	if exitCodes(err) != 4 {
		t.Fatalf("run: %v", err)
	}
	s1, s2 := rs.got["s1"], rs.got["s2"]
	if s1.Source != "push" || s1.Version != "v1.36.3+k3s1" || s1.NodesReady != 1 || s1.NodesTotal != 1 || s1.LastResult == nil || s1.LastResult.ExitCode != 0 ||
		s1.LastResult.ExitMeaning != "meaning 0" || s1.DesiredRevision != "sha256:1" || s1.AppliedRevision != "sha256:1" || s1.LastSeen.IsZero() {
		t.Errorf("s1 reported %+v (%+v)", s1, s1.LastResult)
	}
	if s2.LastResult == nil || s2.LastResult.ExitCode != 4 || s2.LastResult.Message != "it broke" || s2.AppliedRevision != "" || s2.DesiredRevision != "sha256:2" {
		t.Errorf("s2 reported %+v (%+v)", s2, s2.LastResult)
	}

	rs = &reportSink{got: map[string]sitestatus.Status{}, fail: errors.New("403 Forbidden")}
	fk = newFake()
	err, rec := runFleet(t, context.Background(), testFleet(2, Rollout{}, nil), fk, t.TempDir(), "apply", func(o *RunOptions) { o.Report = rs.report })
	if err != nil {
		t.Fatalf("a failed report failed the run: %v", err)
	}
	warned := 0
	for _, e := range rec.Events() {
		if e.Type == events.Warning && strings.Contains(e.Message, "not reported to the management cluster (the rollout goes on): 403 Forbidden") {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d report warnings, want 2", warned)
	}
}

// TestLoadManagement: spec.management.kubeconfig is taken relative to the fleet file; an empty
// spec.management and an unknown key under it are refused with the line and the fix.
func TestLoadManagement(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"fleet.yaml": "apiVersion: k3strap.io/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  management:\n    kubeconfig: mgmt/admin.kubeconfig\n  sites: [{path: a.yaml}]\n",
		"a.yaml":     site("a", "10.0.0.1", ""),
	})
	f, errs := load(t, dir, LoadOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if want := filepath.Join(dir, "mgmt", "admin.kubeconfig"); f.Spec.Management == nil || f.Spec.Management.Kubeconfig != want {
		t.Errorf("management %+v, want kubeconfig %s", f.Spec.Management, want)
	}
	for body, want := range map[string]string{
		"  management: {}\n":                        "fleet.yaml:5:3: spec.management names no kubeconfig",
		"  management: {kubeconfig: x, token: y}\n": "token",
	} {
		dir := writeFiles(t, map[string]string{
			"fleet.yaml": "apiVersion: k3strap.io/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n" + body + "  sites: [{path: a.yaml}]\n",
			"a.yaml":     site("a", "10.0.0.1", ""),
		})
		_, errs := load(t, dir, LoadOptions{})
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%q: %v, want %q", body, errs, want)
		}
	}
}
