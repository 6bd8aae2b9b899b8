// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
)

// fake is a SiteRunner that records what ran, when, and fails or blocks as told.
type fake struct {
	mu      sync.Mutex
	calls   []string // "site:action"
	start   map[string]time.Time
	end     map[string]time.Time
	fail    map[string]installer.Kind // site → the failure of its command
	failChk map[string]bool           // site → its check fails
	block   map[string]bool           // site → runs until its context ends
	running atomic.Int32
	peak    atomic.Int32
	nodes   []corev1.Node
}

func newFake() *fake {
	return &fake{start: map[string]time.Time{}, end: map[string]time.Time{}, fail: map[string]installer.Kind{}, failChk: map[string]bool{}, block: map[string]bool{}}
}

func (f *fake) run(ctx context.Context, s *Site, command string, sink events.Sink, obs Observer) error {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	f.mu.Lock()
	f.calls = append(f.calls, s.Name+":"+command)
	f.start[s.Name] = time.Now()
	fail, failChk, block := f.fail[s.Name], f.failChk[s.Name], f.block[s.Name]
	f.mu.Unlock()
	events.Emitter{Sink: sink, Phase: "connect"}.Step("cp1", "connect", events.StatusOK, "connected")
	time.Sleep(5 * time.Millisecond)
	if block {
		<-ctx.Done()
		return &installer.Failure{Kind: installer.KindCancelled, Phase: "install", Info: events.ErrorInfo{Message: "cancelled"}}
	}
	defer func() {
		f.mu.Lock()
		f.end[s.Name] = time.Now()
		f.mu.Unlock()
	}()
	if f.nodes != nil {
		obs.Nodes(f.nodes)
	}
	if command == "check" && failChk {
		return &installer.Failure{Kind: installer.KindDrift, Phase: "drift", Info: events.ErrorInfo{Message: "drift"}}
	}
	if command != "check" && fail != installer.KindOK {
		return &installer.Failure{Kind: fail, Phase: "preflight", Host: "cp1", Info: events.ErrorInfo{Message: "it broke"}}
	}
	return nil
}

func (f *fake) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// exitCodes is the command layer's table for the kinds the tests use.
func exitCodes(err error) int {
	return map[installer.Kind]int{installer.KindOK: 0, installer.KindError: 1, installer.KindPreflight: 3, installer.KindInstall: 4,
		installer.KindBringUp: 5, installer.KindDrift: 6, installer.KindCancelled: 130, installer.KindFindingsWarning: 7, installer.KindFindingsError: 8}[installer.KindOf(err)]
}

// runFleet runs command over f with fk, the state in dir.
func runFleet(t *testing.T, ctx context.Context, f *Fleet, fk *fake, dir, command string, tweak func(*RunOptions)) (error, *events.Recorder) {
	t.Helper()
	rec := &events.Recorder{}
	opts := RunOptions{Command: command, Changes: command == "apply", Record: true, StatePath: filepath.Join(dir, "state.json"),
		Run: fk.run, Sink: rec, Exit: func(err error) (int, string) { c := exitCodes(err); return c, fmt.Sprintf("meaning %d", c) }}
	if tweak != nil {
		tweak(&opts)
	}
	plan, err := f.Plan(Selection{}, opts.Changes)
	if err != nil {
		t.Fatal(err)
	}
	return Run(ctx, f, plan, opts), rec
}

func stateOf(t *testing.T, dir string) *State {
	t.Helper()
	st, err := ReadState(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func statusOf(st *State, site string) events.SiteStatus {
	s := st.Sites[site]
	if s == nil || s.Rollout == nil {
		return events.SitePending
	}
	return s.Rollout.Status
}

func summaryOf(t *testing.T, rec *events.Recorder) *events.SummaryInfo {
	t.Helper()
	for _, e := range rec.Events() {
		if e.Type == events.Summary && e.Site == "" {
			return e.Summary
		}
	}
	t.Fatal("no fleet summary")
	return nil
}

// TestRunWavesInOrder: every site runs, wave after wave (no site of a wave starts before the
// previous wave's sites ended), at most rollout.concurrency at once, each site's events carry
// the site, and the state records every site done with its digest and the nodes seen.
func TestRunWavesInOrder(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(7, Rollout{Canary: intp(1), Batch: "3", Concurrency: 2}, nil)
	fk := newFake()
	fk.nodes = []corev1.Node{{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3+k3s1"},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}, {}}
	err, rec := runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	if err != nil {
		t.Fatal(err)
	}
	waves := f.PlanWaves(f.Sites, true)
	for i := 1; i < len(waves); i++ {
		for _, prev := range waves[i-1].Sites {
			for _, next := range waves[i].Sites {
				if fk.start[next.Name].Before(fk.end[prev.Name]) {
					t.Errorf("%s (wave %d) started before %s (wave %d) ended", next.Name, i+1, prev.Name, i)
				}
			}
		}
	}
	if p := fk.peak.Load(); p > 2 {
		t.Errorf("%d sites ran at once, concurrency is 2", p)
	}
	st := stateOf(t, dir)
	for _, s := range f.Sites {
		ss := st.Sites[s.Name]
		if ss == nil || ss.Rollout == nil || ss.Rollout.Status != events.SiteDone || ss.Rollout.Digest != s.Digest || ss.Rollout.Finished.IsZero() {
			t.Errorf("%s state: %+v", s.Name, ss)
			continue
		}
		if c := ss.Cluster; c == nil || c.Nodes != 2 || c.Ready != 1 || len(c.Versions) != 1 || c.Versions[0] != "v1.36.3+k3s1" {
			t.Errorf("%s cluster view: %+v", s.Name, c)
		}
	}
	stamped, waveEvents := 0, 0
	for _, e := range rec.Events() {
		if e.Type == events.HostStep && e.Site != "" {
			stamped++
		}
		if e.Type == events.WaveType {
			waveEvents++
		}
	}
	if stamped != 7 || waveEvents != 2*len(waves) {
		t.Errorf("%d host steps with a site (want 7), %d wave events (want %d)", stamped, waveEvents, 2*len(waves))
	}
	if s := summaryOf(t, rec); !s.OK || len(s.Sites) != 7 || s.Waves != 3 {
		t.Errorf("summary %+v", s)
	}
}

// TestRunCanaryFailStops: a failed canary stops the rollout; no other site runs; the exit code
// is the canary's.
func TestRunCanaryFailStops(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(5, Rollout{Canary: intp(1), Batch: "2", MaxFailedSites: "50%"}, nil)
	fk := newFake()
	fk.fail["s1"] = installer.KindBringUp
	err, rec := runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	var re *RolloutError
	if !errors.As(err, &re) || re.Site != "s1" || exitCodes(err) != 5 {
		t.Fatalf("error %v (exit %d), want the canary's (exit 5)", err, exitCodes(err))
	}
	if got := fk.ran(); len(got) != 1 || got[0] != "s1:apply" {
		t.Errorf("ran %v, want only the canary", got)
	}
	st := stateOf(t, dir)
	if statusOf(st, "s1") != events.SiteFailed || st.Sites["s1"].Rollout.Exit != "meaning 5" || st.Sites["s1"].Rollout.Host != "cp1" {
		t.Errorf("canary state %+v", st.Sites["s1"].Rollout)
	}
	for _, s := range []string{"s2", "s3", "s4", "s5"} {
		if st.Sites[s] != nil {
			t.Errorf("%s has state %+v", s, st.Sites[s])
		}
	}
	if s := summaryOf(t, rec); s.OK || s.ExitCode != 5 || s.Sites[1].Status != events.SitePending {
		t.Errorf("summary %+v", s)
	}
}

// TestRunMaxFailedStops: a failure beyond rollout.maxFailedSites stops before the next wave;
// within the allowance the rollout goes on.
func TestRunMaxFailedStops(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(5, Rollout{Canary: intp(1), Batch: "2"}, nil)
	fk := newFake()
	fk.fail["s3"] = installer.KindPreflight
	err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	if exitCodes(err) != 3 {
		t.Fatalf("exit %d, want 3", exitCodes(err))
	}
	st := stateOf(t, dir)
	if statusOf(st, "s2") != events.SiteDone || statusOf(st, "s3") != events.SiteFailed || st.Sites["s4"] != nil || st.Sites["s5"] != nil {
		t.Errorf("states: s2 %s s3 %s s4 %v s5 %v", statusOf(st, "s2"), statusOf(st, "s3"), st.Sites["s4"], st.Sites["s5"])
	}

	dir = t.TempDir()
	f = testFleet(5, Rollout{Canary: intp(1), Batch: "2", MaxFailedSites: "1"}, nil)
	fk = newFake()
	fk.fail["s3"] = installer.KindPreflight
	_, _ = runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	if st := stateOf(t, dir); statusOf(st, "s5") != events.SiteDone {
		t.Errorf("with maxFailedSites 1 one failure stopped the rollout: %v", fk.ran())
	}
}

// TestRunResume: a re-run checks done sites with an unchanged digest instead of running them,
// runs the rest, runs a done site again when its digest changed, its check failed, or with
// Rerun.
func TestRunResume(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(4, Rollout{Canary: intp(1), Batch: "3"}, nil)
	fk := newFake()
	fk.fail["s3"] = installer.KindInstall
	if err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", nil); err == nil {
		t.Fatal("no failure")
	}
	fk = newFake()
	f.Sites[1].Digest = "sha256:changed" // s2's inventory changed
	fk.failChk["s4"] = true              // s4 drifted since
	err, rec := runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"s1:check": true, "s2:apply": true, "s3:apply": true, "s4:check": true, "s4:apply": true}
	got := fk.ran()
	if len(got) != len(want) {
		t.Errorf("ran %v, want %v", got, want)
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("ran %s (all: %v)", c, got)
		}
	}
	sum := summaryOf(t, rec)
	if sum.Sites[0].Status != events.SiteChecked || sum.Sites[0].Action != "check" || sum.Sites[3].Status != events.SiteDone {
		t.Errorf("summary sites %+v", sum.Sites)
	}
	st := stateOf(t, dir)
	if s1 := st.Sites["s1"]; s1.Rollout.Checked.IsZero() || s1.Check == nil || s1.Check.Status != events.SiteDone {
		t.Errorf("s1 not recorded as checked: %+v %+v", s1.Rollout, s1.Check)
	}
	fk = newFake()
	if err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", func(o *RunOptions) { o.Rerun = true }); err != nil {
		t.Fatal(err)
	}
	if got := fk.ran(); len(got) != 4 || got[0] != "s1:apply" {
		t.Errorf("--rerun ran %v", got)
	}
}

// TestRunCancelMidWave: cancelling stops the running sites as a cancelled run does and starts
// no other; the state says which sites are done; the re-run runs only the rest.
func TestRunCancelMidWave(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(4, Rollout{Canary: intp(1), Batch: "3", Concurrency: 1}, nil)
	fk := newFake()
	fk.block["s3"] = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var rec *events.Recorder
	go func() {
		var err error
		err, rec = runFleet(t, ctx, f, fk, dir, "apply", nil)
		done <- err
	}()
	deadline := time.After(10 * time.Second)
	for len(fk.ran()) < 3 {
		select {
		case <-deadline:
			t.Fatalf("s3 never started: %v", fk.ran())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	err := <-done
	if installer.KindOf(err) != installer.KindCancelled {
		t.Fatalf("error %v, want cancelled", err)
	}
	st := stateOf(t, dir)
	if statusOf(st, "s1") != events.SiteDone || statusOf(st, "s2") != events.SiteDone || statusOf(st, "s3") != events.SiteCancelled || st.Sites["s4"] != nil {
		t.Errorf("states s1 %s s2 %s s3 %s s4 %v", statusOf(st, "s1"), statusOf(st, "s2"), statusOf(st, "s3"), st.Sites["s4"])
	}
	if s := summaryOf(t, rec); s.ExitCode != 130 {
		t.Errorf("summary exit %d", s.ExitCode)
	}
	fk = newFake()
	if err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", nil); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(fk.ran()); got != "[s1:check s2:check s3:apply s4:apply]" {
		t.Errorf("re-run ran %s", got)
	}
}

// TestRunSiteTimeout: a site that outlasts rollout.siteTimeout is stopped and fails.
func TestRunSiteTimeout(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(1, Rollout{Canary: intp(0), SiteTimeout: inventory.Duration(50 * time.Millisecond)}, nil)
	fk := newFake()
	fk.block["s1"] = true
	err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", nil)
	if exitCodes(err) != 4 {
		t.Fatalf("error %v (exit %d), want a failure (4)", err, exitCodes(err))
	}
	if r := stateOf(t, dir).Sites["s1"].Rollout; r.Status != events.SiteFailed || r.Message == "" {
		t.Errorf("state %+v", r)
	}
}

// TestRunReadOnly: preflight, check and doctor run every site whatever fails, record their own
// outcome (not the rollout's), and exit with the highest site exit code.
func TestRunReadOnly(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(4, Rollout{Canary: intp(1), Batch: "1"}, nil)
	fk := newFake()
	fk.fail["s1"] = installer.KindFindingsWarning
	fk.fail["s2"] = installer.KindFindingsError
	err, _ := runFleet(t, context.Background(), f, fk, dir, "doctor", nil)
	if exitCodes(err) != 8 {
		t.Errorf("exit %d, want 8", exitCodes(err))
	}
	if len(fk.ran()) != 4 {
		t.Errorf("ran %v", fk.ran())
	}
	st := stateOf(t, dir)
	rep := Status(f, map[string]*State{"state.json": st}, nil)
	var verdicts []string
	for _, s := range rep.Sites {
		verdicts = append(verdicts, s.Verdict)
		if s.Rollout != nil {
			t.Errorf("doctor wrote a rollout record: %+v", s.Rollout)
		}
	}
	if fmt.Sprint(verdicts) != "[warnings errors healthy healthy]" {
		t.Errorf("verdicts %v", verdicts)
	}
}

// TestRunLocked: a second run on the same state file while one holds it is refused, naming
// the holder; the lock is free again when the first run ends.
func TestRunLocked(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(1, Rollout{Canary: intp(0)}, nil)
	fk := newFake()
	fk.block["s1"] = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err, _ := runFleet(t, ctx, f, fk, dir, "apply", nil)
		done <- err
	}()
	for len(fk.ran()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	err, rec := runFleet(t, context.Background(), f, newFake(), dir, "apply", nil)
	var fl *installer.Failure
	if !errors.As(err, &fl) || fl.Kind != installer.KindInstall || !containsAll(fl.Info.Message, "holds the fleet lock", fmt.Sprintf("pid %d", os.Getpid()), "k3strap apply") {
		t.Errorf("second run: %v", err)
	}
	if s := summaryOf(t, rec); s.ExitCode != 4 {
		t.Errorf("summary %+v", s)
	}
	cancel()
	<-done
	fk = newFake()
	if err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", nil); err != nil || len(fk.ran()) != 1 {
		t.Errorf("after the first run ended: %v, ran %v", err, fk.ran())
	}
}

