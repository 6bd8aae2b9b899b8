// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer"
)

// SiteRunner runs command (apply, upgrade, preflight, check, doctor) on one site with the
// per-cluster engine, its events going to sink, and tells obs what the run saw besides its
// events. It returns the engine's error: nil, an *installer.Failure, or the context's error.
type SiteRunner func(ctx context.Context, s *Site, command string, sink events.Sink, obs Observer) error

// Observer receives what a site's run reports besides its events; the runner passes both
// functions, never nil.
type Observer struct {
	// Nodes is given the nodes each time the run lists them (installer.Options.NodesListed).
	Nodes func([]corev1.Node)
	// HostContact is told whether each host could be reached (installer.Options.HostContact):
	// it tells an offline site from a failed one (unreachable.go).
	HostContact func(host string, err error)
}

// RunOptions configure a fleet run.
type RunOptions struct {
	// Command is what runs on every site: apply, upgrade, preflight, check or doctor.
	Command string
	// Changes says the command changes the sites (apply, upgrade): the rollout's waves, canary
	// and stop rules apply, and done sites are checked instead of run again. Without it every
	// site runs, none stops the others.
	Changes bool
	// Record says the run's outcome goes into the state file (not for apply --dry-run).
	Record bool
	// Rerun runs done sites again although their inventory did not change.
	Rerun bool
	// StatePath is the state file (default StatePath of the fleet file and shard).
	StatePath string
	// Confirm is asked before every wave after the first when rollout.pause is set (nil: no
	// pause). It returns false to stop the rollout there.
	Confirm func(ctx context.Context, next Wave, of int) (bool, error)
	// Run runs the command on one site.
	Run SiteRunner
	// Sink receives every event: the sites' (stamped with their site) and the fleet's.
	Sink events.Sink
	// Exit maps a site's or the run's error to the process exit code and its meaning (the
	// command layer's table); nil: 0 "success" and 1 for any error.
	Exit func(error) (code int, meaning string)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Report, when set, is called after each site's run with the site's record (report.go:
	// spec.management's PushReporter); its error is a warning.
	Report func(ctx context.Context, s *Site, st SiteState) error
}

// runner is one fleet run.
type runner struct {
	f     *Fleet
	opts  RunOptions
	em    events.Emitter
	j     *Journal
	waves []Wave
	shard Shard

	mu      sync.Mutex
	results map[string]*events.SiteResult
	errs    map[string]error
	// failed counts the sites that failed in this run; maxFail is how many may
	// (rollout.maxFailedSites of the run's sites).
	failed, maxFail int
	stopped         string        // why the rollout stopped ("" while it goes on)
	stopCh          chan struct{} // closed when stopped is set
}

// Run runs opts.Command over the sites of plan (Fleet.Plan) under the rollout policy: it
// takes the state file's lock (TakeLock), runs wave after wave with
// rollout.concurrency sites at once — a done site whose digest did not change is checked
// (`check`) instead of run again, and run if the check fails — records every site's
// transitions in the state file, emits each site's result and the fleet's summary, and stops
// a rollout when the canary fails or more than rollout.maxFailedSites sites failed (running
// sites finish, no new one starts) or ctx is cancelled (running sites stop as a cancelled run
// does).
//
// It returns nil when every site succeeded; else the error of the site with the highest exit
// code wrapped in a *RolloutError (errors.As finds the site's *installer.Failure, so the exit
// code is the site's), a *installer.Failure of KindCancelled when cancelled, of KindInstall when
// another run holds the lock.
func Run(ctx context.Context, f *Fleet, plan Plan, opts RunOptions) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Exit == nil {
		opts.Exit = func(err error) (int, string) {
			if err == nil {
				return 0, "success"
			}
			return 1, "error"
		}
	}
	start := opts.Now()
	r := &runner{f: f, opts: opts, em: events.Emitter{Sink: opts.Sink, Phase: events.PhaseFleet, Now: opts.Now},
		waves: plan.Waves, shard: plan.Shard, results: map[string]*events.SiteResult{}, errs: map[string]error{}, stopCh: make(chan struct{})}
	r.maxFail = f.Spec.Rollout.MaxFailedSites.Of(plan.Sites(), false)
	for _, w := range r.waves {
		for _, s := range w.Sites {
			r.results[s.Name] = &events.SiteResult{Site: s.Name, Wave: w.Number, Status: events.SitePending}
		}
	}
	err := r.run(ctx, start)
	r.summary(start, err)
	return err
}

