// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// superviseStep starts following the first server's bring-up from the (re)start the
// first-server step made (API ready, service active, node registered and Ready, uninitialized
// taint gone, PodCIDR, subnet.env), diagnosing a stall (F1, crash loop, timeout) with
// evidence. It returns as soon as agents may join, and the supervisor keeps watching in the
// background: the bring-up step waits for the rest. Agents may join once the API answers when
// K3s's embedded cloud controller runs on the first server (it removes the uninitialized taint
// by itself, and an agent needs nothing else of the server to register); otherwise — the
// taint's removal depends on an external cloud controller or F1 may be at hand — and for
// joining servers (an etcd member added to a server that then fails would cost quorum) the
// gate is the strict one: the API answers, the node exists and its uninitialized taint is gone
// (docs/k3s.md "Join gates"). A diagnosed failure at any time stops the whole run with the
// diagnosis (joins in flight are cancelled; hosts not started yet stay uploaded only). When
// the first server's K3s version changes (upgrade), it waits for the whole bring-up instead:
// servers are upgraded strictly one at a time.
//
// Reads: s.boot.firstResult; the first server's plan, facts and cloud settings.
// Writes: s.boot.bringUp (the supervisor keeps running in the background; its gates open the
// joins).
type superviseStep struct{}

func (superviseStep) Phase() events.Phase { return events.PhaseSupervise }

func (superviseStep) Summary() string {
	return "watch the first server come up; agents may join once the API answers (its uninitialized taint gone too when the embedded cloud controller is off), servers once the taint is gone"
}

func (superviseStep) Run(ctx context.Context, s *session) error {
	hs := s.first
	bu := &bringUp{gate: make(chan struct{}), agentGate: make(chan struct{}), done: make(chan struct{})}
	s.boot.bringUp = bu
	sup := &supervisor{s: s, hs: hs, em: s.in.emitter(events.PhaseSupervise), gate: bu.gate, agentGate: bu.agentGate,
		earlyAgents: !s.in.cluster.CloudSettings(hs.host).DisableCloudController, up: func() { bu.finish(nil) }}
	res := s.boot.firstResult
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		err := sup.run(ctx, res)
		if err != nil && ctx.Err() == nil {
			hs.setResult(events.StatusFailed, "bring-up: "+firstLine(err))
			s.abort(err)
		}
		bu.finish(err)
	}()
	if s.upgrading(hs) {
		// An upgrade is one server at a time: the first is Ready on the new version and
		// uncordoned before any other server or agent is touched.
		return s.firstUp(ctx)
	}
	return s.waitGate(ctx, bu.agentGate)
}

