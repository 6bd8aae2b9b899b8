// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/bringup"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// testSupervisor is a supervisor of a server (re)started at started, without a connection:
// tick only reads probe observations (runProbe starts the judge again from its own result).
func testSupervisor(started time.Time) (*supervisor, *events.Recorder) {
	rec := &events.Recorder{}
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer}}}}
	in := New(c, Options{StallGrace: time.Hour, Timeout: time.Hour}, rec)
	s := in.newSession(commandFor("apply"))
	hs := s.first
	hs.facts = &facts.Host{}
	hs.plan = &plan.HostPlan{Host: hs.host, Service: "k3s"}
	sup := &supervisor{s: s, hs: hs, em: in.emitter(events.PhaseSupervise), gate: make(chan struct{})}
	sup.w = bringup.New(sup.config(convergeResult{started: started}), started)
	return sup, rec
}

// evaluate gives one tick to the supervisor as streamOnce does and returns whether the server
// is up and the failure.
func (sup *supervisor) evaluate(ctx context.Context, o bringup.Observation) (bool, error) {
	done, err, _ := sup.tick(ctx, o)
	return done, err
}

// upState is a probe tick of a server that is up; heartbeat is its Ready condition's.
func upState(start, subnetMtime int64, heartbeat time.Time) bringup.Observation {
	n := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24"}}
	n.Name = "cp1"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(heartbeat)}}
	st := bringup.Observation{Service: "active", Readyz: "ok", Node: n, Start: start, SubnetMtime: subnetMtime, SubnetRaw: "FLANNEL_NETWORK=10.42.0.0/16"}
	if se, err := diagnose.ParseSubnetEnv("FLANNEL_NETWORK=10.42.0.0/16 FLANNEL_SUBNET=10.42.0.1/24 FLANNEL_MTU=1450 FLANNEL_IPMASQ=true"); err == nil {
		st.Subnet = &se
	}
	return st
}

// After a restart, what the probe sees of the process before it counts for nothing: an old
// start time, an old subnet.env, a Ready condition without a heartbeat since the restart.
func TestSupervisorIgnoresStateFromBeforeTheRestart(t *testing.T) {
	now := time.Now()
	sup, _ := testSupervisor(now)
	old := now.Add(-10 * time.Minute)

	// The old process still runs: nothing is reached.
	if done, err := sup.evaluate(context.Background(), upState(old.Unix(), old.Unix(), old)); done || err != nil || len(sup.w.Reached()) != 0 {
		t.Fatalf("old process: done %v err %v reached %v", done, err, sup.w.Reached())
	}
	// The new process runs, but subnet.env and the Ready condition are from before.
	if done, _ := sup.evaluate(context.Background(), upState(now.Unix(), old.Unix(), old)); done {
		t.Fatal("done with an old subnet.env and an old Ready condition")
	}
	for _, m := range []k3s.Milestone{k3s.MilestoneSubnetEnv, k3s.MilestoneNodeReady} {
		if _, ok := sup.w.Reached()[m]; ok {
			t.Errorf("%s reached from state before the restart", m)
		}
	}
	for _, m := range []k3s.Milestone{k3s.MilestoneServiceActive, k3s.MilestoneAPIReady, k3s.MilestoneTaintGone} {
		if _, ok := sup.w.Reached()[m]; !ok {
			t.Errorf("%s not reached from the new process", m)
		}
	}
	// Fresh subnet.env and heartbeat: done.
	if done, err := sup.evaluate(context.Background(), upState(now.Unix(), now.Unix()+1, now.Add(time.Second))); !done || err != nil {
		t.Fatalf("fresh state: done %v err %v reached %v", done, err, sup.w.Reached())
	}
}

// Other nodes may join once the API answers, the node exists and its uninitialized taint is
// gone — before subnet.env and Ready.
func TestSupervisorOpensTheJoinGateBeforeSubnetEnv(t *testing.T) {
	now := time.Now()
	sup, _ := testSupervisor(now)
	gate := sup.gate
	st := upState(now.Unix(), 0, now.Add(-time.Hour))
	st.Subnet, st.SubnetRaw = nil, ""
	st.Node.Spec.PodCIDR = ""
	st.Node.Spec.Taints = []corev1.Taint{{Key: k3s.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	sup.evaluate(context.Background(), st)
	select {
	case <-gate:
		t.Fatal("gate open while the uninitialized taint is there")
	default:
	}
	st.Node.Spec.Taints = nil
	if done, _ := sup.evaluate(context.Background(), st); done {
		t.Fatal("done without subnet.env")
	}
	select {
	case <-gate:
	default:
		t.Fatalf("gate still closed with API ready, node registered, taint gone: %v", sup.w.Reached())
	}
}

// probeTick is one tick of probe.sh as it prints it (installer/scripts/probe.sh): the unit's
// state and NRestarts, its main process start, subnet.env (mtime 0: missing), /readyz and the
// Node (nil: the API refused, as while K3s restarts).
type probeTick struct {
	service   string
	restarts  int
	start     int64
	subnet    int64
	readyz    string
	node      *corev1.Node
	nodeError string
}

// lines renders the tick in probe.sh's format; the subnet.env text is the real capture's.
func (tk probeTick) lines(t *testing.T) []string {
	t.Helper()
	out := []string{fmt.Sprintf("@service %s %d", tk.service, tk.restarts)}
	if tk.start != 0 {
		out = append(out, fmt.Sprintf("@start %d", tk.start))
	}
	if tk.subnet != 0 {
		raw, err := os.ReadFile("../testdata/real-k3s-v1.36.3/subnet.env")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("@subnet-mtime %d", tk.subnet), "@subnet "+strings.ReplaceAll(string(raw), "\n", " "))
	} else {
		out = append(out, "@subnet-missing")
	}
	out = append(out, "@readyz "+tk.readyz)
	switch {
	case tk.node != nil:
		b, err := json.Marshal(tk.node)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "@node "+string(b))
	case tk.nodeError != "":
		out = append(out, "@node "+tk.nodeError)
	}
	return append(out, "@end")
}

// realNode is the real K3s v1.36.3 node capture (registered, no uninitialized taint, PodCIDR
// set) with its Ready condition's heartbeat at heartbeat.
func realNode(t *testing.T, heartbeat time.Time) *corev1.Node {
	t.Helper()
	raw, err := os.ReadFile("../testdata/real-k3s-v1.36.3/node-default.json")
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatal(err)
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(heartbeat)
		}
	}
	return &n
}

// fakeProbe plays attempts of the probe: each attempt's ticks, one per poll interval of a
// fake clock advanced by step before each tick, each after the supervisor's answer to the one
// before (as probe.sh); then the attempt stays quiet until stopped. It records the naps the
// supervisor answered with.
type fakeProbe struct {
	t        *testing.T
	clock    time.Time
	step     time.Duration
	attempts [][]probeTick
	started  int

	mu      sync.Mutex
	naps    []string
	readers sync.WaitGroup
}

func (f *fakeProbe) now() time.Time { return f.clock }

// answers returns the naps the supervisor answered with, once every attempt's input ended.
func (f *fakeProbe) answers() []string {
	f.readers.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.naps
}

func (f *fakeProbe) stream(ctx context.Context, naps io.Reader, onLine func(string)) error {
	answers := make(chan string, 1)
	f.readers.Add(1)
	go func() {
		defer f.readers.Done()
		defer close(answers)
		sc := bufio.NewScanner(naps)
		for sc.Scan() {
			f.mu.Lock()
			f.naps = append(f.naps, sc.Text())
			f.mu.Unlock()
			select {
			case answers <- sc.Text():
			default: // an answer the fake no longer waits for
			}
		}
	}()
	i := f.started
	f.started++
	if i < len(f.attempts) {
		for _, tk := range f.attempts[i] {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			f.clock = f.clock.Add(f.step)
			for _, l := range tk.lines(f.t) {
				onLine(l)
			}
			// As probe.sh: the next tick after the answer (none comes once the watch ends).
			select {
			case <-answers:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				f.t.Errorf("no answer to tick %d", len(f.naps))
			}
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// runProbe runs the supervisor over the fake probe, as the supervise step does, and returns
// its result with how long it took (real time).
func runProbe(t *testing.T, sup *supervisor, fp *fakeProbe, res convergeResult) (error, time.Duration) {
	t.Helper()
	sup.now, sup.stream = fp.now, fp.stream
	if sup.quietAfter == 0 {
		sup.quietAfter = 5 * time.Second
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := sup.run(ctx, res)
	return err, time.Since(start)
}

func messages(rec *events.Recorder, typ events.Type) []string {
	var out []string
	for _, e := range rec.Events() {
		if e.Type == typ {
			out = append(out, e.Message)
		}
	}
	return out
}

// A re-run that finds K3s running (an earlier run started it, then was interrupted; or systemd
// restarted it after a SIGKILL) judges what the host shows now: the current process's
// milestones as they come, not "since this run" — it is done as soon as the server is up,
// not at the timeout (docs/failure-modes.md "Faults during a run": a re-run once waited out --timeout for a server that was up).
func TestSupervisorResumesAServerStartedBefore(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sup, rec := testSupervisor(time.Time{})
	proc := now.Add(-20 * time.Second).Unix() // started (or restarted by systemd) before the run
	before := now.Add(-10 * time.Minute)
	fp := &fakeProbe{t: t, clock: now, step: 2 * time.Second, attempts: [][]probeTick{{
		// Activating: the API answers, the node's Ready is from the previous process, no
		// subnet.env of this process yet.
		{service: "activating", restarts: 1, start: proc, readyz: "ok", node: realNode(t, before)},
		{service: "activating", restarts: 1, start: proc, subnet: before.Unix(), readyz: "ok", node: realNode(t, before)},
		// Flannel of this process wrote subnet.env, the kubelet of this process posted Ready.
		{service: "active", restarts: 1, start: proc, subnet: proc + 17, readyz: "ok", node: realNode(t, now.Add(4*time.Second))},
	}}}
	err, took := runProbe(t, sup, fp, convergeResult{})
	if err != nil {
		t.Fatalf("resumed server that came up: %v", err)
	}
	if took > 5*time.Second || fp.clock.Sub(now) > 10*time.Second {
		t.Fatalf("took %s (fake clock %s) for a server up at its third tick", took, fp.clock.Sub(now))
	}
	if _, ok := sup.w.Reached()[k3s.MilestoneSubnetEnv]; !ok {
		t.Fatalf("done without subnet.env: %v", sup.w.Reached())
	}
	if got := strings.Join(messages(rec, events.PhaseStarted), "\n"); !strings.Contains(got, "running but not up yet") {
		t.Errorf("no watching message: %q", got)
	}
}

// One SIGKILL of the first server's K3s while it comes up: systemd restarts it (NRestarts 1),
// the supervisor says so and judges the milestones again for the new process — a Ready from
// the old process does not count — and the server is up, not a crash loop.
func TestSupervisorRidesOutOneRestart(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sup, rec := testSupervisor(now)
	p1, p2 := now.Unix(), now.Add(12*time.Second).Unix()
	fp := &fakeProbe{t: t, clock: now, step: 2 * time.Second, attempts: [][]probeTick{{
		{service: "activating", start: p1, readyz: "ok", node: realNode(t, now.Add(time.Second))},
		// SIGKILL: exited, waiting the 5 s of RestartSec; the API is gone.
		{service: "activating", start: p1, readyz: "", nodeError: "The connection to the server 127.0.0.1:6443 was refused"},
		// Restarted: a new main process; the Node still shows the old process's Ready.
		{service: "activating", restarts: 1, start: p2, readyz: "ok", node: realNode(t, now.Add(time.Second))},
		{service: "activating", restarts: 1, start: p2, subnet: p2 + 10, readyz: "ok", node: realNode(t, now.Add(time.Second))},
		{service: "active", restarts: 1, start: p2, subnet: p2 + 10, readyz: "ok", node: realNode(t, now.Add(17*time.Second))},
	}}}
	err, _ := runProbe(t, sup, fp, convergeResult{started: now})
	if err != nil {
		t.Fatalf("one restart: %v", err)
	}
	if fp.clock.Sub(now) != 10*time.Second {
		t.Errorf("up at +%s, want +10s (the fifth tick: Ready from the old process must not count)", fp.clock.Sub(now))
	}
	info := strings.Join(messages(rec, events.Info), "\n")
	if !strings.Contains(info, "systemd restarted k3s (NRestarts=1") || !strings.Contains(info, "judged again") {
		t.Errorf("the restart is not said: %q", info)
	}
	n := 0
	for _, e := range rec.Events() {
		if e.Type == events.Milestone && e.Milestone != nil && e.Milestone.Name == string(k3s.MilestoneAPIReady) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("api-ready reported %d times, want once per process", n)
	}
	// The probe is answered after every tick but the last (up): the poll interval, no taint.
	if got := fp.answers(); strings.Join(got, " ") != "0.40 0.40 0.40 0.40" {
		t.Errorf("naps answered %q, want the 0.4 s poll interval after each of the 4 ticks before up", got)
	}
}

// Repeated restarts within k3s.CrashLoopWindow are a crash loop (the rule doctor uses too),
// diagnosed at the second restart; so is a failed unit.
func TestSupervisorCallsRepeatedRestartsACrashLoop(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	for name, ticks := range map[string][]probeTick{
		"two restarts": {
			{service: "activating", start: now.Unix(), readyz: ""},
			{service: "activating", restarts: 1, start: now.Unix() + 7, readyz: ""},
			{service: "activating", restarts: 2, start: now.Unix() + 14, readyz: ""},
			{service: "activating", restarts: 2, start: now.Unix() + 14, readyz: ""},
		},
		"failed": {
			{service: "activating", start: now.Unix(), readyz: ""},
			{service: "failed", start: now.Unix(), readyz: ""},
			{service: "failed", start: now.Unix(), readyz: ""},
		},
	} {
		t.Run(name, func(t *testing.T) {
			sup, _ := testSupervisor(now)
			fp := &fakeProbe{t: t, clock: now, step: 7 * time.Second, attempts: [][]probeTick{ticks}}
			err, _ := runProbe(t, sup, fp, convergeResult{started: now})
			var f *Failure
			if !errors.As(err, &f) || f.Info.Diagnosis != checkid.ServiceFailing {
				t.Fatalf("want the service-failing diagnosis, got %v", err)
			}
			if want := len(ticks) - 1; fp.started != 1 || fp.clock.Sub(now) != time.Duration(want)*7*time.Second {
				t.Errorf("diagnosed at +%s, want at tick %d", fp.clock.Sub(now), want)
			}
		})
	}
}

// A probe that goes quiet is noticed after quietAfter and started again; one that stays quiet
// ends the watch with that cause after bringup.ProbeAttempts, not at the timeout.
func TestSupervisorNoticesAQuietProbe(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	up := probeTick{service: "active", start: now.Unix(), subnet: now.Unix() + 15, readyz: "ok", node: realNode(t, now.Add(10*time.Second))}
	t.Run("restarted", func(t *testing.T) {
		sup, rec := testSupervisor(now)
		sup.quietAfter = 200 * time.Millisecond
		fp := &fakeProbe{t: t, clock: now, step: time.Second, attempts: [][]probeTick{
			{{service: "activating", start: now.Unix(), readyz: ""}}, // then silence
			{up},
		}}
		err, took := runProbe(t, sup, fp, convergeResult{started: now})
		if err != nil {
			t.Fatalf("probe restarted once then up: %v", err)
		}
		if fp.started != 2 || took > 3*time.Second {
			t.Errorf("%d probe starts in %s", fp.started, took)
		}
		if info := strings.Join(messages(rec, events.Info), "\n"); !strings.Contains(info, "the probe delivered nothing for") || !strings.Contains(info, "starting it again (attempt 2 of 3)") {
			t.Errorf("the quiet probe is not said: %q", info)
		}
	})
	t.Run("stays quiet", func(t *testing.T) {
		sup, _ := testSupervisor(now)
		sup.quietAfter = 200 * time.Millisecond
		fp := &fakeProbe{t: t, clock: now, step: time.Second}
		err, took := runProbe(t, sup, fp, convergeResult{started: now})
		if err == nil || !strings.Contains(err.Error(), "the probe delivered nothing for") || !strings.Contains(err.Error(), "3 times in a row") {
			t.Fatalf("want the quiet probe named, got %v", err)
		}
		if fp.started != bringup.ProbeAttempts || took > 5*time.Second {
			t.Errorf("%d probe starts in %s", fp.started, took)
		}
	})
}

// While the bring-up waits, it says at most every heartbeatEvery what it waits for, how long
// it waited and how much of the timeout and stall grace is left.
func TestSupervisorHeartbeat(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sup, rec := testSupervisor(now)
	n := realNode(t, now.Add(-time.Hour))
	n.CreationTimestamp = metav1.NewTime(now.Add(time.Second)) // registered by this start
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k3s.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	var ticks []probeTick
	for range 16 { // 16 ticks 5 s apart: 80 s
		ticks = append(ticks, probeTick{service: "active", start: now.Unix(), readyz: "ok", node: n})
	}
	fp := &fakeProbe{t: t, clock: now, step: 5 * time.Second, attempts: [][]probeTick{ticks}}
	sup.quietAfter = 300 * time.Millisecond
	sup.s.in.opts.StallGrace = 10 * time.Minute
	// No verdict is due within 80 s of a 10 min stall grace: after its ticks the fake probe
	// goes quiet, and that is what ends the watch.
	if err, _ := runProbe(t, sup, fp, convergeResult{started: now}); err == nil || !strings.Contains(err.Error(), "the probe delivered nothing") {
		t.Fatalf("want the watch ended by the quiet probe after the ticks, got %v", err)
	}
	var beats []string
	for _, m := range messages(rec, events.Info) {
		if strings.HasPrefix(m, "still waiting for cp1") {
			beats = append(beats, m)
		}
	}
	if len(beats) != 2 {
		t.Fatalf("want 2 heartbeats in 80 s, got %q", beats)
	}
	for _, want := range []string{"node-ready", "subnet-env", "30s so far", "timeout in 59m30s", "stall grace left 9m"} {
		if !strings.Contains(beats[0], want) {
			t.Errorf("heartbeat %q lacks %q", beats[0], want)
		}
	}
	// While the uninitialized taint is on, the probe is told to look again at the gate's pace.
	if got := fp.answers(); len(got) != 16 || strings.Count(strings.Join(got, " "), "0.10") != 16 {
		t.Errorf("naps answered %q, want 0.10 (bringup.GatePoll) after each of the 16 tainted ticks", got)
	}
}

// After a crash during K3s's first start the uninitialized taint stays while K3s waits for its
// own CRDs (about 70 s on the real K3s v1.36.3, docs/k3s.md): past the stall grace the
// supervisor says so and watches on, up to bringup.CRDWaitGraces graces; F1 is still a stall at once.
func TestSupervisorWaitsOutTheCRDWaitAfterACrash(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	tainted := realNode(t, now.Add(-time.Hour))
	tainted.CreationTimestamp = metav1.NewTime(now.Add(time.Second))
	tainted.Spec.Taints = append(tainted.Spec.Taints, corev1.Taint{Key: k3s.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	crdWait := func(o bringup.Observation) diagnose.Evidence {
		return diagnose.Evidence{NodeName: "cp1", Node: o.Node, ServiceState: o.Service,
			Journal: []string{`Nov 26 18:31:02 cp1 k3s[256]: time="2026-11-26T18:31:02Z" level=info msg="Waiting for CRD addons.k3s.cattle.io to become available"`}}
	}
	var ticks []probeTick
	for range 9 { // 10 s apart: the taint for 90 s of a 60 s grace
		ticks = append(ticks, probeTick{service: "active", start: now.Unix(), readyz: "ok", node: tainted})
	}
	ticks = append(ticks, probeTick{service: "active", start: now.Unix(), subnet: now.Unix() + 95, readyz: "ok", node: realNode(t, now.Add(95*time.Second))})

	sup, rec := testSupervisor(now)
	sup.s.in.opts.StallGrace = time.Minute
	sup.gather = crdWait
	fp := &fakeProbe{t: t, clock: now, step: 10 * time.Second, attempts: [][]probeTick{ticks}}
	if err, _ := runProbe(t, sup, fp, convergeResult{started: now}); err != nil {
		t.Fatalf("CRD wait of 90 s called a failure: %v", err)
	}
	if info := strings.Join(messages(rec, events.Info), "\n"); !strings.Contains(info, "waiting for its own CRDs") {
		t.Errorf("the CRD wait is not said: %q", info)
	}

	// The same taint for longer than crdWaitGraces graces is the stall.
	var long []probeTick
	for range 20 {
		long = append(long, probeTick{service: "active", start: now.Unix(), readyz: "ok", node: tainted})
	}
	sup, _ = testSupervisor(now)
	sup.s.in.opts.StallGrace = time.Minute
	sup.gather = crdWait
	fp = &fakeProbe{t: t, clock: now, step: 10 * time.Second, attempts: [][]probeTick{long}}
	err, _ := runProbe(t, sup, fp, convergeResult{started: now})
	var f *Failure
	if !errors.As(err, &f) || f.Info.Diagnosis != checkid.ManifestDeployerStall || fp.clock.Sub(now) > 200*time.Second {
		t.Fatalf("CRD wait past %d graces: %v at +%s", bringup.CRDWaitGraces, err, fp.clock.Sub(now))
	}
}

// A run stopped while the first server comes up summarises it by what it got (installed,
// started, not up yet), not as "skipped — not reached"; an operation the cancellation stopped
// is not the host's failure.
func TestSummaryOfAnInterruptedBringUp(t *testing.T) {
	sup, rec := testSupervisor(time.Now())
	s, hs := sup.s, sup.hs
	res := convergeResult{installed: true, restarted: true, verb: "start", started: time.Now()}
	hs.setResult(res.status(), res.describe()+"; K3s not up yet when the run ended")
	_ = s.hostFailure(hs, "token", KindInstall, fmt.Errorf("reading the join token: cp1: cat: %w", context.Canceled))
	s.summary(time.Now(), context.Canceled)
	var got *events.SummaryInfo
	for _, e := range rec.Events() {
		if e.Type == events.Summary {
			got = e.Summary
		}
	}
	if got == nil || len(got.Hosts) != 1 {
		t.Fatalf("summary: %+v", got)
	}
	if h := got.Hosts[0]; h.Status != events.StatusChanged || !strings.Contains(h.Message, "ran the install script") || !strings.Contains(h.Message, "not up yet") {
		t.Errorf("cp1 summarised as %s: %s", h.Status, h.Message)
	}
}
