// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/bringup"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
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

// supervisor follows the first server's bring-up: it runs the probe (scripts/probe.sh, one SSH
// channel, started again when it goes quiet), feeds each tick to the bring-up judge
// (bringup.Watch), answers the probe with the nap the judge decided, says what the judge has
// to say, opens the join gates it opens, gathers evidence for a failure verdict and ends the
// run with the diagnosis. It judges nothing itself.
type supervisor struct {
	s  *session
	hs *hostState
	em events.Emitter

	// gate, when set, is closed once servers may join; agentGate once agents may join (with
	// gate, or as soon as the API answers when earlyAgents: the embedded cloud controller
	// removes the taint). Each is set to nil once closed.
	gate, agentGate chan struct{}
	earlyAgents     bool
	// up is called once every milestone is reached, before the probe's channel is closed.
	up func()

	// w is the judge, made by run.
	w *bringup.Watch

	// now is the clock the judgement reads (nil: time.Now; tests give a fake one).
	now func() time.Time
	// stream runs the probe with naps as its standard input and feeds its lines to onLine
	// until ctx ends or the probe ends (nil: probe.sh over the host's connection).
	stream func(ctx context.Context, naps io.Reader, onLine func(string)) error
	// gather, when set, replaces the evidence command (tests).
	gather func(o bringup.Observation) diagnose.Evidence
	// quietAfter is how long the probe may deliver no tick before it counts as quiet (0:
	// bringup.ProbeQuiet of the poll interval).
	quietAfter time.Duration
}

// heartbeatEvery is the most often a wait says what it waits for in the plain output.
const heartbeatEvery = bringup.HeartbeatEvery

func (sup *supervisor) clock() time.Time {
	if sup.now != nil {
		return sup.now()
	}
	return time.Now()
}

// hostLost is the cause a wait on a host is stopped with when the host's connection was found
// dead (remote.Host's Lost).
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

// config is what the judge judges the first server's bring-up by.
func (sup *supervisor) config(res convergeResult) bringup.Config {
	opts := sup.s.in.opts
	cfg := bringup.Config{
		Host: sup.hs.host.Name, Service: sup.hs.plan.Service, Started: res.started, ClockSkew: sup.hs.facts.ClockSkew,
		Timeout: opts.Timeout, StallGrace: opts.StallGrace, PollInterval: opts.PollInterval, EarlyAgents: sup.earlyAgents,
	}
	if !sup.s.in.cluster.EmbeddedFlannel() {
		cfg.SubnetEnvSkipped = bringup.SubnetEnvSkipReason(sup.s.in.cluster.Spec.CNI.Type)
	}
	return cfg
}

// run follows the first server's bring-up until the judge's verdict: up, a diagnosed failure
// (stall, crash loop, timeout), the host's connection lost, or the probe failing again and
// again.
func (sup *supervisor) run(ctx context.Context, res convergeResult) error {
	opts := sup.s.in.opts
	sup.w = bringup.New(sup.config(res), sup.clock())
	sup.say(sup.w.Opening())
	if sup.quietAfter == 0 {
		sup.quietAfter = bringup.ProbeQuiet(opts.PollInterval)
	}
	if sup.stream == nil {
		interval := strconv.FormatFloat(opts.PollInterval.Seconds(), 'f', 2, 64)
		cmd := remote.Script("bring-up probe", probeScript, sup.hs.plan.Service, sup.hs.host.Name, interval).AsRoot()
		sup.stream = func(ctx context.Context, naps io.Reader, onLine func(string)) error {
			return sup.hs.c().Stream(ctx, cmd.WithStdin(naps), onLine)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.Timeout+bringup.StreamSlack)
	defer cancel()
	w := &probeWatch{}
	for {
		ticks, err := sup.streamOnce(wctx, w)
		switch {
		case w.verdict != nil:
			return w.verdict
		case w.done:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return sup.failWith(ctx, bringup.Verdict{Kind: bringup.TimedOut}, w.last)
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
		var lostErr error
		if errors.As(err, &lost) {
			lostErr = lost
		}
		why := ""
		if err != nil {
			why = "the probe ended: " + firstLine(err)
		}
		var q *bringup.QuietError
		if errors.As(err, &q) {
			why = q.Error()
		}
		switch v := sup.w.ProbeEnded(ticks, why, lostErr); v.Kind {
		case bringup.Lost:
			return sup.s.hostFailure(sup.hs, "supervise", KindBringUp, fmt.Errorf("watching bring-up: %w", v.Err))
		case bringup.ProbeFailed:
			return sup.s.hostFailure(sup.hs, "supervise", KindBringUp, fmt.Errorf("watching bring-up: %s", v.Message))
		default:
			sup.em.Info(sup.hs.host.Name, v.Message)
		}
		select {
		case <-wctx.Done():
		case <-time.After(min(time.Second, sup.quietAfter)):
		}
	}
}

// probeWatch is what the probe's lines have told so far: the parser (kept over probe
// restarts), the last full tick, and the outcome.
type probeWatch struct {
	p       bringup.Parser
	last    bringup.Observation
	verdict error
	done    bool
}

// napFeed is the probe's standard input: after each full tick, the nap the judge decided, one
// line (bringup.NapLine). Sending never blocks (a nap the probe has not read yet is replaced
// by none: the probe then naps its default); Read ends with io.EOF once closed.
type napFeed struct {
	lines  chan string
	closed chan struct{}
	rest   string
}

func newNapFeed() *napFeed {
	return &napFeed{lines: make(chan string, 4), closed: make(chan struct{})}
}

func (f *napFeed) send(line string) {
	select {
	case f.lines <- line:
	default:
	}
}

// Read is called by the SSH session's copier only.
func (f *napFeed) Read(p []byte) (int, error) {
	if f.rest == "" {
		select {
		case f.rest = <-f.lines:
		case <-f.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

func (f *napFeed) close() { close(f.closed) }

// streamOnce runs the probe once, feeding its ticks to the judge, until a verdict or done, ctx
// ends, the probe ends, the probe stays quiet for quietAfter (*bringup.QuietError) or the
// host's connection is lost (*hostLost). It returns the number of ticks delivered.
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
					cancel(&bringup.QuietError{Quiet: q})
					return
				}
			}
		}
	}()
	naps := newNapFeed()
	err := sup.stream(sctx, naps, func(line string) {
		if w.done || w.verdict != nil {
			return
		}
		o, full := w.p.Line(line)
		if !full {
			return
		}
		w.last = o
		mu.Lock()
		last = time.Now()
		ticks++
		mu.Unlock()
		done, verdict, nap := sup.tick(ctx, o)
		// The judgement may have gathered evidence over SSH: the probe is not quiet meanwhile.
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		switch {
		case verdict != nil:
			w.verdict = verdict
			cancel(nil)
		case done:
			w.done = true
			cancel(nil)
		case nap > 0:
			naps.send(bringup.NapLine(nap))
		}
	})
	naps.close()
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

// tick gives one tick to the judge and acts on what it says: the notes, the gates, the
// verdict (up; evidence and a diagnosis for a failure). It returns whether the server is up,
// the failure, and the nap to answer the probe with.
func (sup *supervisor) tick(ctx context.Context, o bringup.Observation) (bool, error, time.Duration) {
	r := sup.w.Observe(o, sup.clock())
	sup.say(r.Notes)
	if r.ServersMayJoin && sup.gate != nil {
		close(sup.gate)
		sup.gate = nil
	}
	if r.AgentsMayJoin && sup.agentGate != nil {
		close(sup.agentGate)
		sup.agentGate = nil
	}
	v := r.Verdict
	switch {
	case v.Kind == bringup.Up:
		sup.reportUp(v)
		return true, nil, 0
	case v.NeedsEvidence():
		j := sup.w.Diagnose(v, sup.evidence(ctx, o))
		if j.Fail {
			return false, sup.fail(j.Diagnosis), 0
		}
		sup.em.Info(sup.hs.host.Name, j.Note)
	}
	return false, nil, r.Nap
}

// say emits what the judge has to say, in its order.
func (sup *supervisor) say(notes []bringup.Note) {
	for _, n := range notes {
		switch n.Kind {
		case bringup.NoteStarted:
			sup.em.Started(n.Text)
		case bringup.NoteMilestone:
			sup.em.Milestone(sup.hs.host.Name, n.Milestone)
		default:
			sup.em.Info(sup.hs.host.Name, n.Text)
		}
	}
}

// reportUp says the first server is up, records what it got in its host result, and lets the
// steps waiting for it go on at once.
func (sup *supervisor) reportUp(v bringup.Verdict) {
	if v.Resumed {
		sup.em.Step(sup.hs.host.Name, "health", events.StatusOK, v.Message)
	} else {
		sup.em.Finished(events.StatusOK, v.Message)
	}
	if res := sup.s.boot.firstResult; !sup.s.upgrading(sup.hs) {
		sup.hs.setResult(res.status(), res.describe())
	}
	if sup.up != nil {
		sup.up()
	}
}

// failWith diagnoses a failure verdict from the evidence (o: the last tick) and returns it as
// a bring-up Failure.
func (sup *supervisor) failWith(ctx context.Context, v bringup.Verdict, o bringup.Observation) error {
	return sup.fail(sup.w.Diagnose(v, sup.evidence(ctx, o)).Diagnosis)
}

// evidence gathers what a diagnosis needs in one command; on failure it falls back to the
// probe's tick o.
func (sup *supervisor) evidence(ctx context.Context, o bringup.Observation) diagnose.Evidence {
	if sup.gather != nil {
		return sup.gather(o)
	}
	ev := diagnose.Evidence{
		NodeName:                sup.hs.host.Name,
		Node:                    o.Node,
		SubnetEnvPresent:        o.SubnetRaw != "",
		ServiceState:            o.Service,
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
func (sup *supervisor) fail(d diagnose.Diagnosis) error {
	info := events.ErrorInfo{
		Message:   fmt.Sprintf("%s: %s. %s", sup.hs.host.Name, d.Title, d.Message),
		Fix:       strings.Join(d.Fixes, "\n"),
		Diagnosis: d.ID,
		Evidence:  d.Evidence,
		Resume:    "fix the cause and re-run `k3strap " + sup.s.command + "`; the host keeps what was installed",
	}
	return &Failure{Kind: KindBringUp, Phase: events.PhaseSupervise, Host: sup.hs.host.Name, Info: info}
}

// plural is "1 restart", "2 restarts" (bringup.Plural).
func plural(n int, one, many string) string { return bringup.Plural(n, one, many) }
