// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// Run A's K3s start (timeline-default.txt): 23:35:05.504 wall clock, 0.26 s into the capture.
var (
	runAStart = time.Date(2026, 11, 21, 23, 35, 5, 504_000_000, time.UTC)
	runBStart = time.Date(2026, 11, 21, 23, 36, 20, 909_000_000, time.UTC)
)

func cfg(started time.Time) Config {
	return Config{Host: "vm", Service: "k3s", Started: started, Timeout: 10 * time.Minute, StallGrace: time.Minute, PollInterval: 400 * time.Millisecond}
}

// step is one observation's outcome.
type step struct {
	sec float64
	r   Result
}

// play feeds the ticks to w, each seen at t0 plus its seconds, until a verdict other than
// Waiting; it returns every outcome.
func play(t *testing.T, w *Watch, t0 time.Time, ticks []at) []step {
	t.Helper()
	var p Parser
	var out []step
	for _, a := range ticks {
		o := a.tick.parse(t, &p)
		r := w.Observe(o, t0.Add(time.Duration(a.sec*float64(time.Second))))
		out = append(out, step{sec: a.sec, r: r})
		if r.Verdict.Kind != Waiting {
			break
		}
	}
	return out
}

func milestones(steps []step) map[string]float64 {
	got := map[string]float64{}
	for _, s := range steps {
		for _, n := range s.r.Notes {
			if n.Kind == NoteMilestone {
				got[n.Milestone.Name] = n.Milestone.Seconds
			}
		}
	}
	return got
}

// The default real start, replayed from its Node watch events: every milestone at its real
// time (README: /readyz 7.4 s after the capture began, registered 9.3, Ready 9.5, taint gone
// 13.0, PodCIDR 13.5, subnet.env 15.4 — here counted from K3s's start, 0.26 s later), the
// gates at the API (agents, with the embedded cloud controller) and at the taint's removal
// (servers), up at subnet.env's quick tick.
func TestWatchReplaysTheRealDefaultStart(t *testing.T) {
	ev := nodeEvents(t, "node-events-default.jsonl")
	ticks := replayRun(t, ev, runAStart, 0.26, 7.42-0.26, 8.0, 15.44-0.26)
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("earlyAgents=%v", early), func(t *testing.T) {
			c := cfg(runAStart)
			c.EarlyAgents = early
			w := New(c, runAStart)
			if notes := w.Opening(); len(notes) != 1 || notes[0].Kind != NoteStarted || notes[0].Text != "watching vm come up (stall grace 1m0s, timeout 10m0s)" {
				t.Errorf("opening %+v", notes)
			}
			steps := play(t, w, runAStart, ticks)
			last := steps[len(steps)-1]
			if last.r.Verdict.Kind != Up || last.sec != 15.44-0.26 || last.r.Verdict.Message != "vm is up after 15.2 s" {
				t.Fatalf("ended with %v %q at +%.2f s", last.r.Verdict.Kind, last.r.Verdict.Message, last.sec)
			}
			want := map[string]float64{"api-ready": 7.2, "node-registered": 9, "service-active": 9, "node-ready": 9.3,
				"uninitialized-taint-gone": 12.7, "podcidr-set": 13.2, "subnet-env": 15.2}
			got := milestones(steps)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("milestones %v, want %v", got, want)
			}
			for _, s := range steps {
				for _, n := range s.r.Notes {
					if n.Milestone.Name == "uninitialized-taint-gone" && n.Milestone.Detail != "providerID k3s://vm" {
						t.Errorf("taint gone detail %q", n.Milestone.Detail)
					}
				}
			}
			var servers, agents float64
			for _, s := range steps {
				if s.r.ServersMayJoin {
					servers = s.sec
				}
				if s.r.AgentsMayJoin {
					agents = s.sec
				}
			}
			wantAgents := 12.96 - 0.26
			if early {
				wantAgents = 7.42 - 0.26
			}
			if fmt.Sprintf("%.2f %.2f", servers, agents) != fmt.Sprintf("%.2f %.2f", 12.96-0.26, wantAgents) {
				t.Errorf("gates: servers at %.2f, agents at %.2f; want %.2f, %.2f", servers, agents, 12.96-0.26, wantAgents)
			}
		})
	}
}

