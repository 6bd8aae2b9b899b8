// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

import "time"

// Fleet rollouts (docs/fleet.md): every event of a site's run carries the site (Event.Site);
// the fleet adds its waves, each site's result and a summary listing the sites.

// Event types of a fleet run.
const (
	// WaveType starts (Status running) and ends (Status ok or failed) a wave; payload Wave.
	WaveType Type = "wave"
	// SiteResultType is one site's outcome in a fleet run; payload SiteResult.
	SiteResultType Type = "site_result"
)

// PhaseFleet is the phase of a fleet's own events (waves, site results, the stop, the summary
// carries the command).
const PhaseFleet Phase = "fleet"

// WaveInfo describes one wave of a rollout.
type WaveInfo struct {
	// Number is the wave's number (1-based) and Of how many waves the run has.
	Number int `json:"number"`
	Of     int `json:"of"`
	// Canary marks the canary wave.
	Canary bool `json:"canary,omitempty"`
	// Sites are the wave's sites in start order.
	Sites []string `json:"sites"`
	// Done and Failed count the wave's sites that succeeded (or were checked) and failed, on
	// the wave's end.
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// Deferred counts the wave's sites left unreachable, on the wave's end.
	Deferred int `json:"deferred,omitempty"`
}

// SiteStatus is where a site stands in a fleet run.
type SiteStatus string

// Site statuses.
const (
	// SitePending: not started (yet, or because the rollout stopped).
	SitePending SiteStatus = "pending"
	// SiteRunning: the command runs on the site.
	SiteRunning SiteStatus = "running"
	// SiteDone: the command succeeded on the site.
	SiteDone SiteStatus = "done"
	// SiteChecked: done in an earlier run with the same inventory; checked, not run again.
	SiteChecked SiteStatus = "checked"
	// SiteWarnings: doctor found warnings only.
	SiteWarnings SiteStatus = "warnings"
	// SiteFailed: the command failed on the site (or its timeout ran out).
	SiteFailed SiteStatus = "failed"
	// SiteCancelled: the run was cancelled (Ctrl-C) while the site ran.
	SiteCancelled SiteStatus = "cancelled"
	// SiteDeferred: the site could not be reached (every host offline, before anything on it
	// changed): tried again later in its wave (SiteResult.RetryInSeconds) or, once its
	// attempts are spent, left for the next rollout. Not a failure unless the fleet's
	// rollout.unreachable.countAsFailed says so (docs/fleet.md "Offline sites").
	SiteDeferred SiteStatus = "deferred"
)

// SiteResult is one site's outcome.
type SiteResult struct {
	Site string `json:"site"`
	// Wave is the site's wave (0 when the run did not plan it).
	Wave   int        `json:"wave,omitempty"`
	Status SiteStatus `json:"status"`
	// Action is what the run did: the command (apply, preflight, ...) or check (a done site
	// whose inventory did not change); empty when nothing ran.
	Action string `json:"action,omitempty"`
	// ExitCode is the exit code the command ended with on the site, Exit its meaning.
	ExitCode int    `json:"exitCode"`
	Exit     string `json:"exit,omitempty"`
	// Host and Phase name what failed: the host ("" for the cluster) and the step.
	Host  string `json:"host,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Message says what happened in one sentence.
	Message string `json:"message,omitempty"`
	// Seconds is the site's run time.
	Seconds float64 `json:"seconds"`
	// Attempt is the attempt this result ends (1-based), set when the site was tried more
	// than once or deferred.
	Attempt int `json:"attempt,omitempty"`
	// RetryInSeconds is, for a deferred site, when its next attempt starts (0: none in this
	// run).
	RetryInSeconds float64 `json:"retryInSeconds,omitempty"`
	// LastReached is when a host of the site last answered (this run or an earlier one as the
	// state file records it); zero when never.
	LastReached time.Time `json:"lastReached,omitzero"`
}

// Wave emits a wave's start (status running) or end.
func (em Emitter) Wave(st Status, msg string, w WaveInfo) {
	em.send(Event{Type: WaveType, Status: st, Message: msg, Wave: &w})
}

// Site emits a site's result.
func (em Emitter) Site(r SiteResult) {
	em.send(Event{Type: SiteResultType, Site: r.Site, Status: siteEventStatus(r.Status), Message: r.Message, SiteResult: &r})
}

// siteEventStatus is the step status of a site status (the Event's Status field).
func siteEventStatus(s SiteStatus) Status {
	switch s {
	case SiteDone, SiteWarnings:
		return StatusOK
	case SiteChecked:
		return StatusUnchanged
	case SiteFailed, SiteCancelled:
		return StatusFailed
	case SiteDeferred:
		return StatusSkipped
	case SiteRunning:
		return StatusRunning
	}
	return StatusSkipped
}

// SiteSink returns a sink that stamps every event with site before passing it to s: the events
// of one site's run in a fleet.
func SiteSink(site string, s Sink) Sink {
	return SinkFunc(func(e Event) {
		e.Site = site
		s.Emit(e)
	})
}