// TestLockGoesWithItsProcess: a lock held by a process that was killed is free (flock), and
// while that process lives another one is refused.
func TestLockGoesWithItsProcess(t *testing.T) {
	if os.Getenv("K3STRAP_LOCK_HELPER") != "" {
		l, err := TakeLock(os.Getenv("K3STRAP_LOCK_HELPER"), "apply", time.Now())
		if err != nil {
			fmt.Println("helper:", err)
			os.Exit(3)
		}
		fmt.Println("locked")
		_ = l
		time.Sleep(time.Minute)
		return
	}
	state := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockGoesWithItsProcess$")
	cmd.Env = append(os.Environ(), "K3STRAP_LOCK_HELPER="+state)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, _ := out.Read(buf); string(buf[:n]) != "locked\n" {
		t.Fatalf("helper said %q", buf[:n])
	}
	if _, err := TakeLock(state, "apply", time.Now()); !containsAll(fmt.Sprint(err), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("lock taken while the helper holds it: %v", err)
	}
	if !Held(state) {
		t.Error("Held says free while the helper holds it")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	l, err := TakeLock(state, "apply", time.Now())
	if err != nil {
		t.Fatalf("the killed helper's lock was not freed: %v", err)
	}
	l.Unlock()
	if Held(state) {
		t.Error("Held says held after Unlock")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestJournalUpdateIsWritten: when Update returns, the file holds the change, even when many
// updates run at once and share writes; the file is whole JSON at every moment.
func TestJournalUpdateIsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	f := testFleet(1, Rollout{}, nil)
	j, err := OpenJournal(path, f, Shard{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("s%d", i)
			if err := j.Update(name, func(s *SiteState) { s.Wave = i + 1 }); err != nil {
				t.Error(err)
				return
			}
			st, err := ReadState(path)
			if err != nil {
				t.Error(err)
				return
			}
			if got := st.Sites[name]; got == nil || got.Wave != i+1 {
				t.Errorf("%s: Update returned before the file held it: %+v", name, got)
			}
		}()
	}
	wg.Wait()
}

// TestRunPause: with rollout.pause, the run asks before every wave after the first; no stops
// it there (cancelled: exit 130), and the next run continues.
func TestRunPause(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(3, Rollout{Canary: intp(1), Batch: "1", Pause: true}, nil)
	fk := newFake()
	var asked []int
	err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", func(o *RunOptions) {
		o.Confirm = func(_ context.Context, w Wave, of int) (bool, error) {
			asked = append(asked, w.Number)
			return w.Number < 3, nil
		}
	})
	if installer.KindOf(err) != installer.KindCancelled || fmt.Sprint(asked) != "[2 3]" || fmt.Sprint(fk.ran()) != "[s1:apply s2:apply]" {
		t.Errorf("error %v, asked before %v, ran %v", err, asked, fk.ran())
	}
	fk = newFake()
	if err, _ := runFleet(t, context.Background(), f, fk, dir, "apply", func(o *RunOptions) {
		o.Confirm = func(context.Context, Wave, int) (bool, error) { return true, nil }
	}); err != nil || fmt.Sprint(fk.ran()) != "[s1:check s2:check s3:apply]" {
		t.Errorf("continued run: %v, ran %v", err, fk.ran())
	}
}
