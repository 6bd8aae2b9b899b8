// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// HeartbeatEvery is the most often a wait says what it waits for in the plain output.
const HeartbeatEvery = 30 * time.Second

// CRDWaitGraces is how many stall graces the uninitialized taint may stay when the evidence
// shows K3s waiting for the CRDs of its own packaged manifests (diagnose.UninitializedStall's
// manifest-deployer stall): after a crash during K3s's first start the taint stayed about 70 s
// on the real K3s v1.36.3 (docs/k3s.md, "Not every stuck uninitialized taint is F1") — one
// SIGKILL while agents joined is ridden out, not called a stall.
const CRDWaitGraces = 3

// Config is what a Watch judges a server's bring-up by.
type Config struct {
	// Host is the server's inventory name; Service its K3s unit (both for messages).
	Host, Service string
	// Started is when this run (re)started the unit (local clock); zero when the run found K3s
	// running and left it so (resumed: an earlier run or systemd started it), and the watch
	// then judges whatever process runs now, from when it began watching.
	Started time.Time
	// ClockSkew is how far the host's clock is ahead of the local one (facts.Host.ClockSkew).
	ClockSkew time.Duration
	// Timeout bounds the bring-up (Deadline, from Started); StallGrace how long the
	// uninitialized taint may stay (k3s.StallGrace by default); PollInterval the probe's nap
	// between ticks.
	Timeout, StallGrace, PollInterval time.Duration
	// SubnetEnvSkipped, when not "", says why no subnet.env is ever written (flannel-backend:
	// none; SubnetEnvSkipReason): the milestone is reported skipped with it.
	SubnetEnvSkipped string
	// EarlyAgents opens the agents' gate as soon as the API answers: K3s's embedded cloud
	// controller runs on the server and removes the uninitialized taint by itself, and an
	// agent needs nothing else of the server to register (docs/k3s.md "Join gates").
	EarlyAgents bool
}

// SubnetEnvSkipReason is why a cluster whose flannel backend is none has no subnet.env, by the
// CNI that configures pod networking instead.
func SubnetEnvSkipReason(cni inventory.CNIType) string {
	reason := "flannel-backend: none — no subnet.env is ever written; "
	switch cni {
	case inventory.CNICalico:
		return reason + "Calico, deployed by k3strap, configures pod networking"
	case inventory.CNIFlannelStandalone:
		return reason + "the standalone flannel DaemonSet deployed by k3strap configures pod networking"
	default:
		return reason + "the CNI you bring configures pod networking"
	}
}

// Kind is what a verdict says.
type Kind int

