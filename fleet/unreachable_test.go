// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// dialTimeout is what a host behind a cut link gives at connect.
func dialTimeout(host string) error {
	return &remote.ConnectError{Host: host, Address: "10.0.0.1:22", Step: remote.StepConnect, Err: errors.New("dial tcp 10.0.0.1:22: i/o timeout")}
}

func TestOffline(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial timeout", dialTimeout("cp1"), true},
		{"refused", &remote.ConnectError{Step: remote.StepConnect, Err: errors.New("connect: connection refused")}, true},
		{"handshake reset", &remote.ConnectError{Step: remote.StepHandshake, Err: errors.New("read: connection reset by peer")}, true},
		{"no common algorithm", &remote.ConnectError{Step: remote.StepHandshake, Err: errors.New("ssh: no common algorithm for key exchange")}, false},
		{"auth", &remote.ConnectError{Step: remote.StepAuth, Err: errors.New("unable to authenticate")}, false},
		{"host key", &remote.ConnectError{Step: remote.StepHostKey, Err: errors.New("key mismatch")}, false},
		{"agent", &remote.ConnectError{Step: remote.StepAgent, Err: errors.New("agent did not answer")}, false},
		{"lost", &remote.TransportError{Host: "cp1", Op: "gather facts", Err: errors.New("connection lost before the command finished")}, true},
		{"hung command", &remote.DeadlineError{Host: "cp1", Command: "gather facts", Timeout: time.Minute}, false},
		{"cancelled", &remote.ConnectError{Step: remote.StepConnect, Err: context.Canceled}, false},
		{"plain", errors.New("exit status 1"), false},
		{"nil", nil, false},
	} {
		if got := Offline(c.err); got != c.want {
			t.Errorf("%s: Offline = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDecide: the pure judgement after an attempt (docs/fleet.md "Offline sites").
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	offline := Contact{Offline: map[string]error{"cp1": dialTimeout("cp1")}}
	lost := Contact{Reached: map[string]time.Time{"cp1": t0}, Offline: map[string]error{"cp1": &remote.TransportError{Host: "cp1", Op: "facts", Err: errors.New("lost")}}}
	partial := Contact{Reached: map[string]time.Time{"cp1": t0}, Offline: map[string]error{"w1": dialTimeout("w1")}}
	lostChanging := lost
	lostChanging.Changing = events.PhaseLock
	refused := Contact{Offline: map[string]error{"cp1": dialTimeout("cp1")}, Refused: map[string]error{"w1": errors.New("auth")}}
	fail := &installer.Failure{Kind: installer.KindPreflight, Info: events.ErrorInfo{Message: "SSH failed"}}
	pol := Unreachable{Attempts: 3, RetryAfter: inventory.Duration(10 * time.Second), MaxWait: inventory.Duration(time.Minute)}
	for _, c := range []struct {
		name string
		pol  Unreachable
		a    Attempt
		want Next
		wait time.Duration
	}{
		{"success", pol, Attempt{Number: 1, Contact: offline, End: t0}, NextEnd, 0},
		{"real failure: the site answered", pol, Attempt{Number: 1, Err: fail, Contact: Contact{Reached: map[string]time.Time{"cp1": t0}}, End: t0}, NextEnd, 0},
		{"offline at connect: retry", pol, Attempt{Number: 1, Err: fail, Contact: offline, End: t0}, NextRetry, 10 * time.Second},
		{"lost before any change: retry", pol, Attempt{Number: 2, Err: fail, Contact: lost, FirstUnreachable: t0, End: t0.Add(20 * time.Second)}, NextRetry, 10 * time.Second},
		{"lost after a change started: a failure", pol, Attempt{Number: 1, Err: fail, Contact: lostChanging, End: t0}, NextEnd, 0},
		{"one host of two offline: a failure", pol, Attempt{Number: 1, Err: fail, Contact: partial, End: t0}, NextEnd, 0},
		{"a host refused: a failure", pol, Attempt{Number: 1, Err: fail, Contact: refused, End: t0}, NextEnd, 0},
		{"attempts spent: deferred", pol, Attempt{Number: 3, Err: fail, Contact: offline, FirstUnreachable: t0, End: t0.Add(30 * time.Second)}, NextDeferred, 0},
		{"maxWait spent: deferred", pol, Attempt{Number: 2, Err: fail, Contact: offline, FirstUnreachable: t0, End: t0.Add(55 * time.Second)}, NextDeferred, 0},
		{"retry exactly at maxWait", pol, Attempt{Number: 2, Err: fail, Contact: offline, FirstUnreachable: t0, End: t0.Add(50 * time.Second)}, NextRetry, 10 * time.Second},
		{"rollout stopping: deferred", pol, Attempt{Number: 1, Err: fail, Contact: offline, End: t0, Stopping: true}, NextDeferred, 0},
		{"countAsFailed", Unreachable{Attempts: 1, CountAsFailed: true}, Attempt{Number: 1, Err: fail, Contact: offline, End: t0}, NextFailed, 0},
		{"cancelled", pol, Attempt{Number: 1, Err: &installer.Failure{Kind: installer.KindCancelled}, Contact: offline, End: t0}, NextEnd, 0},
		{"defaults: 3 attempts 30s apart", Unreachable{}, Attempt{Number: 2, Err: fail, Contact: offline, FirstUnreachable: t0, End: t0.Add(40 * time.Second)}, NextRetry, 30 * time.Second},
		{"defaults: third attempt is the last", Unreachable{}, Attempt{Number: 3, Err: fail, Contact: offline, FirstUnreachable: t0, End: t0.Add(80 * time.Second)}, NextDeferred, 0},
	} {
		next, wait := c.pol.Decide(c.a)
		if next != c.want || wait != c.wait {
			t.Errorf("%s: Decide = %v, %s; want %v, %s", c.name, next, wait, c.want, wait)
		}
	}
}

// offlineFake is a SiteRunner whose sites in offline are unreachable (every host's connect
// times out, as behind a cut link) until healed, when a site's attempts reach heal[site]; it
// reports contact as the installer does (Observer.HostContact) and emits the connect events.
type offlineFake struct {
	mu       sync.Mutex
	offline  map[string]bool
	heal     map[string]int // site → the attempt from which it answers (0: never)
	attempts map[string]int
	calls    []string
}

func (f *offlineFake) run(ctx context.Context, s *Site, command string, sink events.Sink, obs Observer) error {
	f.mu.Lock()
	f.attempts[s.Name]++
	n := f.attempts[s.Name]
	f.calls = append(f.calls, fmt.Sprintf("%s:%s#%d", s.Name, command, n))
	down := f.offline[s.Name] && (f.heal[s.Name] == 0 || n < f.heal[s.Name])
	f.mu.Unlock()
	em := events.Emitter{Sink: sink, Phase: events.PhaseConnect}
	em.Started("connecting to 1 hosts")
	if down {
		err := dialTimeout("cp1")
		obs.HostContact("cp1", err)
		em.Step("cp1", "connect", events.StatusFailed, err.Error())
		return &installer.Failure{Kind: installer.KindPreflight, Phase: events.PhasePreflight, Host: "cp1", Info: events.ErrorInfo{Message: "SSH to cp1 failed"}}
	}
	obs.HostContact("cp1", nil)
	em.Step("cp1", "connect", events.StatusOK, "connected")
	events.Emitter{Sink: sink, Phase: events.PhaseLock}.Started("taking the lock")
	return nil
}

func newOfflineFake(offline ...string) *offlineFake {
	f := &offlineFake{offline: map[string]bool{}, heal: map[string]int{}, attempts: map[string]int{}}
	for _, s := range offline {
		f.offline[s] = true
	}
	return f
}

func runOffline(t *testing.T, f *Fleet, fk *offlineFake, dir string) (error, *events.Recorder) {
	t.Helper()
	rec := &events.Recorder{}
	opts := RunOptions{Command: "apply", Changes: true, Record: true, StatePath: dir + "/state.json", Run: fk.run, Sink: rec,
		Exit: func(err error) (int, string) {
			if installer.KindOf(err) == installer.KindDeferred {
				return 10, "sites deferred (unreachable)"
			}
			c := exitCodes(err)
			return c, fmt.Sprintf("meaning %d", c)
		}}
	plan, err := f.Plan(Selection{}, true)
	if err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), f, plan, opts), rec
}