// The F1 real start (disable-cloud-controller with kubelet cloud-provider=external): the
// taint never goes, subnet.env comes anyway; once the taint outlived the stall grace the
// verdict is Stalled, and the evidence of the real capture (its Node, its K3s log lines, no
// external cloud controller declared) diagnoses F1. Neither gate opens without the embedded
// cloud controller.
func TestWatchDiagnosesF1FromTheRealCapture(t *testing.T) {
	ev := nodeEvents(t, "node-events-f1.jsonl")
	ticks := replayRun(t, ev, runBStart, 0.20, 9.27-0.20, 9.5, 15.45-0.20)
	lastNode := ev[len(ev)-1].Event.Object
	for sec := 30.0; sec <= 90; sec += 10 {
		ticks = append(ticks, at{sec: sec, tick: probeTick{service: "active", start: runBStart.Unix(), readyz: "ok", node: &lastNode,
			subnetMtime: runBStart.Add(15 * time.Second).Unix(), subnet: subnetLine(t)}})
	}
	w := New(cfg(runBStart), runBStart)
	steps := play(t, w, runBStart, ticks)
	last := steps[len(steps)-1]
	v := last.r.Verdict
	// The node registered 9.7 s after the start carrying the taint: a minute later, at the
	// first tick past 69.7 s.
	if v.Kind != Stalled || last.sec != 70 || v.TaintAge.Round(100*time.Millisecond) != time.Duration(70*float64(time.Second))-time.Duration((9.93-0.20)*float64(time.Second)).Round(100*time.Millisecond) {
		t.Fatalf("verdict %v (taint %s) at +%.1f s", v.Kind, v.TaintAge, last.sec)
	}
	if !v.NeedsEvidence() {
		t.Error("a stall needs evidence")
	}
	for _, s := range steps {
		if s.r.ServersMayJoin || s.r.AgentsMayJoin {
			t.Errorf("a gate opened at +%.1f s with the taint on", s.sec)
		}
	}
	got := milestones(steps)
	if _, ok := got["subnet-env"]; !ok {
		t.Errorf("subnet.env of the F1 start not reached: %v", got)
	}
	if _, ok := got["uninitialized-taint-gone"]; ok {
		t.Errorf("taint gone in F1: %v", got)
	}
	j := w.Diagnose(v, diagnose.Evidence{NodeName: "vm", Node: readNode(t, "node-f1.json"), ServiceState: "active",
		Journal: strings.Split(strings.TrimSpace(string(readCapture(t, "log-lines-f1.txt"))), "\n")})
	if !j.Fail || j.Diagnosis.ID != checkid.F1CloudController {
		t.Fatalf("diagnosis %s (fail %v): %s", j.Diagnosis.ID, j.Fail, j.Diagnosis.Title)
	}
	if !strings.Contains(strings.Join(j.Diagnosis.Evidence, "\n"), "for 1m0s") {
		t.Errorf("the taint's age is not in the evidence: %q", j.Diagnosis.Evidence)
	}
}

// After a crash during K3s's first start the taint stays while K3s waits for its own CRDs:
// past the grace that is said once and ridden out up to CRDWaitGraces graces, then it is the
// manifest-deployer stall.
func TestWatchRidesOutTheCRDWaitOnce(t *testing.T) {
	t0 := runBStart
	n := readNode(t, "node-registered-uninitialized.json")
	n.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	crd := diagnose.Evidence{NodeName: "vm", Node: n, ServiceState: "active",
		Journal: []string{`Nov 26 18:31:02 cp1 k3s[256]: time="2026-11-26T18:31:02Z" level=info msg="Waiting for CRD addons.k3s.cattle.io to become available"`}}
	w := New(cfg(t0), t0)
	var p Parser
	tick := probeTick{service: "active", start: t0.Unix(), readyz: "ok", node: n}
	var stalls []float64
	for sec := 10.0; sec <= 300; sec += 10 {
		r := w.Observe(tick.parse(t, &p), t0.Add(time.Duration(sec)*time.Second))
		if r.Verdict.Kind != Stalled {
			if r.Verdict.Kind != Waiting {
				t.Fatalf("+%.0f s: %v", sec, r.Verdict.Kind)
			}
			continue
		}
		stalls = append(stalls, sec)
		j := w.Diagnose(r.Verdict, crd)
		if j.Diagnosis.ID != checkid.ManifestDeployerStall {
			t.Fatalf("diagnosis %s", j.Diagnosis.ID)
		}
		if len(stalls) == 1 {
			if j.Fail || !strings.Contains(j.Note, "watching up to 3m0s of the taint") {
				t.Fatalf("first CRD wait: fail %v note %q", j.Fail, j.Note)
			}
			continue
		}
		if !j.Fail {
			t.Fatal("the second CRD wait past the graces did not fail")
		}
		break
	}
	// Seen at +10 s: past a minute at +80 s, past three at +200 s.
	if fmt.Sprint(stalls) != "[80 200]" {
		t.Errorf("stalls at %v, want [80 200]", stalls)
	}
}

// A node that registered before this run (a re-run against a node stuck in F1) has carried
// the taint since its registration: the grace counts from then, converted to the local clock.
func TestWatchCountsTheTaintFromAnOldRegistration(t *testing.T) {
	t0 := runBStart.Truncate(time.Second)
	n := readNode(t, "node-f1.json")
	n.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Minute).Add(3 * time.Second)) // host clock 3 s ahead
	c := cfg(t0)
	c.ClockSkew = 3 * time.Second
	w := New(c, t0)
	var p Parser
	r := w.Observe(probeTick{service: "active", start: t0.Unix() + 3, readyz: "ok", node: withHeartbeat(n, t0.Add(8*time.Second))}.parse(t, &p), t0.Add(5*time.Second))
	if r.Verdict.Kind != Stalled || r.Verdict.TaintAge.Round(time.Second) != 10*time.Minute+5*time.Second {
		t.Fatalf("verdict %v taint age %s, want stalled at 10m5s", r.Verdict.Kind, r.Verdict.TaintAge)
	}
}

// tickAt is a tick of a process started at start (epoch seconds), unit active, API ready,
// the real node with a Ready heartbeat hb, subnet.env written at mtime (0: missing).
func tickAt(t *testing.T, start int64, hb time.Time, mtime int64, restarts int) probeTick {
	tk := probeTick{service: "active", restarts: restarts, start: start, readyz: "ok", node: withHeartbeat(readNode(t, "node-default.json"), hb)}
	if mtime != 0 {
		tk.subnetMtime, tk.subnet = mtime, subnetLine(t)
	}
	return tk
}