// run takes the lock, opens the state and runs the waves.
func (r *runner) run(ctx context.Context, start time.Time) error {
	path := r.opts.StatePath
	if path == "" {
		path = StatePath(r.f.Source, r.shard)
	}
	lk, err := TakeLock(path, r.opts.Command, start)
	if err != nil {
		var le *ErrLocked
		if !errors.As(err, &le) {
			return err
		}
		f := &installer.Failure{Kind: installer.KindInstall, Phase: events.PhaseLock, Info: events.ErrorInfo{
			Message: le.Error(),
			Fix:     "wait for that run to finish (the lock goes with its process, however it ends); two shards of one fleet take --shard I/N and lock their own state files",
			Resume:  "re-run the same command",
		}}
		r.em.WithPhase(events.PhaseLock).Fail("", "", f.Info)
		return f
	}
	defer lk.Unlock()
	if r.j, err = OpenJournal(path, r.f, r.shard, r.opts.Now); err != nil {
		return err
	}
	r.em.Started(r.describe())
	for i, w := range r.waves {
		if ctx.Err() != nil || r.stopReason() != "" {
			break
		}
		if i > 0 && r.opts.Confirm != nil && r.opts.Changes && r.f.Spec.Rollout.Pause {
			ok, err := r.opts.Confirm(ctx, w, len(r.waves))
			if err != nil && ctx.Err() != nil {
				return r.outcome(ctx)
			}
			if err != nil {
				return err
			}
			if !ok {
				r.stop(fmt.Sprintf("stopped before wave %d/%d as asked", w.Number, len(r.waves)))
				return &installer.Failure{Kind: installer.KindCancelled, Phase: events.PhaseFleet, Info: events.ErrorInfo{
					Message: fmt.Sprintf("the rollout stopped before wave %d of %d as asked", w.Number, len(r.waves)),
					Resume:  "re-run the same command to continue: done sites are checked, not run again"}}
			}
		}
		r.wave(ctx, w)
	}
	return r.outcome(ctx)
}

// describe is the run's opening line.
func (r *runner) describe() string {
	what := fmt.Sprintf("%s on %d site(s) of fleet %s", r.opts.Command, len(r.results), r.f.Metadata.Name)
	if sh := r.shard; sh.N > 0 {
		what += " (shard " + sh.String() + ")"
	}
	conc := r.concurrency()
	if !r.opts.Changes {
		return fmt.Sprintf("%s, %d at a time; state %s", what, conc, r.j.Path())
	}
	canary := "no canary"
	if len(r.waves) > 0 && r.waves[0].Canary {
		canary = fmt.Sprintf("canary %d", len(r.waves[0].Sites))
	}
	u := r.f.Spec.Rollout.Unreachable
	unreachable := fmt.Sprintf("unreachable sites tried %d time(s), %s apart, within %s, then deferred", u.attempts(), u.retryAfter(), u.maxWait())
	if u.CountAsFailed {
		unreachable = strings.TrimSuffix(unreachable, "deferred") + "failed"
	}
	return fmt.Sprintf("%s in %d wave(s) (%s, then waves of %s; %d at a time; stop when more than %d fail; %s); state %s",
		what, len(r.waves), canary, r.f.Spec.Rollout.BatchSize(), conc, r.maxFail, unreachable, r.j.Path())
}

func (r *runner) concurrency() int {
	if c := r.f.Spec.Rollout.Concurrency; c > 0 {
		return c
	}
	return DefaultConcurrency
}

func (r *runner) siteTimeout() time.Duration {
	if t := r.f.Spec.Rollout.SiteTimeout.D(); t > 0 {
		return t
	}
	return DefaultSiteTimeout.D()
}

func (r *runner) stop(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(why)
}

// stopLocked records the first reason the rollout stops; r.mu is held.
func (r *runner) stopLocked(why string) {
	if r.stopped == "" {
		r.stopped = why
		close(r.stopCh)
	}
}

func (r *runner) stopReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// wave runs one wave's sites, rollout.concurrency at a time; no new site starts once the run
// is cancelled or the rollout stopped.
func (r *runner) wave(ctx context.Context, w Wave) {
	info := events.WaveInfo{Number: w.Number, Of: len(r.waves), Canary: w.Canary, Sites: w.Names()}
	label := fmt.Sprintf("wave %d/%d", w.Number, len(r.waves))
	if w.Canary {
		label += " (canary)"
	}
	if r.opts.Changes {
		r.em.Wave(events.StatusRunning, fmt.Sprintf("%s: %s", label, strings.Join(info.Sites, ", ")), info)
	}
	sem := make(chan struct{}, r.concurrency())
	var wg sync.WaitGroup
	for _, s := range w.Sites {
		sl := &slot{sem: sem}
		if !sl.acquire(ctx, nil) || r.stopReason() != "" {
			sl.release()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sl.release()
			r.site(ctx, w, s, sl)
		}()
	}
	wg.Wait()
	for _, s := range w.Sites {
		switch r.result(s.Name).Status {
		case events.SiteDone, events.SiteChecked, events.SiteWarnings:
			info.Done++
		case events.SiteFailed:
			info.Failed++
		case events.SiteDeferred:
			info.Deferred++
		}
	}
	if !r.opts.Changes {
		return
	}
	st, msg := events.StatusOK, fmt.Sprintf("%s: %d done", label, info.Done)
	if info.Failed > 0 {
		st, msg = events.StatusFailed, fmt.Sprintf("%s: %d done, %d failed", label, info.Done, info.Failed)
	}
	if info.Deferred > 0 {
		msg += fmt.Sprintf(", %d deferred (unreachable)", info.Deferred)
	}
	if pending := len(w.Sites) - info.Done - info.Failed - info.Deferred; pending > 0 {
		msg += fmt.Sprintf(", %d not finished", pending)
	}
	r.em.Wave(st, msg, info)
}

func (r *runner) result(name string) events.SiteResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.results[name]
}

// attempt is one run of the command (or the check of a done site) on a site.
type attempt struct {
	action  string
	start   time.Time
	err     error
	contact Contact
}

// site runs the command on one site (or checks a done one) and records it. In a rollout, a
// site found unreachable (unreachable.go) is deferred and tried again as
// rollout.unreachable says, its slot free while it waits; it ends deferred (or failed, with
// countAsFailed) when its attempts are spent.
func (r *runner) site(ctx context.Context, w Wave, s *Site, sl *slot) {
	pol := r.f.Spec.Rollout.Unreachable
	var first time.Time
	for n := 1; ; n++ {
		a := r.attempt(ctx, w, s)
		next, wait := NextEnd, time.Duration(0)
		if r.opts.Changes {
			next, wait = pol.Decide(Attempt{Number: n, Err: a.err, Contact: a.contact, FirstUnreachable: first,
				End: r.opts.Now(), Stopping: ctx.Err() != nil || r.stopReason() != ""})
		}
		if next != NextEnd && first.IsZero() {
			first = r.opts.Now()
		}
		var res events.SiteResult
		switch next {
		case NextRetry:
			res = r.deferred(s, w, a, n, wait)
			r.setResult(res, nil)
			r.em.Site(res)
			if r.pause(ctx, sl, wait) {
				continue
			}
			// Cancelled or stopped while it waited: no attempt starts any more.
			res = r.deferred(s, w, a, n, 0)
		case NextDeferred:
			res = r.deferred(s, w, a, n, 0)
		case NextFailed:
			a.err = &unreachableError{attempts: n, err: a.err}
			res = r.finishRecord(s, w, a.action, a.start, a.err)
			res.Attempt, res.LastReached = n, r.lastReached(s, a.contact)
		default:
			res = r.finishRecord(s, w, a.action, a.start, a.err)
			if n > 1 {
				res.Attempt = n
			}
			res.LastReached = r.lastReached(s, a.contact)
		}
		if w.Canary && r.opts.Changes {
			switch res.Status {
			case events.SiteFailed:
				r.stop(fmt.Sprintf("the canary %s failed", s.Name))
			case events.SiteDeferred:
				r.stop(fmt.Sprintf("the canary %s is unreachable (deferred): no later wave runs before a canary succeeded", s.Name))
			}
		}
		if res.Status == events.SiteDeferred {
			a.err = nil // not a failure: outcome counts deferred sites from their status
		}
		r.setResult(res, a.err)
		r.em.Site(res)
		r.report(ctx, s)
		return
	}
}