func siteResultsOf(rec *events.Recorder, site string) []events.SiteResult {
	var out []events.SiteResult
	for _, e := range rec.Events() {
		if e.Type == events.SiteResultType && e.Site == site {
			out = append(out, *e.SiteResult)
		}
	}
	return out
}

// TestRunDefersUnreachable: of five sites, two are unreachable (both in wave 2): one heals on
// its second attempt and ends done; one stays offline and ends deferred after its attempts,
// not counted toward maxFailedSites (0), so wave 3 still runs; the run's error is the deferred kind
// (exit 10), the events, the state and fleet status say which sites are deferred and when
// each was last reached.
func TestRunDefersUnreachable(t *testing.T) {
	dir := t.TempDir()
	pol := Unreachable{Attempts: 3, RetryAfter: inventory.Duration(20 * time.Millisecond), MaxWait: inventory.Duration(5 * time.Second)}
	f := testFleet(5, Rollout{Canary: intp(1), Batch: "2", Concurrency: 2, Unreachable: pol}, nil)
	fk := newOfflineFake("s2", "s3")
	fk.heal["s2"] = 2
	err, rec := runOffline(t, f, fk, dir)
	if installer.KindOf(err) != installer.KindDeferred || !strings.Contains(err.Error(), "1 site(s) unreachable, deferred: s3") {
		t.Fatalf("run error %v (kind %v), want the deferred kind naming s3", err, installer.KindOf(err))
	}
	if fk.attempts["s2"] != 2 || fk.attempts["s3"] != 3 || fk.attempts["s1"] != 1 || fk.attempts["s4"] != 1 || fk.attempts["s5"] != 1 {
		t.Errorf("attempts %v, want s2 2 (healed), s3 3 (the policy's), the others 1 (wave 3 ran)", fk.attempts)
	}
	s2 := siteResultsOf(rec, "s2")
	if len(s2) != 2 || s2[0].Status != events.SiteDeferred || s2[0].RetryInSeconds <= 0 || s2[0].Attempt != 1 ||
		s2[1].Status != events.SiteDone || s2[1].Attempt != 2 || s2[1].LastReached.IsZero() {
		t.Errorf("s2's results: %+v", s2)
	}
	s3 := siteResultsOf(rec, "s3")
	if len(s3) != 3 || s3[2].Status != events.SiteDeferred || s3[2].RetryInSeconds != 0 || s3[2].Attempt != 3 || !s3[2].LastReached.IsZero() ||
		!strings.Contains(s3[2].Message, "unreachable after 3 attempt(s)") {
		t.Errorf("s3's results: %+v", s3)
	}
	sum := summaryOf(t, rec)
	if sum.OK || sum.ExitCode != 10 || len(sum.Sites) != 5 {
		t.Errorf("summary %+v", sum)
	}
	var waveDeferred int
	for _, e := range rec.Events() {
		if e.Type == events.WaveType && e.Status != events.StatusRunning {
			waveDeferred += e.Wave.Deferred
		}
	}
	if waveDeferred != 1 {
		t.Errorf("waves report %d deferred sites, want 1", waveDeferred)
	}
	st := stateOf(t, dir)
	if statusOf(st, "s3") != events.SiteDeferred || st.Sites["s3"].Rollout.Attempts != 3 || !st.Sites["s3"].Reached.IsZero() {
		t.Errorf("s3's state: %+v", st.Sites["s3"].Rollout)
	}
	if statusOf(st, "s2") != events.SiteDone || st.Sites["s2"].Reached.IsZero() {
		t.Errorf("s2's state: %+v reached %v", st.Sites["s2"].Rollout, st.Sites["s2"].Reached)
	}
	rep := Status(f, map[string]*State{dir + "/state.json": st}, nil)
	var b bytes.Buffer
	if err := rep.WriteText(&b, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rep.Totals.ByStatus["deferred"] != 1 || rep.Totals.ByStatus["done"] != 4 ||
		!containsAll(b.String(), "REACHED", "s3 ", "deferred", "never", "unreachable after 3 attempt(s)", "4 done, 1 deferred") {
		t.Errorf("fleet status:\n%s", b.String())
	}

	// The next rollout, s3 back online: it runs s3 (and checks the done sites).
	fk.offline["s3"] = false
	if err, _ := runOffline(t, f, fk, dir); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if st := stateOf(t, dir); statusOf(st, "s3") != events.SiteDone || st.Sites["s3"].Reached.IsZero() {
		t.Errorf("s3 after the second run: %+v", st.Sites["s3"])
	}
}

// TestRunUnreachableCanaryStops: a canary that stays unreachable stops the rollout (no later
// wave runs before a canary succeeded), as a failed canary does.
func TestRunUnreachableCanaryStops(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(3, Rollout{Canary: intp(1), Batch: "1", Unreachable: Unreachable{Attempts: 2, RetryAfter: inventory.Duration(10 * time.Millisecond)}}, nil)
	fk := newOfflineFake("s1")
	err, _ := runOffline(t, f, fk, dir)
	if installer.KindOf(err) != installer.KindDeferred || !strings.Contains(err.Error(), "the canary s1 is unreachable") {
		t.Fatalf("run error %v", err)
	}
	if len(fk.calls) != 2 {
		t.Errorf("ran %v, want only the canary's two attempts", fk.calls)
	}
}

// TestRunUnreachableCountAsFailed: with countAsFailed, a site still unreachable counts toward
// maxFailedSites: with 0 the rollout stops after its wave; the exit code is its failure's.
func TestRunUnreachableCountAsFailed(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(4, Rollout{Canary: intp(1), Batch: "1", Unreachable: Unreachable{Attempts: 1, CountAsFailed: true}}, nil)
	fk := newOfflineFake("s2")
	err, rec := runOffline(t, f, fk, dir)
	var re *RolloutError
	if !errors.As(err, &re) || re.Site != "s2" || exitCodes(err) != 3 || re.Stopped == "" {
		t.Fatalf("run error %v", err)
	}
	if res := siteResultsOf(rec, "s2"); len(res) != 1 || res[0].Status != events.SiteFailed || !strings.Contains(res[0].Message, "unreachable after 1 attempt(s), counted as failed") {
		t.Errorf("s2: %+v", res)
	}
	if fk.attempts["s3"] != 0 || fk.attempts["s4"] != 0 {
		t.Errorf("ran %v after the stop", fk.calls)
	}
}

// TestRunRealFailureStillStops: maxFailedSites counts real failures — deferred sites do not
// use it up, a failure does.
func TestRunRealFailureStillStops(t *testing.T) {
	dir := t.TempDir()
	f := testFleet(4, Rollout{Canary: intp(0), Batch: "2", Concurrency: 2, Unreachable: Unreachable{Attempts: 1}}, nil)
	fk := newOfflineFake("s1")
	fail := &fake{start: map[string]time.Time{}, end: map[string]time.Time{}, fail: map[string]installer.Kind{"s2": installer.KindBringUp}, failChk: map[string]bool{}, block: map[string]bool{}}
	run := fk.run
	rec := &events.Recorder{}
	opts := RunOptions{Command: "apply", Changes: true, Record: true, StatePath: dir + "/state.json", Sink: rec, Exit: func(err error) (int, string) { return exitCodes(err), "" },
		Run: func(ctx context.Context, s *Site, command string, sink events.Sink, obs Observer) error {
			if s.Name == "s2" {
				return fail.run(ctx, s, command, sink, obs)
			}
			return run(ctx, s, command, sink, obs)
		}}
	plan, _ := f.Plan(Selection{}, true)
	err := Run(context.Background(), f, plan, opts)
	var re *RolloutError
	if !errors.As(err, &re) || re.Site != "s2" || exitCodes(err) != 5 {
		t.Fatalf("run error %v, want s2's bring-up failure", err)
	}
	if fk.attempts["s3"] != 0 {
		t.Errorf("s3 ran after the stop: %v", fk.calls)
	}
	st, _ := ReadState(dir + "/state.json")
	if statusOf(st, "s1") != events.SiteDeferred {
		t.Errorf("s1: %v", statusOf(st, "s1"))
	}
}

// TestUnreachableDoc: docs/fleet.md documents the policy's fields and the exit code.
func TestUnreachableDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(string(b), "## Offline sites", "attempts:", "retryAfter:", "maxWait:", "countAsFailed:", "exit 10", "REACHED") {
		t.Error("docs/fleet.md does not document rollout.unreachable (its fields, exit 10, fleet status's REACHED)")
	}
}

// TestContactTrackerChanging: the first step that changes the site is noted from the events
// (apply's lock; upgrade --via suc's suc-deploy), read-only steps are not.
func TestContactTrackerChanging(t *testing.T) {
	for _, c := range []struct {
		action string
		phases []events.Phase
		want   events.Phase
	}{
		{"apply", []events.Phase{events.PhaseConnect, events.PhaseFacts, events.PhasePlan, events.PhasePaths, events.PhasePreflight}, ""},
		{"apply", []events.Phase{events.PhaseConnect, events.PhasePreflight, events.PhaseLock, events.PhaseFirstServer}, events.PhaseLock},
		{"upgrade", []events.Phase{events.PhaseConnect, events.PhaseSUCDeploy}, events.PhaseSUCDeploy},
		{"check", []events.Phase{events.PhaseConnect, events.PhaseDrift}, ""},
	} {
		tr := newContactTracker(c.action, time.Now)
		sink := tr.sink(events.SinkFunc(func(events.Event) {}))
		for _, p := range c.phases {
			events.Emitter{Sink: sink, Phase: p}.Started("")
		}
		if got := tr.contact().Changing; got != c.want {
			t.Errorf("%s through %v: changing %q, want %q", c.action, c.phases, got, c.want)
		}
	}
}
