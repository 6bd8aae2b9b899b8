// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
)

// runView is what every dashboard of a run (a cluster's, a fleet's) keeps of the event stream
// besides its own state: when the run started and the log pane's plain lines.
type runView struct {
	started time.Time
	log     []string
	// logLines bounds log; verbose keeps debug events; clock is the time (nil: time.Now).
	logLines int
	verbose  bool
	clock    func() time.Time
}

func newRunView(logLines int, verbose bool, clock func() time.Time) runView {
	if logLines <= 0 {
		logLines = 500
	}
	return runView{logLines: logLines, verbose: verbose, clock: clock}
}

// observe notes e's time as the start when it is the first, and its plain lines in the log
// (upload progress only when done, unless verbose).
func (v *runView) observe(e events.Event) {
	if v.started.IsZero() && !e.Time.IsZero() {
		v.started = e.Time
	}
	if frontend.Keep(e, v.verbose, false) && !(e.Type == events.UploadProgress && e.Upload != nil && !e.Upload.Done && !v.verbose) {
		v.addLog(frontend.PlainLines(e)...)
	}
}

// addLog appends lines to the log, keeping the last logLines.
func (v *runView) addLog(lines ...string) {
	v.log = append(v.log, lines...)
	if over := len(v.log) - v.logLines; over > 0 {
		v.log = append(v.log[:0:0], v.log[over:]...)
	}
}

func (v *runView) now() time.Time {
	if v.clock != nil {
		return v.clock()
	}
	return time.Now()
}

// elapsed is the run's time in seconds: the summary's once it came.
func (v *runView) elapsed(summary *events.SummaryInfo) float64 {
	if summary != nil {
		return summary.Seconds
	}
	if v.started.IsZero() {
		return 0
	}
	return max(0, v.now().Sub(v.started).Seconds())
}

// onlyDeferred says a fleet run failed no site but deferred some (docs/fleet.md "Offline
// sites"): incomplete rather than failed.
func onlyDeferred(s *events.SummaryInfo) bool {
	deferred := false
	for _, r := range s.Sites {
		switch r.Status {
		case events.SiteFailed, events.SiteCancelled:
			return false
		case events.SiteDeferred:
			deferred = true
		}
	}
	return deferred
}

// runVerdict is the header's word on a run that ended or is cancelling ("" while it runs).
func runVerdict(st styles, summary *events.SummaryInfo, finished, cancelling bool) string {
	switch {
	case summary != nil && summary.OK:
		return st.ok.Render("✓ done")
	case summary != nil && onlyDeferred(summary):
		return st.warn.Render(fmt.Sprintf("↻ incomplete (exit %d)", summary.ExitCode))
	case summary != nil:
		return st.fail.Render(fmt.Sprintf("✗ failed (exit %d)", summary.ExitCode))
	case finished:
		return st.fail.Render("✗ stopped")
	case cancelling:
		return st.warn.Render("cancelling…")
	}
	return ""
}