// waitGate waits until gate (one of s.boot.bringUp's) opens, or the supervisor ends first (then the
// first server's bring-up result decides), or ctx ends.
func (s *session) waitGate(ctx context.Context, gate chan struct{}) error {
	bu := s.boot.bringUp
	if bu == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-bu.done:
		return s.firstUp(ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Preview says what would be watched.
func (superviseStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseSupervise).Info(s.first.host.Name, fmt.Sprintf("would watch %s come up (stall grace %s, timeout %s)", s.first.host.Name, s.in.opts.StallGrace, s.in.opts.Timeout))
	return ctx.Err()
}

// bringUp is the first server's supervisor running in the background.
type bringUp struct {
	// gate is closed when servers may join (and agents, whatever agentGate says); agentGate
	// when agents may join; done when the supervisor finished, with err.
	gate, agentGate, done chan struct{}
	err                   error
	once                  sync.Once
	// finished says firstUp completed the first server's result (read and written by the
	// steps' goroutine only).
	finished bool
}

// finish records the supervisor's result and closes done, once: as soon as the server is up
// (the probe's channel is still being closed then), or when the supervisor returns.
func (bu *bringUp) finish(err error) {
	bu.once.Do(func() {
		bu.err = err
		close(bu.done)
	})
}

// gatePoll is how often the probe looks at the Node while its uninitialized taint is on, and
// gatePolls the most looks at that pace: the taint goes about 3.7 s after the Node registers
// (testdata/real-k3s-v1.36.3/timeline-default.txt), so 150 looks at 0.1 s cover it with room,
// and a cluster in F1 (the taint stays) falls back to PollInterval after about 15 s plus the
// looks' own time.
const (
	gatePoll  = 100 * time.Millisecond
	gatePolls = 150
)

// probeState is the server's state as of the last probe tick.
type probeState struct {
	service  string
	restarts int
	// start is the unit's main process start (epoch seconds, host clock; 0 = unknown);
	// subnetMtime subnet.env's modification time (likewise).
	start       int64
	subnetMtime int64
	readyz      string
	node        *corev1.Node
	nodeErr     string
	subnetRaw   string
	subnet      *diagnose.SubnetEnv
	// quickTick: the probe reported only the service and subnet.env (it just appeared); the
	// milestones it completes count, nothing is judged from it.
	quickTick bool
}

type supervisor struct {
	s  *session
	hs *hostState
	em events.Emitter

	// started is when this run (re)started the unit, or began watching a unit it found
	// running (local clock); the timeout counts from it.
	started time.Time
	reached map[k3s.Milestone]float64
	last    k3s.Milestone
	tick    int
	// taintSince is when the uninitialized taint was first seen (local clock); crdWait that the
	// evidence showed K3s waiting for its own CRDs once the grace passed (crdWaitGraces).
	taintSince time.Time
	crdWait    bool
	// resumed is true when the run found K3s running and left it so (an earlier run, or
	// systemd, started it): no process the host shows is "from before", and the milestones
	// are those of whatever process runs now (its ExecMainStartTimestamp). It never changes.
	resumed bool
	// quick is true while checking a server that was left running: its milestones are only
	// reported if it turns out not to be up.
	quick   bool
	pending []events.MilestoneInfo
	// proc is the main process start (host clock, epoch seconds) of the process being judged:
	// the first one seen that belongs to this bring-up; when it changes (systemd restarted the
	// unit) the milestones are judged again for the new process. 0 = not seen yet.
	proc int64
	// restarts is NRestarts as last seen (-1 before the first tick); restartsAt the times (local
	// clock) at which it was seen to go up while watching, for the crash-loop rule
	// (k3s.CrashLoop).
	restarts   int
	restartsAt []time.Time
	// lastBeat is when the last heartbeat (or the start message) was emitted.
	lastBeat time.Time
	// gate, when set, is closed once servers may join (joinable); then set to nil.
	gate chan struct{}
	// agentGate, when set, is closed once agents may join: with gate, or as soon as the API
	// answers when earlyAgents (the embedded cloud controller removes the taint); then nil.
	agentGate   chan struct{}
	earlyAgents bool
	// up is called once every milestone is reached, before the probe's channel is closed.
	up func()

	// now is the clock the judgement reads (nil: time.Now; tests give a fake one).
	now func() time.Time
	// stream runs the probe and feeds its lines to onLine until ctx ends or the probe ends
	// (nil: probe.sh over the host's connection).
	stream func(ctx context.Context, onLine func(string)) error
	// gather, when set, replaces the evidence command (tests).
	gather func(st *probeState) diagnose.Evidence
	// quietAfter is how long the probe may deliver no tick before it counts as quiet (0:
	// probeQuiet of the poll interval).
	quietAfter time.Duration
}

// crdWaitGraces is how many stall graces the uninitialized taint may stay when the evidence
// shows K3s waiting for the CRDs of its own packaged manifests (diagnose.UninitializedStall's
// manifest-deployer stall): after a crash during K3s's first start the taint stayed about 70 s
// on the real K3s v1.36.3 (docs/k3s.md, "Not every stuck uninitialized taint is F1") — one
// SIGKILL while agents joined is ridden out, not called a stall.
const crdWaitGraces = 3

// heartbeatEvery is the most often a wait says what it waits for in the plain output.
const heartbeatEvery = 30 * time.Second

// probeAttempts is how many times in a row the bring-up probe is started when it goes quiet or
// ends without a verdict, before the supervisor gives up with that cause.
const probeAttempts = 3

// probeQuiet is how long the probe may deliver no tick (`@end`) before it counts as quiet:
// five intervals, at least 20 s — a tick runs systemctl and up to two kubectl calls of at most
// 5 s each (probe.sh), and on the real lane a loaded host (K3s starting beside other tests on
// two cores) once took 15.6 s for one.
func probeQuiet(interval time.Duration) time.Duration {
	return max(20*time.Second, 5*interval)
}

func (sup *supervisor) clock() time.Time {
	if sup.now != nil {
		return sup.now()
	}
	return time.Now()
}

func (sup *supervisor) flannelOff() bool {
	return sup.hs.plan.Config.EffectiveFlannelBackend() == "none"
}

// errProbeQuiet is the cause a probe stream is stopped with when it delivered no tick for
// quietAfter.
type errProbeQuiet struct{ quiet time.Duration }

func (e *errProbeQuiet) Error() string {
	return fmt.Sprintf("the probe delivered nothing for %s", e.quiet.Round(100*time.Millisecond))
}

// hostLost is the cause a wait on a host is stopped with when the host's connection was found
// dead (remote.Client.Lost).
type hostLost struct {
	host  string
	since time.Time
	why   error
}

func (e *hostLost) Error() string {
	return fmt.Sprintf("%s has been unreachable since %s: %v", e.host, e.since.Format("15:04:05"), e.why)
}

func (e *hostLost) Unwrap() error { return e.why }

// lostHost returns the channel closed when hs's connection closes (nil when it has none) and
// a function saying why, as a *hostLost when the link was found dead (nil when the connection
// was closed on purpose).
func lostHost(hs *hostState) (<-chan struct{}, func() error) {
	c := hs.c()
	if c == nil {
		return nil, func() error { return nil }
	}
	return c.Done(), func() error {
		if why := c.Lost(); why != nil {
			return &hostLost{host: hs.host.Name, since: time.Now(), why: why}
		}
		return nil
	}
}

// run follows the first server's bring-up until every milestone is reached, the
// uninitialized taint outlives the grace period (diagnosed), the service crash-loops
// (diagnosed, k3s.CrashLoop), the host's connection is lost, the probe stays quiet, or the
// timeout passes.
func (sup *supervisor) run(ctx context.Context, res convergeResult) error {
	sup.reached = map[k3s.Milestone]float64{}
	sup.restarts = -1
	sup.started = res.started
	sup.resumed = res.started.IsZero()
	sup.quick = sup.resumed
	if sup.resumed {
		sup.started = sup.clock()
	}
	sup.lastBeat = sup.clock()
	sup.skipSubnetEnv()
	if !sup.quick {
		sup.em.Started(fmt.Sprintf("watching %s come up (stall grace %s, timeout %s)", sup.hs.host.Name, sup.s.in.opts.StallGrace, sup.s.in.opts.Timeout))
	}
	opts := sup.s.in.opts
	if sup.quietAfter == 0 {
		sup.quietAfter = probeQuiet(opts.PollInterval)
	}
	if sup.stream == nil {
		interval := strconv.FormatFloat(opts.PollInterval.Seconds(), 'f', 2, 64)
		fast := strconv.FormatFloat(min(gatePoll, opts.PollInterval).Seconds(), 'f', 2, 64)
		cmd := remote.Script("bring-up probe", probeScript, sup.hs.plan.Service, sup.hs.host.Name, interval,
			fast, strconv.Itoa(gatePolls), k3s.TaintUninitialized).AsRoot()
		sup.stream = func(ctx context.Context, onLine func(string)) error { return sup.hs.c().Stream(ctx, cmd, onLine) }
	}
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout+30*time.Second)
	defer cancel()
	w := &probeWatch{st: &probeState{}}
	for attempt := 1; ; attempt++ {
		ticks, err := sup.streamOnce(wctx, w)
		switch {
		case w.verdict != nil:
			return w.verdict
		case w.done:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return sup.fail(ctx, diagnose.Timeout(sup.evidence(ctx, w.st), sup.lastReached(), opts.Timeout))
		}
		var lost *hostLost
		if done, why := lostHost(sup.hs); !errors.As(err, &lost) && done != nil {
			// The probe may end (its channel closed) a moment before the connection is found
			// dead and says why: a probe that failed waits that moment.
			if err != nil {
				select {
				case <-done:
				case <-time.After(min(time.Second, sup.quietAfter)):
				}
			}
			select {
			case <-done:
				if l := why(); l != nil {
					err = l
				}
			default:
			}
		}
		if errors.As(err, &lost) {
			return sup.s.hostFailure(sup.hs, "supervise", KindBringUp, fmt.Errorf("watching bring-up: %w", lost))
		}
		if ticks > 0 {
			attempt = 1
		}
		why := "the probe ended"
		if err != nil {
			why = "the probe ended: " + firstLine(err)
		}
		var q *errProbeQuiet
		if errors.As(err, &q) {
			why = q.Error()
		}
		if attempt >= probeAttempts {
			return sup.s.hostFailure(sup.hs, "supervise", KindBringUp, fmt.Errorf("watching bring-up: %s, %d times in a row (is %s overloaded? `uptime` and `journalctl -u %s` on the host)",
				why, probeAttempts, sup.hs.host.Name, sup.hs.plan.Service))
		}
		sup.em.Info(sup.hs.host.Name, fmt.Sprintf("bring-up probe: %s; starting it again (attempt %d of %d)", why, attempt+1, probeAttempts))
		select {
		case <-wctx.Done():
		case <-time.After(min(time.Second, sup.quietAfter)):
		}
	}
}