// attempt runs the command (or checks a done site, and runs the command if the check fails
// for another reason than the site being unreachable) within rollout.siteTimeout. It records
// the start and when a host last answered; the caller judges and records the outcome.
func (r *runner) attempt(ctx context.Context, w Wave, s *Site) attempt {
	prev := r.j.Site(s.Name)
	action := r.opts.Command
	if r.opts.Changes && !r.opts.Rerun && prev.Rollout != nil && prev.Rollout.Status == events.SiteDone && prev.Rollout.Digest == s.Digest {
		action = "check"
	}
	start := r.opts.Now()
	r.setResult(events.SiteResult{Site: s.Name, Wave: w.Number, Status: events.SiteRunning, Action: action}, nil)
	r.record(s, w, action, &Record{Command: action, Status: events.SiteRunning, Digest: s.Digest, Started: start.UTC()})
	sink := events.SiteSink(s.Name, r.opts.Sink)
	sctx, cancel := context.WithTimeout(ctx, r.siteTimeout())
	defer cancel()
	run := func(action string) (Contact, error) {
		t := newContactTracker(action, r.opts.Now)
		obs := Observer{Nodes: func(nodes []corev1.Node) { r.observe(s, nodes) }, HostContact: t.host}
		err := r.opts.Run(sctx, s, action, t.sink(sink), obs)
		c := t.contact()
		r.reached(s, c)
		return c, err
	}
	contact, err := run(action)
	if action == "check" && err != nil && sctx.Err() == nil && !contact.Unreachable() {
		// The site changed since it was done (reset, broken, drifted): apply converges it.
		r.finishRecord(s, w, action, start, err)
		events.Emitter{Sink: sink, Phase: events.PhaseFleet, Now: r.opts.Now}.Info("",
			fmt.Sprintf("the check of done site %s failed (%v): running %s on it again", s.Name, err, r.opts.Command))
		action, start = r.opts.Command, r.opts.Now()
		r.record(s, w, action, &Record{Command: action, Status: events.SiteRunning, Digest: s.Digest, Started: start.UTC()})
		contact, err = run(action)
	}
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		err = &installer.Failure{Kind: installer.KindInstall, Phase: events.PhaseFleet, Info: events.ErrorInfo{
			Message: fmt.Sprintf("site %s timed out: rollout.siteTimeout %s ran out; its run was stopped as Ctrl-C stops one", s.Name, r.siteTimeout()),
			Fix:     "raise spec.rollout.siteTimeout, or look at the site's events for the step that took long",
			Resume:  "re-run: the site continues where it stopped"}}
	}
	return attempt{action: action, start: start, err: err, contact: contact}
}

// setResult stores a site's result (and its error) and counts failures for the stop rules.
func (r *runner) setResult(res events.SiteResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[res.Site] = &res
	if err != nil {
		r.errs[res.Site] = err
	}
	if res.Status == events.SiteFailed && r.opts.Changes {
		r.failed++
		if r.failed > r.maxFail {
			r.stopLocked(fmt.Sprintf("%d site(s) failed, more than rollout.maxFailedSites (%d)", r.failed, r.maxFail))
		}
	}
}

// finishRecord turns a site's outcome into its result and records it.
func (r *runner) finishRecord(s *Site, w Wave, action string, start time.Time, err error) events.SiteResult {
	end := r.opts.Now()
	code, meaning := r.opts.Exit(err)
	res := events.SiteResult{Site: s.Name, Wave: w.Number, Action: action, ExitCode: code, Exit: meaning, Seconds: end.Sub(start).Seconds()}
	switch kind := installer.KindOf(err); {
	case err == nil && action == "check" && r.opts.Changes:
		res.Status, res.Message = events.SiteChecked, "done earlier with this inventory; checked"
	case err == nil:
		res.Status, res.Message = events.SiteDone, r.opts.Command+" succeeded"
	case kind == installer.KindFindingsWarning:
		res.Status, res.Message = events.SiteWarnings, "doctor found warnings"
	case kind == installer.KindCancelled:
		res.Status, res.Message = events.SiteCancelled, "cancelled while "+action+" ran; re-running continues it"
	default:
		res.Status, res.Message = events.SiteFailed, err.Error()
	}
	var f *installer.Failure
	if errors.As(err, &f) && res.Status != events.SiteCancelled {
		res.Host, res.Phase, res.Message = f.Host, string(f.Phase), f.Info.Message
	}
	var ue *unreachableError
	if errors.As(err, &ue) {
		res.Message = fmt.Sprintf("unreachable after %d attempt(s), counted as failed (rollout.unreachable.countAsFailed): %s", ue.attempts, res.Message)
	}
	rec := &Record{Command: action, Status: res.Status, Digest: s.Digest, ExitCode: code, Exit: res.Exit,
		Host: res.Host, Phase: res.Phase, Message: res.Message, Started: start.UTC(), Finished: end.UTC()}
	if ue != nil {
		rec.Attempts = ue.attempts
	}
	if res.Status == events.SiteChecked {
		rec.Status = events.SiteDone
	}
	if action == "doctor" {
		rec.Verdict = doctorVerdict(err)
	}
	r.record(s, w, action, rec)
	return res
}