// subnet.env and a Ready condition count only when written by the process judged: after this
// run's restart, an old file or an old heartbeat is from before. A process that started
// before the restart shows nothing of this bring-up at all.
func TestWatchFreshness(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	start := t0.Unix() + 1 // the restarted process
	tests := []struct {
		name              string
		skew              time.Duration
		tick              probeTick
		subnet, ready, up bool
	}{
		{"subnet.env and Ready of this process", 0, tickAt(t, start, t0.Add(9*time.Second), start+15, 0), true, true, true},
		{"subnet.env written in the process's start second", 0, tickAt(t, start, t0.Add(9*time.Second), start, 0), true, true, true},
		{"subnet.env stale: written before the restart", 0, tickAt(t, start, t0.Add(9*time.Second), start-60, 0), false, true, false},
		{"Ready stale: heartbeat before the restart", 0, tickAt(t, start, t0.Add(-time.Minute), start+15, 0), true, false, false},
		{"subnet.env missing", 0, tickAt(t, start, t0.Add(9*time.Second), 0, 0), false, true, false},
		{"process from before the restart", 0, tickAt(t, t0.Unix()-600, t0.Add(9*time.Second), start+15, 0), false, false, false},
		{"process within the skew's tolerance", 0, tickAt(t, t0.Unix()-2, t0.Add(9*time.Second), start+15, 0), true, true, true},
		{"host clock 30 s behind: the process is this run's", -30 * time.Second, tickAt(t, t0.Unix()-29, t0.Add(-20*time.Second), t0.Unix()-20, 0), true, true, true},
		{"no systemd: no start time, all counts", 0, tickAt(t, 0, t0.Add(-time.Hour), t0.Unix()-3600, 0), true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg(t0)
			c.ClockSkew = tt.skew
			w := New(c, t0)
			var p Parser
			o := tt.tick.parse(t, &p)
			r := w.Observe(o, t0.Add(20*time.Second))
			got := w.Reached()
			_, subnet := got[k3s.MilestoneSubnetEnv]
			_, ready := got[k3s.MilestoneNodeReady]
			if subnet != tt.subnet || ready != tt.ready || (r.Verdict.Kind == Up) != tt.up {
				t.Errorf("subnet.env %v Ready %v verdict %v; want %v %v up %v", subnet, ready, r.Verdict.Kind, tt.subnet, tt.ready, tt.up)
			}
		})
	}
}

// An unknown subnet.env time (stat failed) with the file there counts: only a known older
// time makes it stale.
func TestWatchSubnetEnvWithoutItsTime(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	w := New(cfg(t0), t0)
	var p Parser
	o := tickAt(t, t0.Unix()+1, t0.Add(9*time.Second), 1, 0).parse(t, &p)
	o.SubnetMtime = 0
	if r := w.Observe(o, t0.Add(20*time.Second)); r.Verdict.Kind != Up {
		t.Fatalf("verdict %v, reached %v", r.Verdict.Kind, w.Reached())
	}
}

// A single restart of K3s (one SIGKILL, systemd's Restart=always) is not a crash loop: it is
// said, the milestones are judged again for the new process — a Ready from the old one does
// not count — and the server comes up. Two restarts within k3s.CrashLoopWindow are; so is a
// failed unit; two restarts further apart than the window are not.
func TestWatchRestartsAndCrashLoops(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	p1, p2, p3 := t0.Unix(), t0.Unix()+12, t0.Unix()+24
	down := probeTick{service: "activating", start: p1, readyz: "ok", nodeErr: "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"}
	tests := []struct {
		name  string
		ticks []at
		want  Kind
		at    float64
		notes []string
	}{
		{"one restart", []at{
			{8, tickAt(t, p1, t0.Add(8*time.Second), 0, 0)},
			{10, down},
			{13, tickAt(t, p2, t0.Add(8*time.Second), 0, 1)},    // new process, Ready of the old one
			{20, tickAt(t, p2, t0.Add(8*time.Second), p2+7, 1)}, // subnet.env of the new one, Ready still old
			{22, tickAt(t, p2, t0.Add(21*time.Second), p2+7, 1)},
		}, Up, 22, []string{
			"systemd restarted k3s (NRestarts=1; 1 restart in the last 5m0s, a crash loop is 2): watching the new process",
			"k3s restarted at +13.0 s (new main process): its milestones are judged again (the old process had api-ready, service-active, node-registered, node-ready, uninitialized-taint-gone, podcidr-set)",
		}},
		{"two restarts within the window", []at{
			{5, probeTick{service: "activating", start: p1, readyz: "x"}},
			{12, probeTick{service: "activating", restarts: 1, start: p2, readyz: "x"}},
			{24, probeTick{service: "activating", restarts: 2, start: p3, readyz: "x"}},
		}, CrashLoop, 24, nil},
		{"two restarts at once", []at{
			{5, probeTick{service: "activating", start: p1, readyz: "x"}},
			{30, probeTick{service: "activating", restarts: 2, start: p3, readyz: "x"}},
		}, CrashLoop, 30, nil},
		{"systemd gave up", []at{
			{5, probeTick{service: "activating", start: p1, readyz: "x"}},
			{12, probeTick{service: "failed", start: p1, readyz: "x"}},
		}, CrashLoop, 12, nil},
		{"two restarts further apart than the window", []at{
			{5, probeTick{service: "activating", start: p1, readyz: "x"}},
			{12, probeTick{service: "activating", restarts: 1, start: p2, readyz: "x"}},
			{12 + k3s.CrashLoopWindow.Seconds() + 1, probeTick{service: "activating", restarts: 2, start: p3, readyz: "x"}},
		}, Waiting, 0, nil},
		{"NRestarts reset (daemon-reload)", []at{
			{5, probeTick{service: "activating", restarts: 4, start: p1, readyz: "x"}},
			{12, probeTick{service: "activating", restarts: 0, start: p1, readyz: "x"}},
			{19, probeTick{service: "activating", restarts: 1, start: p2, readyz: "x"}},
		}, Waiting, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg(t0)
			c.Timeout = time.Hour
			w := New(c, t0)
			steps := play(t, w, t0, tt.ticks)
			last := steps[len(steps)-1]
			if last.r.Verdict.Kind != tt.want || (tt.want != Waiting && last.sec != tt.at) {
				t.Fatalf("verdict %v at +%.0f s, want %v at +%.0f s", last.r.Verdict.Kind, last.sec, tt.want, tt.at)
			}
			var info []string
			apiReady := 0
			for _, s := range steps {
				for _, n := range s.r.Notes {
					if n.Kind == NoteInfo {
						info = append(info, n.Text)
					}
					if n.Milestone.Name == string(k3s.MilestoneAPIReady) {
						apiReady++
					}
				}
			}
			if tt.notes != nil {
				if strings.Join(info, "\n") != strings.Join(tt.notes, "\n") {
					t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(info, "\n"), strings.Join(tt.notes, "\n"))
				}
				if apiReady != 2 {
					t.Errorf("api-ready said %d times, want once per process", apiReady)
				}
			}
			if tt.want == CrashLoop {
				j := w.Diagnose(last.r.Verdict, diagnose.Evidence{NodeName: "vm", ServiceState: "activating",
					Journal: strings.Split(string(readCapture(t, "journal-crashloop-readonly-sysctl.txt")), "\n")})
				if !j.Fail || j.Diagnosis.ID != checkid.ServiceFailing || !strings.Contains(j.Diagnosis.Evidence[0], "Failed to start ContainerManager") {
					t.Errorf("diagnosis %s fail %v evidence %q", j.Diagnosis.ID, j.Fail, j.Diagnosis.Evidence)
				}
			}
		})
	}
}

// A run resumed after Ctrl-C (or any re-run) that finds K3s running judges what the host
// shows now: an already-Ready server is up at the first tick, said as the health step with
// nothing else; one that is not up yet is watched like a start, its milestones so far said
// then.
func TestWatchResumed(t *testing.T) {
	now := runAStart.Add(time.Hour)
	proc := now.Add(-20 * time.Minute).Unix() // started by the interrupted run
	up := tickAt(t, proc, now.Add(-3*time.Second), proc+15, 0)
	t.Run("already up", func(t *testing.T) {
		w := New(cfg(time.Time{}), now)
		if n := w.Opening(); len(n) != 0 {
			t.Errorf("opening of a resumed watch: %+v", n)
		}
		var p Parser
		r := w.Observe(up.parse(t, &p), now.Add(300*time.Millisecond))
		if r.Verdict.Kind != Up || !r.Verdict.Resumed || r.Verdict.Message != "already up: node Ready, no uninitialized taint, subnet.env present" {
			t.Fatalf("verdict %+v", r.Verdict)
		}
		if len(r.Notes) != 0 || !r.ServersMayJoin || !r.AgentsMayJoin {
			t.Errorf("notes %+v, gates %v %v", r.Notes, r.ServersMayJoin, r.AgentsMayJoin)
		}
	})
	t.Run("already up, flannel off", func(t *testing.T) {
		c := cfg(time.Time{})
		c.SubnetEnvSkipped = SubnetEnvSkipReason(inventory.CNICalico)
		w := New(c, now)
		if n := w.Opening(); len(n) != 1 || !n[0].Milestone.Skipped || !strings.Contains(n[0].Milestone.Detail, "Calico") {
			t.Errorf("opening %+v", n)
		}
		var p Parser
		o := up
		o.subnetMtime = 0
		r := w.Observe(o.parse(t, &p), now)
		if r.Verdict.Kind != Up || r.Verdict.Message != "already up: node Ready, no uninitialized taint" {
			t.Fatalf("verdict %+v", r.Verdict)
		}
	})
	t.Run("running, not up yet", func(t *testing.T) {
		w := New(cfg(time.Time{}), now)
		var p Parser
		notUp := tickAt(t, proc, now.Add(-3*time.Second), 0, 0)
		r := w.Observe(notUp.parse(t, &p), now.Add(time.Second))
		if r.Verdict.Kind != Waiting || fmt.Sprint(r.Verdict.Missing) != "[subnet-env]" {
			t.Fatalf("verdict %+v", r.Verdict)
		}
		if len(r.Notes) != 7 || r.Notes[0].Kind != NoteStarted || r.Notes[0].Text != "vm is running but not up yet; watching (stall grace 1m0s, timeout 10m0s)" {
			t.Fatalf("notes %+v", r.Notes)
		}
		r = w.Observe(up.parse(t, &p), now.Add(2*time.Second))
		if r.Verdict.Kind != Up || r.Verdict.Resumed || r.Verdict.Message != "vm is up after 2.0 s" {
			t.Fatalf("verdict %+v", r.Verdict)
		}
	})
}

// The deadline: nothing before it, TimedOut after it — also while the probe still shows the
// process from before the restart; the timeout's diagnosis names the last milestone.
func TestWatchDeadline(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	c := cfg(t0)
	c.Timeout = 2 * time.Minute
	registered := probeTick{service: "active", start: t0.Unix(), readyz: "ok", node: readNode(t, "node-registered-uninitialized.json")}
	registered.node.Spec.Taints = nil
	old := probeTick{service: "active", start: t0.Unix() - 600, readyz: "ok"}
	tests := []struct {
		name string
		tick probeTick
		sec  float64
		want Kind
	}{
		{"at the deadline", registered, 120, Waiting},
		{"past the deadline", registered, 120.5, TimedOut},
		{"old process, before", old, 119, Waiting},
		{"old process, past", old, 121, TimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(c, t0)
			var p Parser
			w.Observe(registered.parse(t, &p), t0.Add(10*time.Second))
			r := w.Observe(tt.tick.parse(t, &p), t0.Add(time.Duration(tt.sec*float64(time.Second))))
			if r.Verdict.Kind != tt.want {
				t.Fatalf("verdict %v, want %v", r.Verdict.Kind, tt.want)
			}
			if tt.want == TimedOut {
				j := w.Diagnose(r.Verdict, diagnose.Evidence{NodeName: "vm", Node: registered.node})
				if !j.Fail || j.Diagnosis.ID != checkid.BringUpTimeout || j.Diagnosis.Title != "the server did not come up within 2m0s" ||
					!strings.Contains(j.Diagnosis.Evidence[0], "uninitialized-taint-gone at 10.0 s") {
					t.Errorf("diagnosis %+v", j.Diagnosis)
				}
			}
		})
	}
}

// The heartbeat: at most every HeartbeatEvery, what is missing, how long, the timeout and the
// stall grace left.
func TestWatchHeartbeat(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	c := cfg(t0)
	c.StallGrace = 3 * time.Minute
	w := New(c, t0)
	n := readNode(t, "node-registered-uninitialized.json")
	n.CreationTimestamp = metav1.NewTime(t0.Add(9 * time.Second))
	var p Parser
	var beats []string
	for sec := 10; sec <= 70; sec += 5 {
		r := w.Observe(probeTick{service: "active", start: t0.Unix(), readyz: "ok", node: n}.parse(t, &p), t0.Add(time.Duration(sec)*time.Second))
		for _, n := range r.Notes {
			if n.Kind == NoteInfo {
				beats = append(beats, fmt.Sprintf("+%d %s", sec, n.Text))
			}
		}
	}
	want := []string{
		"+30 still waiting for vm: node-ready, uninitialized-taint-gone, podcidr-set, subnet-env (service active; 30s so far, timeout in 9m30s, uninitialized taint for 20s, stall grace left 2m40s)",
		"+60 still waiting for vm: node-ready, uninitialized-taint-gone, podcidr-set, subnet-env (service active; 1m0s so far, timeout in 9m0s, uninitialized taint for 50s, stall grace left 2m10s)",
	}
	if strings.Join(beats, "\n") != strings.Join(want, "\n") {
		t.Errorf("heartbeats:\n%s\nwant:\n%s", strings.Join(beats, "\n"), strings.Join(want, "\n"))
	}
}

// The probe naps at the gate's pace while the Node carries the uninitialized taint, at most
// GatePolls times, and at the poll interval otherwise; a quick tick gets no answer.
func TestWatchNaps(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	tainted := probeTick{service: "active", start: t0.Unix(), readyz: "ok", node: readNode(t, "node-registered-uninitialized.json")}
	clean := tickAt(t, t0.Unix(), t0, 0, 0)
	quick := probeTick{service: "active", start: t0.Unix(), subnetMtime: t0.Unix() + 15, subnet: subnetLine(t), quick: true}
	for _, tt := range []struct {
		name     string
		interval time.Duration
		ticks    []probeTick
		want     []time.Duration
	}{
		{"taint on, then gone", 400 * time.Millisecond, []probeTick{tainted, tainted, clean}, []time.Duration{GatePoll, GatePoll, 400 * time.Millisecond}},
		{"poll interval below the gate's pace", 50 * time.Millisecond, []probeTick{tainted, clean}, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}},
		{"quick tick", 400 * time.Millisecond, []probeTick{clean, quick}, []time.Duration{400 * time.Millisecond, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg(t0)
			c.PollInterval = tt.interval
			c.StallGrace = time.Hour
			w := New(c, t0)
			var p Parser
			for i, tk := range tt.ticks {
				if got := w.Observe(tk.parse(t, &p), t0.Add(time.Duration(i+1)*time.Second)).Nap; got != tt.want[i] {
					t.Errorf("tick %d: nap %s, want %s", i, got, tt.want[i])
				}
			}
		})
	}
	t.Run("budget", func(t *testing.T) {
		c := cfg(t0)
		c.StallGrace = time.Hour
		w := New(c, t0)
		var p Parser
		fast := 0
		for i := range GatePolls + 10 {
			if w.Observe(tainted.parse(t, &p), t0.Add(time.Duration(i)*100*time.Millisecond)).Nap == GatePoll {
				fast++
			}
		}
		if fast != GatePolls {
			t.Errorf("%d fast naps, want %d", fast, GatePolls)
		}
	})
	if NapLine(GatePoll) != "0.10\n" || NapLine(1500*time.Millisecond) != "1.50\n" {
		t.Errorf("nap lines %q %q", NapLine(GatePoll), NapLine(1500*time.Millisecond))
	}
}

// A restarted process without flannel: subnet.env is skipped again (said again) and up
// follows without it.
func TestWatchFlannelOff(t *testing.T) {
	t0 := runAStart.Truncate(time.Second)
	c := cfg(t0)
	c.SubnetEnvSkipped = SubnetEnvSkipReason(inventory.CNINone)
	w := New(c, t0)
	opening := w.Opening()
	if len(opening) != 2 || opening[0].Milestone.Detail != "flannel-backend: none — no subnet.env is ever written; the CNI you bring configures pod networking" {
		t.Fatalf("opening %+v", opening)
	}
	var p Parser
	w.Observe(probeTick{service: "activating", start: t0.Unix(), readyz: "ok"}.parse(t, &p), t0.Add(8*time.Second))
	r := w.Observe(probeTick{service: "activating", restarts: 1, start: t0.Unix() + 12, readyz: "ok"}.parse(t, &p), t0.Add(13*time.Second))
	skipped := 0
	for _, n := range r.Notes {
		if n.Milestone.Skipped {
			skipped++
		}
	}
	if skipped != 1 {
		t.Errorf("subnet.env skipped %d times after the restart: %+v", skipped, r.Notes)
	}
	r = w.Observe(tickAt(t, t0.Unix()+12, t0.Add(20*time.Second), 0, 1).parse(t, &p), t0.Add(20*time.Second))
	if r.Verdict.Kind != Up {
		t.Fatalf("verdict %+v", r.Verdict)
	}
	if SubnetEnvSkipReason(inventory.CNIFlannelStandalone) == SubnetEnvSkipReason(inventory.CNINone) {
		t.Error("standalone flannel not told apart")
	}
}

// A probe that ends without a verdict is started again, up to ProbeAttempts times in a row
// (a probe that delivered ticks starts the count again); a lost host ends the watch at once.
func TestWatchProbeEnded(t *testing.T) {
	lost := errors.New("cp1 has been unreachable since 10:00:00: keepalives unanswered")
	tests := []struct {
		name  string
		ends  []int // ticks delivered by each probe
		lost  error
		kinds []Kind
	}{
		{"quiet three times", []int{0, 0, 0}, nil, []Kind{ProbeRetry, ProbeRetry, ProbeFailed}},
		{"ticks in between", []int{0, 0, 5, 0, 0}, nil, []Kind{ProbeRetry, ProbeRetry, ProbeRetry, ProbeRetry, ProbeFailed}},
		{"lost host", []int{3}, lost, []Kind{Lost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(cfg(runAStart), runAStart)
			var kinds []Kind
			var last Verdict
			for _, n := range tt.ends {
				last = w.ProbeEnded(n, (&QuietError{Quiet: 20 * time.Second}).Error(), tt.lost)
				kinds = append(kinds, last.Kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) {
				t.Fatalf("kinds %v, want %v", kinds, tt.kinds)
			}
			switch last.Kind {
			case Lost:
				if !errors.Is(last.Err, lost) {
					t.Errorf("lost cause %v", last.Err)
				}
			case ProbeFailed:
				if last.Message != "the probe delivered nothing for 20s, 3 times in a row (is vm overloaded? `uptime` and `journalctl -u k3s` on the host)" {
					t.Errorf("message %q", last.Message)
				}
			}
		})
	}
	w := New(cfg(runAStart), runAStart)
	if v := w.ProbeEnded(0, "", nil); v.Message != "bring-up probe: the probe ended; starting it again (attempt 2 of 3)" {
		t.Errorf("retry message %q", v.Message)
	}
	if ProbeQuiet(400*time.Millisecond) != 20*time.Second || ProbeQuiet(10*time.Second) != 50*time.Second {
		t.Error("ProbeQuiet")
	}
}

// Every kind has a name; a verdict that is not a failure diagnoses nothing.
func TestKinds(t *testing.T) {
	for k := Waiting; k <= ProbeFailed; k++ {
		if strings.HasPrefix(k.String(), "kind ") {
			t.Errorf("kind %d unnamed", k)
		}
	}
	if Kind(99).String() != "kind 99" {
		t.Error(Kind(99).String())
	}
	w := New(cfg(runAStart), runAStart)
	for _, k := range []Kind{Waiting, Up, Lost, ProbeRetry} {
		if (Verdict{Kind: k}).NeedsEvidence() || w.Diagnose(Verdict{Kind: k}, diagnose.Evidence{}).Fail {
			t.Errorf("%v needs evidence", k)
		}
	}
	if Plural(1, "node", "nodes") != "1 node" || Plural(0, "node", "nodes") != "0 nodes" {
		t.Error("Plural")
	}
}