// skipSubnetEnv marks subnet.env as not expected when flannel is off (said once, at the start).
func (sup *supervisor) skipSubnetEnv() {
	if !sup.flannelOff() {
		return
	}
	if _, seen := sup.reached[k3s.MilestoneSubnetEnv]; !seen {
		reason := "flannel-backend: none — no subnet.env is ever written; "
		switch sup.s.in.cluster.Spec.CNI.Type {
		case inventory.CNICalico:
			reason += "Calico, deployed by k3strap, configures pod networking"
		case inventory.CNIFlannelStandalone:
			reason += "the standalone flannel DaemonSet deployed by k3strap configures pod networking"
		default:
			reason += "the CNI you bring configures pod networking"
		}
		sup.em.Milestone(sup.hs.host.Name, events.MilestoneInfo{Name: string(k3s.MilestoneSubnetEnv), Skipped: true, Detail: reason})
	}
	sup.reached[k3s.MilestoneSubnetEnv] = 0
}

// probeWatch is what the probe's lines have told so far: the state being assembled for the
// next tick and the outcome.
type probeWatch struct {
	st      *probeState
	verdict error
	done    bool
}

// streamOnce runs the probe once, feeding its ticks to evaluate, until a verdict or done, ctx
// ends, the probe ends, the probe stays quiet for quietAfter (*errProbeQuiet) or the host's
// connection is lost (*hostLost). It returns the number of ticks delivered.
func (sup *supervisor) streamOnce(ctx context.Context, w *probeWatch) (int, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	last, ticks := time.Now(), 0
	stop := make(chan struct{})
	lost, why := lostHost(sup.hs)
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		t := time.NewTicker(max(sup.quietAfter/5, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-lost:
				if err := why(); err != nil {
					cancel(err)
				}
				return
			case <-t.C:
				mu.Lock()
				q := time.Since(last)
				mu.Unlock()
				if q > sup.quietAfter {
					cancel(&errProbeQuiet{quiet: q})
					return
				}
			}
		}
	}()
	err := sup.stream(sctx, func(line string) {
		if w.done || w.verdict != nil {
			return
		}
		if line != "@end" {
			sup.parse(w.st, line)
			return
		}
		mu.Lock()
		last = time.Now()
		ticks++
		mu.Unlock()
		sup.tick++
		d, v := sup.evaluate(ctx, w.st)
		// The evaluation may have gathered evidence over SSH: the probe is not quiet meanwhile.
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		if v != nil {
			w.verdict = v
			cancel(nil)
			return
		}
		if d {
			w.done = true
			sup.reportUp()
			cancel(nil)
			return
		}
		w.st = &probeState{readyz: w.st.readyz}
	})
	close(stop)
	<-watchdog
	mu.Lock()
	n := ticks
	mu.Unlock()
	if cause := context.Cause(sctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return n, cause
	}
	return n, err
}

// reportUp says the first server is up, records what it got in its host result, and lets the
// steps waiting for it go on at once.
func (sup *supervisor) reportUp() {
	if sup.quick {
		sup.em.Step(sup.hs.host.Name, "health", events.StatusOK, "already up: node Ready, no uninitialized taint"+map[bool]string{true: "", false: ", subnet.env present"}[sup.flannelOff()])
	} else {
		sup.em.Finished(events.StatusOK, fmt.Sprintf("%s is up after %.1f s", sup.hs.host.Name, sup.clock().Sub(sup.started).Seconds()))
	}
	if res := sup.s.boot.firstResult; !sup.s.upgrading(sup.hs) {
		sup.hs.setResult(res.status(), res.describe())
	}
	if sup.up != nil {
		sup.up()
	}
}

func (sup *supervisor) parse(st *probeState, line string) {
	tag, rest, _ := strings.Cut(line, " ")
	switch tag {
	case "@service":
		f := strings.Fields(rest)
		if len(f) > 0 {
			st.service = f[0]
		}
		if len(f) > 1 {
			st.restarts, _ = strconv.Atoi(f[1])
		}
	case "@start":
		st.start, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	case "@subnet-mtime":
		st.subnetMtime, _ = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	case "@subnet":
		st.subnetRaw = rest
		if se, err := diagnose.ParseSubnetEnv(rest); err == nil {
			st.subnet = &se
		}
	case "@quick":
		st.quickTick = true
	case "@subnet-missing":
		st.subnetRaw, st.subnet = "", nil
	case "@readyz":
		st.readyz = strings.TrimSpace(rest)
	case "@node":
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "{") {
			var n corev1.Node
			if err := json.Unmarshal([]byte(rest), &n); err == nil {
				st.node = &n
				return
			}
		}
		st.nodeErr = rest
	}
}

// evaluate records new milestones and decides: done, or a verdict (stall, crash loop,
// timeout).
func (sup *supervisor) evaluate(ctx context.Context, st *probeState) (bool, error) {
	now := sup.clock()
	sec := now.Sub(sup.started).Seconds()
	sup.countRestarts(st, now)
	hit := map[k3s.Milestone]string{}
	if !sup.fresh(st) {
		// What the probe sees still belongs to the process before this run's (re)start: an
		// old subnet.env, a node Ready from before, an API answering until systemd stops it,
		// a failed state until the start job runs. Only the timeout can be judged.
		if now.Sub(sup.started) > sup.s.in.opts.Timeout {
			return false, sup.fail(ctx, diagnose.Timeout(sup.evidence(ctx, st), sup.lastReached(), sup.s.in.opts.Timeout))
		}
		return false, nil
	}
	sup.follow(st, sec)
	if st.service == "active" {
		hit[k3s.MilestoneServiceActive] = ""
	}
	if st.readyz == "ok" {
		hit[k3s.MilestoneAPIReady] = ""
	}
	var taint *corev1.Taint
	if n := st.node; n != nil {
		hit[k3s.MilestoneRegistered] = ""
		for i := range n.Spec.Taints {
			if n.Spec.Taints[i].Key == k3s.TaintUninitialized {
				taint = &n.Spec.Taints[i]
			}
		}
		if taint == nil {
			detail := ""
			if _, seen := sup.reached[k3s.MilestoneRegistered]; !seen {
				detail = "registered without it (the kubelet does not run with cloud-provider=external)"
			}
			if n.Spec.ProviderID != "" {
				detail = "providerID " + n.Spec.ProviderID
			}
			hit[k3s.MilestoneTaintGone] = detail
		}
		if n.Spec.PodCIDR != "" {
			hit[k3s.MilestonePodCIDR] = n.Spec.PodCIDR
		}
		for _, c := range n.Status.Conditions {
			// A Ready condition counts once the kubelet of this start posted it.
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && (st.start == 0 || c.LastHeartbeatTime.Unix() >= st.start) {
				hit[k3s.MilestoneNodeReady] = ""
			}
		}
	}
	// subnet.env counts once flannel of this start wrote it.
	if st.subnet != nil && !sup.flannelOff() && (st.start == 0 || st.subnetMtime == 0 || st.subnetMtime >= st.start) {
		hit[k3s.MilestoneSubnetEnv] = st.subnet.String()
	}
	for _, m := range k3s.Milestones() {
		detail, ok := hit[m]
		if _, seen := sup.reached[m]; !ok || seen {
			continue
		}
		sup.reached[m] = sec
		sup.last = m
		mi := events.MilestoneInfo{Name: string(m), Seconds: round1(sec), Detail: detail}
		if sup.quick {
			sup.pending = append(sup.pending, mi)
		} else {
			sup.em.Milestone(sup.hs.host.Name, mi)
		}
	}
	if sup.gate != nil && sup.joinable() {
		close(sup.gate)
		sup.gate = nil
	}
	if sup.agentGate != nil && (sup.gate == nil || (sup.earlyAgents && sup.apiReady())) {
		close(sup.agentGate)
		sup.agentGate = nil
	}
	if len(sup.reached) == len(k3s.Milestones()) {
		return true, nil
	}
	if st.quickTick {
		return false, nil
	}
	return sup.judge(ctx, st, now, taint)
}

// countRestarts notes every restart systemd made since the last tick (NRestarts went up):
// each is said once, and kept for the crash-loop rule.
func (sup *supervisor) countRestarts(st *probeState, now time.Time) {
	switch {
	case sup.restarts < 0 || st.restarts < sup.restarts:
		// The first look, or the counter was reset (daemon-reload of a changed unit).
		sup.restarts = st.restarts
		return
	case st.restarts == sup.restarts:
		return
	}
	for range st.restarts - sup.restarts {
		sup.restartsAt = append(sup.restartsAt, now)
	}
	sup.restarts = st.restarts
	n := sup.recentRestarts(now)
	sup.em.Info(sup.hs.host.Name, fmt.Sprintf("systemd restarted %s (NRestarts=%d; %s in the last %s, a crash loop is %d): watching the new process",
		sup.hs.plan.Service, st.restarts, plural(n, "restart", "restarts"), k3s.CrashLoopWindow, k3s.CrashLoopRestarts))
}

// recentRestarts is how many restarts were seen within k3s.CrashLoopWindow before now.
func (sup *supervisor) recentRestarts(now time.Time) int {
	n := 0
	for _, t := range sup.restartsAt {
		if now.Sub(t) <= k3s.CrashLoopWindow {
			n++
		}
	}
	return n
}

// follow moves the supervisor to the process the probe shows: the first one of this bring-up
// is taken as it is; when the unit's main process changed since (systemd restarted it, or
// someone did), every milestone is judged again for the new process — what the old one reached
// (the API, a Ready node, subnet.env) does not count for it.
func (sup *supervisor) follow(st *probeState, sec float64) {
	if st.start == 0 || st.start == sup.proc {
		return
	}
	if sup.proc == 0 {
		sup.proc = st.start
		return
	}
	sup.proc = st.start
	if len(sup.reached) > 0 {
		var had []string
		for _, m := range k3s.Milestones() {
			if _, ok := sup.reached[m]; ok {
				had = append(had, string(m))
			}
		}
		sup.em.Info(sup.hs.host.Name, fmt.Sprintf("%s restarted at +%.1f s (new main process): its milestones are judged again (the old process had %s)",
			sup.hs.plan.Service, sec, strings.Join(had, ", ")))
	}
	sup.reached = map[k3s.Milestone]float64{}
	sup.last = ""
	sup.skipSubnetEnv()
}

// joinable reports whether other nodes may join: the API answers, the node exists and its
// uninitialized taint is gone (the F1 gate). subnet.env is the first node's own flannel
// milestone and not needed by joining nodes.
func (sup *supervisor) joinable() bool {
	for _, m := range []k3s.Milestone{k3s.MilestoneAPIReady, k3s.MilestoneRegistered, k3s.MilestoneTaintGone} {
		if _, ok := sup.reached[m]; !ok {
			return false
		}
	}
	return true
}

// apiReady reports whether the first server's API answered in this bring-up.
func (sup *supervisor) apiReady() bool {
	_, ok := sup.reached[k3s.MilestoneAPIReady]
	return ok
}

// fresh reports whether the probe's state belongs to this bring-up: after a (re)start made by
// this run, the unit's main process started (host clock) no earlier than the (re)start
// command, allowing 2 s for the clock skew measurement. A server the run found running
// (resumed), or a host without systemd (no start time), is always fresh: what it shows now is
// what is judged, by its current process's start.
func (sup *supervisor) fresh(st *probeState) bool {
	if sup.resumed || st.start == 0 {
		return true
	}
	hostStart := sup.started.Add(sup.hs.facts.ClockSkew).Add(-2 * time.Second)
	return st.start >= hostStart.Unix()
}

// judge decides whether the bring-up stalled (uninitialized taint past the grace period), the
// service crash-loops (k3s.CrashLoop), or the timeout passed; taint is the uninitialized taint
// seen now. Otherwise it says, at most every heartbeatEvery, what it waits for.
func (sup *supervisor) judge(ctx context.Context, st *probeState, now time.Time, taint *corev1.Taint) (bool, error) {
	if sup.quick {
		// Left running but not up: watch it like a fresh start, reporting what it has.
		sup.quick = false
		sup.lastBeat = now
		sup.em.Started(fmt.Sprintf("%s is running but not up yet; watching (stall grace %s, timeout %s)", sup.hs.host.Name, sup.s.in.opts.StallGrace, sup.s.in.opts.Timeout))
		for _, mi := range sup.pending {
			sup.em.Milestone(sup.hs.host.Name, mi)
		}
		sup.pending = nil
	}

	// Stall: the uninitialized taint outlived the grace period.
	if taint != nil {
		if sup.taintSince.IsZero() {
			sup.taintSince = now
			if created := st.node.CreationTimestamp.Time; !created.IsZero() {
				// A node that existed before this run has carried the taint since it registered.
				local := created.Add(-sup.hs.facts.ClockSkew)
				if local.Before(sup.started.Add(-5 * time.Second)) {
					sup.taintSince = local
				}
			}
		}
		grace := sup.s.in.opts.StallGrace
		if age := now.Sub(sup.taintSince); age > grace && (!sup.crdWait || age > crdWaitGraces*grace) {
			ev := sup.evidence(ctx, st)
			ev.TaintAge = age
			d := diagnose.UninitializedStall(ev)
			if d.ID == checkid.ManifestDeployerStall && !sup.crdWait {
				// Not a stall but K3s recovering from a crash during its first start.
				sup.crdWait = true
				sup.em.Info(sup.hs.host.Name, fmt.Sprintf("%s: %s; watching up to %s of the taint", sup.hs.host.Name, d.Title, crdWaitGraces*grace))
				return false, nil
			}
			return false, sup.fail(ctx, d)
		}
	}
	// Crash loop: repeated restarts within the window, or systemd gave up.
	if k3s.CrashLoop(st.service, sup.recentRestarts(now)) {
		ev := sup.evidence(ctx, st)
		return false, sup.fail(ctx, diagnose.ServiceFailing(ev, sup.hs.plan.Service))
	}
	if now.Sub(sup.started) > sup.s.in.opts.Timeout {
		return false, sup.fail(ctx, diagnose.Timeout(sup.evidence(ctx, st), sup.lastReached(), sup.s.in.opts.Timeout))
	}
	if now.Sub(sup.lastBeat) >= heartbeatEvery {
		sup.lastBeat = now
		sup.em.Info(sup.hs.host.Name, sup.waitingFor(st, now, taint))
	}
	return false, nil
}

// waitingFor says what the bring-up waits for: the milestones still missing, how long it has
// waited, and how much of the timeout and stall grace is left.
func (sup *supervisor) waitingFor(st *probeState, now time.Time, taint *corev1.Taint) string {
	var missing []string
	for _, m := range k3s.Milestones() {
		if _, ok := sup.reached[m]; !ok {
			missing = append(missing, string(m))
		}
	}
	opts := sup.s.in.opts
	waited := now.Sub(sup.started)
	msg := fmt.Sprintf("still waiting for %s: %s (service %s; %s so far, timeout in %s",
		sup.hs.host.Name, strings.Join(missing, ", "), orNone(st.service), waited.Round(time.Second), (opts.Timeout - waited).Round(time.Second))
	if taint != nil && !sup.taintSince.IsZero() {
		msg += fmt.Sprintf(", uninitialized taint for %s, stall grace left %s", now.Sub(sup.taintSince).Round(time.Second),
			(opts.StallGrace - now.Sub(sup.taintSince)).Round(time.Second))
	}
	return msg + ")"
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

func (sup *supervisor) lastReached() string {
	if sup.last == "" {
		return "none (the service was started)"
	}
	return fmt.Sprintf("%s at %.1f s", sup.last, sup.reached[sup.last])
}

// evidence gathers what a diagnosis needs in one command; on failure it falls back to the
// probe's last state.
func (sup *supervisor) evidence(ctx context.Context, st *probeState) diagnose.Evidence {
	if sup.gather != nil {
		return sup.gather(st)
	}
	ev := diagnose.Evidence{
		NodeName:                sup.hs.host.Name,
		Node:                    st.node,
		SubnetEnvPresent:        st.subnetRaw != "",
		ServiceState:            st.service,
		ExternalCloudController: sup.s.in.cluster.Spec.K3s.CloudController == inventory.CloudControllerExternal,
	}
	c := sup.hs.c()
	if c == nil {
		return ev
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	res, err := c.Run(ectx, remote.Script("gather evidence", facts.EvidenceScript, facts.EvidenceArgs(sup.hs.plan.Service, sup.hs.host.Name)...).AsRoot())
	if err != nil || res.ExitCode != 0 {
		return ev
	}
	got := facts.ParseEvidence(res.Stdout)
	ev.Journal, ev.Pods = got.Journal, got.Pods
	if got.Node != nil {
		ev.Node = got.Node
	}
	if got.SubnetEnvPresent != nil {
		ev.SubnetEnvPresent = *got.SubnetEnvPresent
	}
	if got.ServiceState != "" {
		ev.ServiceState = got.ServiceState
	}
	ev.ConfigArgs = diagnose.MergeConfigFiles(got.ConfigFiles)
	return ev
}

// fail emits the diagnosis and returns it as a bring-up Failure.
func (sup *supervisor) fail(_ context.Context, d diagnose.Diagnosis) error {
	info := events.ErrorInfo{
		Message:   fmt.Sprintf("%s: %s. %s", sup.hs.host.Name, d.Title, d.Message),
		Fix:       strings.Join(d.Fixes, "\n"),
		Diagnosis: d.ID,
		Evidence:  d.Evidence,
		Resume:    "fix the cause and re-run `k3strap " + sup.s.command + "`; the host keeps what was installed",
	}
	return &Failure{Kind: KindBringUp, Phase: events.PhaseSupervise, Host: sup.hs.host.Name, Info: info}
}

// plural is "1 restart", "2 restarts".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