// record writes a site's record of action into the state (not under --dry-run): a rollout's
// apply or upgrade into Rollout; the check of a done site into Check and the rollout's
// Checked time; other commands into their own record.
func (r *runner) record(s *Site, w Wave, action string, rec *Record) {
	if !r.opts.Record {
		return
	}
	err := r.j.Update(s.Name, func(st *SiteState) {
		st.Inventory = s.Path
		if r.opts.Changes {
			st.Wave = w.Number
		}
		switch {
		case action == "check" && r.opts.Changes:
			st.Check = rec
			if st.Rollout != nil && rec.Status == events.SiteDone {
				st.Rollout.Checked = rec.Finished
			}
		case action == "apply" || action == "upgrade":
			st.Rollout = rec
		case action == "preflight":
			st.Preflight = rec
		case action == "check":
			st.Check = rec
		case action == "doctor":
			st.Doctor = rec
		}
	})
	if err != nil {
		// A state that cannot be written stops the rollout: its progress would be lost.
		r.em.Fail(s.Name, "state", events.ErrorInfo{Message: err.Error(), Fix: "make the state file's directory writable, or give --state FILE elsewhere"})
		r.stop("the state file cannot be written: " + err.Error())
	}
}

// observe records the nodes a site's run listed.
func (r *runner) observe(s *Site, nodes []corev1.Node) {
	if !r.opts.Record {
		return
	}
	o := Observe(nodes, r.opts.Now())
	_ = r.j.Update(s.Name, func(st *SiteState) { st.Cluster = o })
}

// Observe is what nodes say of a site's cluster at at: the distinct kubelet versions (sorted),
// how many nodes there are and how many have a Ready condition True.
func Observe(nodes []corev1.Node, at time.Time) *Observed {
	o := &Observed{Nodes: len(nodes), At: at.UTC()}
	for _, n := range nodes {
		if v := n.Status.NodeInfo.KubeletVersion; v != "" && !slices.Contains(o.Versions, v) {
			o.Versions = append(o.Versions, v)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				o.Ready++
			}
		}
	}
	slices.Sort(o.Versions)
	return o
}

// outcome is the run's error: cancelled, the stop, or the failed site with the highest exit
// code.
func (r *runner) outcome(ctx context.Context) error {
	if ctx.Err() != nil {
		return &installer.Failure{Kind: installer.KindCancelled, Phase: events.PhaseFleet, Info: events.ErrorInfo{
			Message: "cancelled: running sites finished or were stopped before anything was half-written; the state file says which are done",
			Resume:  "re-run the same command: done sites are checked, not run again"}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var worst error
	var site string
	for _, w := range r.waves {
		for _, s := range w.Sites {
			if err := r.errs[s.Name]; err != nil && (worst == nil || r.code(err) > r.code(worst)) {
				worst, site = err, s.Name
			}
		}
	}
	pending := 0
	var deferred []string
	for _, w := range r.waves {
		for _, s := range w.Sites {
			switch r.results[s.Name].Status {
			case events.SitePending:
				pending++
			case events.SiteDeferred:
				deferred = append(deferred, s.Name)
			}
		}
	}
	if worst == nil && len(deferred) > 0 {
		// Every site reached succeeded: the deferred ones are not failures, but the run is
		// not complete either — its own exit meaning (docs/fleet.md "Offline sites").
		msg := fmt.Sprintf("%d site(s) unreachable, deferred: %s", len(deferred), strings.Join(deferred, ", "))
		if r.stopped != "" {
			msg += fmt.Sprintf("; the rollout stopped: %s; %d site(s) not started", r.stopped, pending)
		}
		return &installer.Failure{Kind: installer.KindDeferred, Phase: events.PhaseFleet, Info: events.ErrorInfo{
			Message: msg,
			Fix:     "bring the sites back online (power, uplink, VPN); k3strap fleet status -f " + r.f.Source + " shows when each was last reached",
			Resume:  "re-run the same command once they are back: done sites are checked, deferred and pending sites run"}}
	}
	if worst == nil && r.stopped != "" {
		return &installer.Failure{Kind: installer.KindInstall, Phase: events.PhaseFleet, Info: events.ErrorInfo{Message: "the rollout stopped: " + r.stopped}}
	}
	if worst == nil {
		return nil
	}
	re := &RolloutError{Site: site, Err: worst}
	// A stop with no site left to start is the end of the rollout, not a stop.
	if r.stopped != "" && pending > 0 {
		re.Stopped = r.stopped
		r.em.Fail("", "", events.ErrorInfo{
			Message: fmt.Sprintf("the rollout stopped: %s; %d site(s) not started", r.stopped, pending),
			Fix:     "look at the failed sites' errors above (k3strap fleet status -f " + r.f.Source + " lists them)",
			Resume:  "fix the cause and re-run the same command: done sites are checked, not run again; failed and pending sites run"})
	}
	return re
}

// RolloutError is a fleet run that ended with failed sites: Err is the error of Site, the
// failed site with the highest exit code (errors.As and the exit code see through to it).
type RolloutError struct {
	Site string
	Err  error
	// Stopped says why the rollout stopped before its end ("" when it ran every wave).
	Stopped string
}

func (e *RolloutError) Error() string {
	msg := fmt.Sprintf("site %s: %v", e.Site, e.Err)
	if e.Stopped != "" {
		msg = "the rollout stopped (" + e.Stopped + "); " + msg
	}
	return msg
}

// Unwrap returns the site's error.
func (e *RolloutError) Unwrap() error { return e.Err }

// summary emits the fleet's summary: every site of the run in wave order.
func (r *runner) summary(start time.Time, err error) {
	sum := events.SummaryInfo{Command: r.opts.Command, OK: err == nil, Waves: len(r.waves), Seconds: r.opts.Now().Sub(start).Seconds()}
	sum.ExitCode, sum.ExitMeaning = r.opts.Exit(err)
	var failed, deferred []string
	for _, w := range r.waves {
		for _, s := range w.Sites {
			res := r.result(s.Name)
			sum.Sites = append(sum.Sites, res)
			switch res.Status {
			case events.SiteFailed:
				failed = append(failed, s.Name)
			case events.SiteDeferred:
				deferred = append(deferred, s.Name)
			}
		}
	}
	file := r.f.Source
	if len(failed) > 0 {
		sum.Next = append(sum.Next, "look at: "+strings.Join(failed, ", "))
	}
	if len(deferred) > 0 {
		sum.Next = append(sum.Next, "unreachable, deferred: "+strings.Join(deferred, ", ")+" — re-run once they are back online")
	}
	switch {
	case err != nil && r.opts.Changes:
		sum.Next = append(sum.Next, fmt.Sprintf("k3strap %s -f %s%s   # continues: done sites are checked, not run again", r.opts.Command, file, shardFlag(r.shard)))
	case err != nil:
		sum.Next = append(sum.Next, fmt.Sprintf("k3strap %s -f %s%s   # again once the causes are fixed", r.opts.Command, file, shardFlag(r.shard)))
	}
	sum.Next = append(sum.Next, "k3strap fleet status -f "+file)
	r.em.WithPhase(events.CommandPhase(r.opts.Command)).Summary(sum)
}

func shardFlag(sh Shard) string {
	if sh.N == 0 {
		return ""
	}
	return " --shard " + sh.String()
}

// doctorVerdict is doctor's verdict on a site from its outcome.
func doctorVerdict(err error) string {
	switch installer.KindOf(err) {
	case installer.KindOK:
		return "healthy"
	case installer.KindFindingsWarning:
		return "warnings"
	case installer.KindFindingsError:
		return "errors"
	}
	return "failed"
}

// code is the exit code of err.
func (r *runner) code(err error) int {
	c, _ := r.opts.Exit(err)
	return c
}
