// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/k3strap/k3strap/events"
)

// The runner's side of offline sites (docs/fleet.md "Offline sites"): a deferred site frees
// its slot while it waits for its next attempt, its deferral and when it was last reached go
// into the state file and its result. The judgement itself is Unreachable.Decide
// (unreachable.go).

// slot is a site's place among the rollout.concurrency sites that run at once.
type slot struct {
	sem  chan struct{}
	held bool
}

// acquire waits for a place; false when ctx ended (or stop closed) first.
func (sl *slot) acquire(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case sl.sem <- struct{}{}:
		sl.held = true
		return true
	case <-ctx.Done():
	case <-stop:
	}
	return false
}

// release frees the place, if held.
func (sl *slot) release() {
	if sl.held {
		<-sl.sem
		sl.held = false
	}
}

// pause frees the site's slot for wait, then takes one again; false when the run was
// cancelled or the rollout stopped meanwhile (the site then starts no attempt).
func (r *runner) pause(ctx context.Context, sl *slot, wait time.Duration) bool {
	sl.release()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-r.stopCh:
		return false
	}
	return sl.acquire(ctx, r.stopCh) && r.stopReason() == ""
}

// deferred records an attempt that found the site unreachable and returns its result:
// deferred, with the next attempt in retry (0: none in this run).
func (r *runner) deferred(s *Site, w Wave, a attempt, n int, retry time.Duration) events.SiteResult {
	end := r.opts.Now()
	code, meaning := r.opts.Exit(a.err)
	why := "every host offline"
	if hosts := a.contact.offlineHosts(); len(hosts) > 0 {
		why = fmt.Sprintf("%s: %v", hosts[0], a.contact.Offline[hosts[0]])
		if len(hosts) > 1 {
			why += fmt.Sprintf(" (and %d more)", len(hosts)-1)
		}
	}
	msg := fmt.Sprintf("unreachable (%s); attempt %d, next in %s", why, n, retry)
	if retry == 0 {
		msg = fmt.Sprintf("unreachable after %d attempt(s) (%s): deferred, nothing changed on it; the next rollout runs it", n, why)
	}
	res := events.SiteResult{Site: s.Name, Wave: w.Number, Status: events.SiteDeferred, Action: a.action, ExitCode: code, Exit: meaning,
		Phase: string(events.PhaseConnect), Message: msg, Seconds: end.Sub(a.start).Seconds(), Attempt: n, RetryInSeconds: retry.Seconds(),
		LastReached: r.lastReached(s, a.contact)}
	r.record(s, w, a.action, &Record{Command: a.action, Status: events.SiteDeferred, Digest: s.Digest, ExitCode: code, Exit: meaning,
		Phase: res.Phase, Message: msg, Started: a.start.UTC(), Finished: end.UTC(), Attempts: n})
	return res
}

// reached records when a host of the site last answered (any command, dry-run excluded).
func (r *runner) reached(s *Site, c Contact) {
	t := c.LastReached()
	if t.IsZero() || !r.opts.Record {
		return
	}
	_ = r.j.Update(s.Name, func(st *SiteState) {
		if t.After(st.Reached) {
			st.Reached = t.UTC()
		}
	})
}

// lastReached is when a host of the site last answered: in this attempt, else as the state
// file recorded it.
func (r *runner) lastReached(s *Site, c Contact) time.Time {
	if t := c.LastReached(); !t.IsZero() {
		return t.UTC()
	}
	return r.j.Site(s.Name).Reached
}

// unreachableError is a site still unreachable after its attempts, counted as failed
// (rollout.unreachable.countAsFailed); errors.As and the exit code see the last attempt's
// error.
type unreachableError struct {
	attempts int
	err      error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("unreachable after %d attempt(s), counted as failed (rollout.unreachable.countAsFailed): %v", e.attempts, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }
