// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import "time"

// Deadline is the one deadline model of a bring-up (docs/architecture.md "Bring-up
// judgement"): --timeout bounds each wait separately, counted from that wait's own start —
// the first server's from the (re)start command this run made, or from when the run began
// watching a unit it found running; a joining node's from when its wait for its node begins
// (after its unit was started); the CNI rollout's and the wait for a first server restarting
// for its own upgrade likewise; a watched SUC upgrade's from its last progress, and from when
// its API stopped answering. A wait that reaches a verdict sooner (up, F1, crash loop, lost
// host) never waits the deadline out. Times are the local clock.
type Deadline struct {
	// Start is when the wait began; Timeout how long it may last (--timeout, default 10 min).
	Start   time.Time
	Timeout time.Duration
}

// Passed reports whether now is past the deadline (strictly after Start+Timeout).
func (d Deadline) Passed(now time.Time) bool { return now.Sub(d.Start) > d.Timeout }

// At is the deadline's instant.
func (d Deadline) At() time.Time { return d.Start.Add(d.Timeout) }

// Left is how much of the timeout is left at now (negative once passed).
func (d Deadline) Left(now time.Time) time.Duration { return d.Timeout - now.Sub(d.Start) }

// StreamSlack is how long past its timeout the probe's stream is bounded as a whole: the
// timeout verdict normally comes from a tick (Watch.Observe); the bound ends a watch whose
// probe stopped delivering ticks at all.
const StreamSlack = 30 * time.Second

// FreshTolerance is how much earlier than the local (re)start instant, converted to the host's
// clock with the measured clock skew, a host timestamp may be and still count as after it: the
// skew is measured with a round trip's uncertainty.
const FreshTolerance = 2 * time.Second

// Since is the earliest host-clock instant that belongs to a (re)start made at started (local
// clock) on a host whose clock is skew ahead of the local one (facts.Host.ClockSkew); zero when
// started is zero (no restart made: anything counts).
func Since(started time.Time, skew time.Duration) time.Time {
	if started.IsZero() {
		return time.Time{}
	}
	return started.Add(skew).Add(-FreshTolerance)
}

// Fresh is the rule "fresh since the restart", written once: a host timestamp at (a main
// process's start, a Ready condition's heartbeat, subnet.env's modification time) belongs to
// the process started at since or later. Host timestamps are whole seconds, so since counts
// from the start of its second. A zero since accepts anything (no restart to be fresh since);
// a zero at is not fresh after a restart (a Ready condition without a heartbeat). What a probe
// could not read at all (a host without systemd has no main process start) is the caller's to
// accept.
func Fresh(at, since time.Time) bool {
	return since.IsZero() || !at.Before(since.Truncate(time.Second))
}

// Unix is the epoch seconds a probe reports as a time (0: unknown, the zero time).
func Unix(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}
