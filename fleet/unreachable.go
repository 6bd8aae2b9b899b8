// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// Offline sites (docs/fleet.md "Offline sites"): at an edge estate a share of the sites is
// offline on any day — an LTE router down, a store closed. A rollout must neither stop for
// them (one offline site would block every later wave) nor skip them silently: a site it
// cannot reach is deferred — tried again within its wave, reported as deferred with the time
// it was last reached, and run by the next rollout. This file holds the policy and the pure
// judgement; run.go applies it.

// Unreachable is the rollout's policy for sites it cannot reach (spec.rollout.unreachable).
type Unreachable struct {
	// Attempts is how many times a rollout tries an unreachable site within its wave, the
	// first try included (default DefaultUnreachableAttempts; 1: no retry; at most
	// MaxUnreachableAttempts).
	Attempts int `yaml:"attempts,omitempty"`
	// RetryAfter is the wait between two attempts (default DefaultRetryAfter); the site's
	// concurrency slot is free meanwhile.
	RetryAfter inventory.Duration `yaml:"retryAfter,omitempty"`
	// MaxWait bounds the retries of one site: no attempt starts later than MaxWait after the
	// site was first found unreachable in the run (default DefaultMaxWait, at most 24h). The
	// wave ends when its last site ended or gave up.
	MaxWait inventory.Duration `yaml:"maxWait,omitempty"`
	// CountAsFailed makes a site still unreachable after its attempts a failed site: it
	// counts toward maxFailedSites and the run's exit code is its failure's. Default false:
	// the site is deferred — reported, not counted — and a run whose sites all succeeded but
	// some were deferred exits with the deferred meaning (docs/output.md).
	CountAsFailed bool `yaml:"countAsFailed,omitempty"`
}

// Defaults of spec.rollout.unreachable.
const (
	DefaultUnreachableAttempts = 3
	DefaultRetryAfter          = inventory.Duration(30 * time.Second)
	DefaultMaxWait             = inventory.Duration(10 * time.Minute)
	// MaxUnreachableAttempts bounds attempts: past it a site is better deferred to the next
	// rollout than retried in this one.
	MaxUnreachableAttempts = 100
	// maxUnreachableWait bounds retryAfter and maxWait (a rollout's wave does not wait a day).
	maxUnreachableWait = inventory.Duration(24 * time.Hour)
)

// attempts returns Attempts or its default.
func (u Unreachable) attempts() int {
	if u.Attempts > 0 {
		return u.Attempts
	}
	return DefaultUnreachableAttempts
}

// retryAfter returns RetryAfter or its default.
func (u Unreachable) retryAfter() time.Duration {
	if u.RetryAfter > 0 {
		return u.RetryAfter.D()
	}
	return DefaultRetryAfter.D()
}

// maxWait returns MaxWait or its default.
func (u Unreachable) maxWait() time.Duration {
	if u.MaxWait > 0 {
		return u.MaxWait.D()
	}
	return DefaultMaxWait.D()
}

// validate adds the problems of spec.rollout.unreachable to p.
func (u Unreachable) validate(p *problems) {
	const base = "spec.rollout.unreachable."
	if u.Attempts < 0 || u.Attempts > MaxUnreachableAttempts {
		p.add(base+"attempts", false, fmt.Sprintf("rollout.unreachable.attempts %d is not between 1 and %d", u.Attempts, MaxUnreachableAttempts),
			fmt.Sprintf("give how many times a wave tries an unreachable site, the first try included (attempts: 3; 1: no retry; at most %d)", MaxUnreachableAttempts))
	}
	for _, d := range []struct {
		field string
		v     inventory.Duration
	}{{"retryAfter", u.RetryAfter}, {"maxWait", u.MaxWait}} {
		if d.v < 0 || d.v > maxUnreachableWait {
			p.add(base+d.field, false, fmt.Sprintf("rollout.unreachable.%s %s is not between 0 and %s", d.field, d.v.D(), maxUnreachableWait.D()),
				"give a duration such as 30s or 10m (0 or unset: the default)")
		}
	}
	if u.attempts() > 1 && u.RetryAfter > 0 && u.MaxWait > 0 && u.RetryAfter > u.MaxWait {
		p.add(base+"retryAfter", false, fmt.Sprintf("rollout.unreachable.retryAfter %s is longer than maxWait %s: no retry could start", u.RetryAfter.D(), u.MaxWait.D()),
			"make retryAfter at most maxWait (e.g. retryAfter: 30s with maxWait: 10m), or set attempts: 1 for no retry")
	}
}

// Offline reports whether err, a host's connect or command error, means the host cannot be
// reached at the network level — the TCP connect failed (timeout, refused, no route), the
// SSH handshake broke off, or the connection dropped (*remote.TransportError) — as opposed to
// a host that answered and refused (host key, authentication, ssh-agent: retrying does not
// help; docs/ssh.md), a command that hung on a live host, or cancellation.
func Offline(err error) bool {
	// Not context.DeadlineExceeded: a TCP connect that timed out matches it too.
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if de := (*remote.DeadlineError)(nil); errors.As(err, &de) {
		return false
	}
	if te := (*remote.TransportError)(nil); errors.As(err, &te) {
		return true
	}
	if ce := (*remote.ConnectError)(nil); errors.As(err, &ce) {
		switch ce.Step {
		case remote.StepConnect:
			return true
		case remote.StepHandshake:
			return remote.IsTransient(err)
		}
	}
	return false
}

// Contact is what one attempt on a site saw of its hosts.
type Contact struct {
	// Offline are the hosts found unreachable (Offline) at connect or lost afterwards, with
	// the error.
	Offline map[string]error
	// Refused are hosts that answered but could not be used (host key, authentication).
	Refused map[string]error
	// Reached are the hosts connected to, with when.
	Reached map[string]time.Time
	// Changing is the first step that changes the site which started ("" when none did):
	// from it on the site may be half-changed, and losing it is a failure.
	Changing events.Phase
}

// Unreachable reports whether the attempt found the site unreachable: it tried at least one
// host, every host it tried is offline (never reached, or lost after connecting), none
// refused it, and no step that changes the site had started. A site with one host reachable
// and another offline is not unreachable: its preflight fails, a real failure (a partial
// site is a problem to fix, not to wait out).
func (c Contact) Unreachable() bool {
	if len(c.Offline) == 0 || len(c.Refused) > 0 || c.Changing != "" {
		return false
	}
	for h := range c.Reached {
		if _, lost := c.Offline[h]; !lost {
			return false
		}
	}
	return true
}

// LastReached is the latest time a host was reached (zero when none was).
func (c Contact) LastReached() time.Time {
	var t time.Time
	for _, at := range c.Reached {
		if at.After(t) {
			t = at
		}
	}
	return t
}

// offlineHosts names the offline hosts, sorted.
func (c Contact) offlineHosts() []string {
	out := make([]string, 0, len(c.Offline))
	for h := range c.Offline {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// Next is what a rollout does with a site after an attempt.
type Next int

const (
	// NextEnd: the attempt's outcome is the site's result (done, failed, cancelled, ...).
	NextEnd Next = iota
	// NextRetry: the site is unreachable; it is deferred and tried again after the wait.
	NextRetry
	// NextDeferred: unreachable and no attempt left (or the rollout stopped): the site ends
	// deferred — reported, not counted as failed.
	NextDeferred
	// NextFailed: unreachable and no attempt left, with countAsFailed: the site failed.
	NextFailed
)

// Attempt is the outcome of one attempt on a site, as Decide judges it.
type Attempt struct {
	// Number is the attempt, 1-based.
	Number int
	// Err is the attempt's error (nil: it succeeded).
	Err error
	// Contact is what it saw of the site's hosts.
	Contact Contact
	// FirstUnreachable is when the site was first found unreachable in this run (zero when
	// this attempt is the first to find it so: then End is used).
	FirstUnreachable time.Time
	// End is when the attempt ended.
	End time.Time
	// Stopping says no site may start any more: the rollout stopped or the run was
	// cancelled.
	Stopping bool
}

// Decide is the policy's judgement after an attempt, with the wait before the next one
// (NextRetry only). A failed attempt that found the site unreachable (Contact.Unreachable) is
// retried while attempts are left, the rollout goes on, and the retry would start within
// maxWait of the first unreachable attempt; otherwise the site ends deferred, or failed with
// countAsFailed. Any other outcome — success, a real failure, a cancellation — ends the site.
func (u Unreachable) Decide(a Attempt) (Next, time.Duration) {
	if a.Err == nil || installer.KindOf(a.Err) == installer.KindCancelled || !a.Contact.Unreachable() {
		return NextEnd, 0
	}
	first := a.FirstUnreachable
	if first.IsZero() {
		first = a.End
	}
	wait := u.retryAfter()
	if !a.Stopping && a.Number < u.attempts() && a.End.Add(wait).Sub(first) <= u.maxWait() {
		return NextRetry, wait
	}
	if u.CountAsFailed {
		return NextFailed, 0
	}
	return NextDeferred, 0
}

// contactTracker gathers a Contact from an attempt's installer hooks and events.
type contactTracker struct {
	now func() time.Time
	// changing are the phases of the action's steps that change the site.
	changing map[events.Phase]bool

	mu sync.Mutex
	c  Contact
}

// newContactTracker tracks an attempt running action (apply, upgrade, check, ...).
func newContactTracker(action string, now func() time.Time) *contactTracker {
	t := &contactTracker{now: now, changing: map[events.Phase]bool{},
		c: Contact{Offline: map[string]error{}, Refused: map[string]error{}, Reached: map[string]time.Time{}}}
	// Every variant's steps (upgrade --via suc changes the cluster from its suc-deploy step).
	for _, v := range installer.Variants(action) {
		for _, st := range installer.Steps(v) {
			if st.Changes {
				t.changing[st.Phase] = true
			}
		}
	}
	return t
}

// host records a host's contact (installer.Options.HostContact): err nil when reached.
func (t *contactTracker) host(name string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err == nil:
		t.c.Reached[name] = t.now()
	case Offline(err):
		t.c.Offline[name] = err
	case errors.Is(err, context.Canceled):
	default:
		t.c.Refused[name] = err
	}
}

// sink passes events on to next, noting the first step that changes the site.
func (t *contactTracker) sink(next events.Sink) events.Sink {
	return events.SinkFunc(func(e events.Event) {
		if e.Type == events.PhaseStarted && t.changing[e.Phase] {
			t.mu.Lock()
			if t.c.Changing == "" {
				t.c.Changing = e.Phase
			}
			t.mu.Unlock()
		}
		next.Emit(e)
	})
}

// contact returns what the attempt saw (a copy).
func (t *contactTracker) contact() Contact {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Contact{Changing: t.c.Changing, Offline: maps.Clone(t.c.Offline), Refused: maps.Clone(t.c.Refused), Reached: maps.Clone(t.c.Reached)}
}