const (
	// Waiting: nothing decided; Verdict.Missing lists the milestones not reached yet.
	Waiting Kind = iota
	// Up: every milestone reached; the watch ends.
	Up
	// Stalled: the uninitialized taint outlived the stall grace (F1 or one of its kin):
	// gather evidence and call Watch.Diagnose, which tells F1 from a wait to ride out.
	Stalled
	// CrashLoop: the unit restarts again and again, or systemd gave up (k3s.CrashLoop):
	// gather evidence and call Watch.Diagnose.
	CrashLoop
	// TimedOut: the deadline passed: gather evidence and call Watch.Diagnose.
	TimedOut
	// Lost: the host's connection was found dead (Verdict.Err says why).
	Lost
	// ProbeRetry: the probe ended or went quiet; start it again (Verdict.Message says why).
	ProbeRetry
	// ProbeFailed: the probe ended or went quiet ProbeAttempts times in a row.
	ProbeFailed
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Waiting:
		return "waiting"
	case Up:
		return "up"
	case Stalled:
		return "stalled"
	case CrashLoop:
		return "crash loop"
	case TimedOut:
		return "timed out"
	case Lost:
		return "lost host"
	case ProbeRetry:
		return "probe retry"
	case ProbeFailed:
		return "probe failed"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Verdict is the judgement of one observation (or of a probe's end).
type Verdict struct {
	Kind Kind
	// Missing are the milestones not reached yet (Waiting), in bring-up order.
	Missing []k3s.Milestone
	// Message is what to say: Up's ("cp1 is up after 12.3 s", or the health step's "already
	// up: ..."), ProbeRetry's and ProbeFailed's cause.
	Message string
	// Resumed (Up): the server was found up at once after the run found it running — said
	// as the health step, not as the end of a watch.
	Resumed bool
	// TaintAge (Stalled) is how long the uninitialized taint has been seen.
	TaintAge time.Duration
	// Err (Lost) is why the host is lost.
	Err error
}

// NeedsEvidence reports whether the verdict is a failure to diagnose: gather evidence and call
// Watch.Diagnose.
func (v Verdict) NeedsEvidence() bool {
	return v.Kind == Stalled || v.Kind == CrashLoop || v.Kind == TimedOut
}

// NoteKind says how a Note is said.
type NoteKind int

const (
	// NoteInfo is an info line about the host (events.Emitter.Info).
	NoteInfo NoteKind = iota
	// NoteStarted starts the watch's phase (events.Emitter.Started).
	NoteStarted
	// NoteMilestone is a milestone reached or skipped (events.Emitter.Milestone).
	NoteMilestone
)

// Note is one thing a watch has to say, in the order said.
type Note struct {
	Kind      NoteKind
	Text      string
	Milestone events.MilestoneInfo
}

// Result is what one observation brought.
type Result struct {
	// Notes are to be said, in order.
	Notes []Note
	// ServersMayJoin and AgentsMayJoin are true at the observation that opened that gate
	// (each once per watch; a gate never closes again).
	ServersMayJoin, AgentsMayJoin bool
	Verdict                       Verdict
	// Nap is how long the probe naps before its next tick (answer it with NapLine when the
	// watch goes on); 0 after a quick tick, which the probe expects no answer to.
	Nap time.Duration
}

// Judgement is a diagnosed verdict.
type Judgement struct {
	Diagnosis diagnose.Diagnosis
	// Fail ends the bring-up with Diagnosis; otherwise Note says why the watch goes on.
	Fail bool
	Note string
}

// Watch judges one server's bring-up from the probe's observations. Make it with New; it is
// not safe for concurrent use.
type Watch struct {
	cfg      Config
	deadline Deadline
	// resumed: the run found K3s running (Config.Started zero); quick: while checking such a
	// server, its milestones are held (pending) and only said if it turns out not to be up.
	resumed, quick bool
	pending        []Note
	reached        map[k3s.Milestone]float64
	last           k3s.Milestone
	// proc is the main process start (host clock, epoch seconds) being judged: the first one
	// of this bring-up; when it changes the milestones are judged again. 0 = not seen yet.
	proc int64
	// restarts is NRestarts as last seen (-1 before the first tick); restartsAt the times at
	// which it was seen to go up, for k3s.CrashLoop.
	restarts   int
	restartsAt []time.Time
	// taintSince is when the uninitialized taint was first seen; crdWait that the evidence
	// showed K3s waiting for its own CRDs once the grace passed.
	taintSince time.Time
	crdWait    bool
	lastBeat   time.Time
	// serversOpen, agentsOpen: the gates opened.
	serversOpen, agentsOpen bool
	// fastLeft is how many GatePoll naps are left.
	fastLeft int
	// attempt is the probe's attempt, counted by ProbeEnded.
	attempt int
}

// New starts judging a bring-up at now (local clock).
func New(cfg Config, now time.Time) *Watch {
	w := &Watch{cfg: cfg, resumed: cfg.Started.IsZero(), restarts: -1, lastBeat: now, fastLeft: GatePolls, attempt: 1}
	w.quick = w.resumed
	start := cfg.Started
	if w.resumed {
		start = now
	}
	w.deadline = Deadline{Start: start, Timeout: cfg.Timeout}
	w.reached = map[k3s.Milestone]float64{}
	return w
}

// Deadline is the bring-up's deadline.
func (w *Watch) Deadline() Deadline { return w.deadline }

// Resumed reports whether the run found K3s running (Config.Started zero).
func (w *Watch) Resumed() bool { return w.resumed }

// Opening is what to say as the watch begins: the skipped subnet.env milestone (flannel off),
// then — unless checking a server the run found running, which is only said if it is not up —
// that the watch starts.
func (w *Watch) Opening() []Note {
	var notes []Note
	w.skipSubnetEnv(&notes)
	if !w.quick {
		notes = append(notes, Note{Kind: NoteStarted, Text: fmt.Sprintf("watching %s come up (stall grace %s, timeout %s)", w.cfg.Host, w.cfg.StallGrace, w.cfg.Timeout)})
	}
	return notes
}

// Reached returns the milestones reached by the process judged now, with their seconds since
// the start (a skipped one at 0).
func (w *Watch) Reached() map[k3s.Milestone]float64 {
	out := make(map[k3s.Milestone]float64, len(w.reached))
	for m, s := range w.reached {
		out[m] = s
	}
	return out
}

// joinable reports whether the servers' gate may open: the API answers, the node exists
// and its uninitialized taint is gone (the F1 gate, docs/k3s.md "Join gates"). subnet.env is
// the first node's own flannel milestone, not needed by joining nodes.
func (w *Watch) joinable() bool {
	for _, m := range []k3s.Milestone{k3s.MilestoneAPIReady, k3s.MilestoneRegistered, k3s.MilestoneTaintGone} {
		if _, ok := w.reached[m]; !ok {
			return false
		}
	}
	return true
}

func (w *Watch) skipSubnetEnv(notes *[]Note) {
	if w.cfg.SubnetEnvSkipped == "" {
		return
	}
	if _, seen := w.reached[k3s.MilestoneSubnetEnv]; !seen {
		*notes = append(*notes, Note{Kind: NoteMilestone, Milestone: events.MilestoneInfo{Name: string(k3s.MilestoneSubnetEnv), Skipped: true, Detail: w.cfg.SubnetEnvSkipped}})
	}
	w.reached[k3s.MilestoneSubnetEnv] = 0
}

// Observe judges one tick of the probe seen at now (local clock): it counts restarts, follows
// a new main process, records the milestones this process reached, opens the gates, and
// decides — up, waiting (with a heartbeat at most every HeartbeatEvery), stalled, crash loop
// or timed out.
func (w *Watch) Observe(o Observation, now time.Time) Result {
	var r Result
	if !o.Quick {
		r.Nap = w.nap(o)
	}
	sec := now.Sub(w.deadline.Start).Seconds()
	w.countRestarts(o, now, &r)
	if !w.processFresh(o) {
		// What the probe sees still belongs to the process before this run's (re)start: an
		// old subnet.env, a node Ready from before, an API answering until systemd stops it,
		// a failed state until the start job runs. Only the deadline can be judged.
		if w.deadline.Passed(now) {
			r.Verdict = Verdict{Kind: TimedOut}
			return r
		}
		r.Verdict = w.waiting()
		return r
	}
	w.follow(o, sec, &r)
	hit := w.hits(o)
	for _, m := range k3s.Milestones() {
		detail, ok := hit[m]
		if _, seen := w.reached[m]; !ok || seen {
			continue
		}
		w.reached[m] = sec
		w.last = m
		n := Note{Kind: NoteMilestone, Milestone: events.MilestoneInfo{Name: string(m), Seconds: round1(sec), Detail: detail}}
		if w.quick {
			w.pending = append(w.pending, n)
		} else {
			r.Notes = append(r.Notes, n)
		}
	}
	if !w.serversOpen && w.joinable() {
		w.serversOpen, r.ServersMayJoin = true, true
	}
	if _, api := w.reached[k3s.MilestoneAPIReady]; !w.agentsOpen && (w.serversOpen || (w.cfg.EarlyAgents && api)) {
		w.agentsOpen, r.AgentsMayJoin = true, true
	}
	if len(w.reached) == len(k3s.Milestones()) {
		r.Verdict = w.up(now)
		return r
	}
	if o.Quick {
		r.Verdict = w.waiting()
		return r
	}
	r.Verdict = w.judge(o, now, &r)
	return r
}

// nap decides how long the probe naps after the tick o: GatePoll while the Node carries the
// uninitialized taint (its removal opens the join gate), at most GatePolls times; else the
// poll interval.
func (w *Watch) nap(o Observation) time.Duration {
	if o.Taint(k3s.TaintUninitialized) != nil && w.fastLeft > 0 {
		w.fastLeft--
		return min(GatePoll, w.cfg.PollInterval)
	}
	return w.cfg.PollInterval
}

// processFresh reports whether the observation belongs to this bring-up: after a (re)start
// made by this run, the unit's main process started no earlier than the (re)start (Fresh). A
// server the run found running, or a host without systemd (no start time), is always fresh:
// what it shows now is what is judged, by its current process's start.
func (w *Watch) processFresh(o Observation) bool {
	if w.resumed || o.Start == 0 {
		return true
	}
	return Fresh(Unix(o.Start), Since(w.cfg.Started, w.cfg.ClockSkew))
}

// hits are the milestones o shows for the process judged, with their detail.
func (w *Watch) hits(o Observation) map[k3s.Milestone]string {
	hit := map[k3s.Milestone]string{}
	if o.Service == "active" {
		hit[k3s.MilestoneServiceActive] = ""
	}
	if o.Readyz == "ok" {
		hit[k3s.MilestoneAPIReady] = ""
	}
	proc := Unix(o.Start)
	if n := o.Node; n != nil {
		hit[k3s.MilestoneRegistered] = ""
		if o.Taint(k3s.TaintUninitialized) == nil {
			detail := ""
			if _, seen := w.reached[k3s.MilestoneRegistered]; !seen {
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
			// A Ready condition counts once the kubelet of this process posted it.
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && (o.Start == 0 || Fresh(c.LastHeartbeatTime.Time, proc)) {
				hit[k3s.MilestoneNodeReady] = ""
			}
		}
	}
	// subnet.env counts once flannel of this process wrote it.
	if o.Subnet != nil && w.cfg.SubnetEnvSkipped == "" && (o.Start == 0 || o.SubnetMtime == 0 || Fresh(Unix(o.SubnetMtime), proc)) {
		hit[k3s.MilestoneSubnetEnv] = o.Subnet.String()
	}
	return hit
}

// countRestarts notes every restart systemd made since the last tick (NRestarts went up):
// each is said once, and kept for the crash-loop rule.
func (w *Watch) countRestarts(o Observation, now time.Time, r *Result) {
	switch {
	case w.restarts < 0 || o.Restarts < w.restarts:
		// The first look, or the counter was reset (daemon-reload of a changed unit).
		w.restarts = o.Restarts
		return
	case o.Restarts == w.restarts:
		return
	}
	for range o.Restarts - w.restarts {
		w.restartsAt = append(w.restartsAt, now)
	}
	w.restarts = o.Restarts
	n := w.recentRestarts(now)
	r.Notes = append(r.Notes, Note{Kind: NoteInfo, Text: fmt.Sprintf("systemd restarted %s (NRestarts=%d; %s in the last %s, a crash loop is %d): watching the new process",
		w.cfg.Service, o.Restarts, Plural(n, "restart", "restarts"), k3s.CrashLoopWindow, k3s.CrashLoopRestarts)})
}

// recentRestarts is how many restarts were seen within k3s.CrashLoopWindow before now.
func (w *Watch) recentRestarts(now time.Time) int {
	n := 0
	for _, t := range w.restartsAt {
		if now.Sub(t) <= k3s.CrashLoopWindow {
			n++
		}
	}
	return n
}

// follow moves the watch to the process o shows: the first one of this bring-up is taken as
// it is; when the unit's main process changed since (systemd restarted it, or someone did),
// every milestone is judged again for the new process — what the old one reached (the API, a
// Ready node, subnet.env) does not count for it.
func (w *Watch) follow(o Observation, sec float64, r *Result) {
	if o.Start == 0 || o.Start == w.proc {
		return
	}
	if w.proc == 0 {
		w.proc = o.Start
		return
	}
	w.proc = o.Start
	if len(w.reached) > 0 {
		var had []string
		for _, m := range k3s.Milestones() {
			if _, ok := w.reached[m]; ok {
				had = append(had, string(m))
			}
		}
		r.Notes = append(r.Notes, Note{Kind: NoteInfo, Text: fmt.Sprintf("%s restarted at +%.1f s (new main process): its milestones are judged again (the old process had %s)",
			w.cfg.Service, sec, strings.Join(had, ", "))})
	}
	w.reached = map[k3s.Milestone]float64{}
	w.last = ""
	w.skipSubnetEnv(&r.Notes)
}

// up is the Up verdict at now.
func (w *Watch) up(now time.Time) Verdict {
	if w.quick {
		msg := "already up: node Ready, no uninitialized taint"
		if w.cfg.SubnetEnvSkipped == "" {
			msg += ", subnet.env present"
		}
		return Verdict{Kind: Up, Resumed: true, Message: msg}
	}
	return Verdict{Kind: Up, Message: fmt.Sprintf("%s is up after %.1f s", w.cfg.Host, now.Sub(w.deadline.Start).Seconds())}
}

// waiting is the Waiting verdict: the milestones still missing.
func (w *Watch) waiting() Verdict {
	return Verdict{Kind: Waiting, Missing: w.missing()}
}

func (w *Watch) missing() []k3s.Milestone {
	var missing []k3s.Milestone
	for _, m := range k3s.Milestones() {
		if _, ok := w.reached[m]; !ok {
			missing = append(missing, m)
		}
	}
	return missing
}

// judge decides whether the bring-up stalled (uninitialized taint past the grace period), the
// service crash-loops (k3s.CrashLoop), or the deadline passed. Otherwise it says, at most
// every HeartbeatEvery, what it waits for.
func (w *Watch) judge(o Observation, now time.Time, r *Result) Verdict {
	if w.quick {
		// Left running but not up: watched like a fresh start, saying what it has.
		w.quick = false
		w.lastBeat = now
		r.Notes = append(r.Notes, Note{Kind: NoteStarted, Text: fmt.Sprintf("%s is running but not up yet; watching (stall grace %s, timeout %s)", w.cfg.Host, w.cfg.StallGrace, w.cfg.Timeout)})
		r.Notes = append(r.Notes, w.pending...)
		w.pending = nil
	}
	taint := o.Taint(k3s.TaintUninitialized)
	if taint != nil {
		if w.taintSince.IsZero() {
			w.taintSince = now
			if created := o.Node.CreationTimestamp.Time; !created.IsZero() {
				// A node that existed before this run has carried the taint since it registered.
				local := created.Add(-w.cfg.ClockSkew)
				if local.Before(w.deadline.Start.Add(-5 * time.Second)) {
					w.taintSince = local
				}
			}
		}
		grace := w.cfg.StallGrace
		if age := now.Sub(w.taintSince); age > grace && (!w.crdWait || age > CRDWaitGraces*grace) {
			return Verdict{Kind: Stalled, TaintAge: age}
		}
	}
	if k3s.CrashLoop(o.Service, w.recentRestarts(now)) {
		return Verdict{Kind: CrashLoop}
	}
	if w.deadline.Passed(now) {
		return Verdict{Kind: TimedOut}
	}
	if now.Sub(w.lastBeat) >= HeartbeatEvery {
		w.lastBeat = now
		r.Notes = append(r.Notes, Note{Kind: NoteInfo, Text: w.waitingFor(o, now, taint != nil)})
	}
	return w.waiting()
}

// waitingFor says what the bring-up waits for: the milestones still missing, how long it has
// waited, and how much of the timeout and stall grace is left.
func (w *Watch) waitingFor(o Observation, now time.Time, tainted bool) string {
	var missing []string
	for _, m := range w.missing() {
		missing = append(missing, string(m))
	}
	waited := now.Sub(w.deadline.Start)
	service := o.Service
	if service == "" {
		service = "none"
	}
	msg := fmt.Sprintf("still waiting for %s: %s (service %s; %s so far, timeout in %s",
		w.cfg.Host, strings.Join(missing, ", "), service, waited.Round(time.Second), w.deadline.Left(now).Round(time.Second))
	if tainted && !w.taintSince.IsZero() {
		msg += fmt.Sprintf(", uninitialized taint for %s, stall grace left %s", now.Sub(w.taintSince).Round(time.Second),
			(w.cfg.StallGrace - now.Sub(w.taintSince)).Round(time.Second))
	}
	return msg + ")"
}

// LastReached says the last milestone reached and when ("node-registered at 9.3 s"), or that
// none was.
func (w *Watch) LastReached() string {
	if w.last == "" {
		return "none (the service was started)"
	}
	return fmt.Sprintf("%s at %.1f s", w.last, w.reached[w.last])
}

// Diagnose turns a verdict that needs evidence (Verdict.NeedsEvidence) into a diagnosis from
// ev, the evidence gathered on the host. A stall whose evidence shows K3s waiting for its own
// CRDs (after a crash during its first start) is ridden out once, up to CRDWaitGraces stall
// graces: the judgement then does not fail and its Note says so. Any other verdict gives a
// zero Judgement.
func (w *Watch) Diagnose(v Verdict, ev diagnose.Evidence) Judgement {
	switch v.Kind {
	case Stalled:
		ev.TaintAge = v.TaintAge
		d := diagnose.UninitializedStall(ev)
		if d.ID == checkid.ManifestDeployerStall && !w.crdWait {
			// Not a stall but K3s recovering from a crash during its first start.
			w.crdWait = true
			return Judgement{Diagnosis: d, Note: fmt.Sprintf("%s: %s; watching up to %s of the taint", w.cfg.Host, d.Title, CRDWaitGraces*w.cfg.StallGrace)}
		}
		return Judgement{Diagnosis: d, Fail: true}
	case CrashLoop:
		return Judgement{Diagnosis: diagnose.ServiceFailing(ev, w.cfg.Service), Fail: true}
	case TimedOut:
		return Judgement{Diagnosis: diagnose.Timeout(ev, w.LastReached(), w.cfg.Timeout), Fail: true}
	}
	return Judgement{}
}

// ProbeEnded judges a probe that ended, or was stopped, without a verdict: ticks is how many
// ticks it delivered, why how it ended ("the probe ended: ...", a *QuietError's text), lost
// the host's connection's cause when it was found dead (nil otherwise). A lost host ends the
// watch (Lost); a probe is started again (ProbeRetry) up to ProbeAttempts times in a row — a
// probe that delivered ticks starts the count again — and then the watch fails (ProbeFailed).
func (w *Watch) ProbeEnded(ticks int, why string, lost error) Verdict {
	if lost != nil {
		return Verdict{Kind: Lost, Err: lost}
	}
	if ticks > 0 {
		w.attempt = 1
	}
	if why == "" {
		why = "the probe ended"
	}
	if w.attempt >= ProbeAttempts {
		return Verdict{Kind: ProbeFailed, Message: fmt.Sprintf("%s, %d times in a row (is %s overloaded? `uptime` and `journalctl -u %s` on the host)",
			why, ProbeAttempts, w.cfg.Host, w.cfg.Service)}
	}
	w.attempt++
	return Verdict{Kind: ProbeRetry, Message: fmt.Sprintf("bring-up probe: %s; starting it again (attempt %d of %d)", why, w.attempt, ProbeAttempts)}
}

// Plural is "1 restart", "2 restarts".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }
