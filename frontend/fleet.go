// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// Plain lines of a fleet run's own events (docs/fleet.md): the waves, each site's result and
// the fleet's summary. The sites' own events are the per-cluster lines, their host column
// naming the site (Prefix).

// fleetLines renders a wave or site_result event.
func fleetLines(prefix string, e events.Event) []string {
	switch {
	case e.Wave != nil:
		return []string{prefix + e.Message}
	case e.SiteResult != nil:
		return []string{prefix + SiteResultText(*e.SiteResult)}
	}
	return []string{prefix + e.Message}
}

// SiteResultText is one line about a site's outcome: status, time, and for a failure its exit
// code with the meaning, the host and step, and the message.
func SiteResultText(r events.SiteResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.Status)
	if r.Action != "" && r.Status != events.SitePending {
		fmt.Fprintf(&b, " (%s, %.1fs)", r.Action, r.Seconds)
	}
	switch r.Status {
	case events.SiteFailed, events.SiteCancelled, events.SiteWarnings:
		b.WriteString(": " + SiteFailureText(r))
	case events.SiteDeferred:
		b.WriteString(": " + r.Message + "; last reached " + LastReachedText(r))
	}
	return b.String()
}

// LastReachedText says when a host of the site last answered: "never" or the UTC time.
func LastReachedText(r events.SiteResult) string {
	if r.LastReached.IsZero() {
		return "never"
	}
	return r.LastReached.UTC().Format("2006-01-02 15:04:05Z")
}

// SiteFailureText says what ended a site that did not succeed: the exit code with its meaning,
// the host and step, and the message.
func SiteFailureText(r events.SiteResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d", r.ExitCode)
	if r.Exit != "" {
		fmt.Fprintf(&b, " (%s)", r.Exit)
	}
	if where := strings.TrimSpace(r.Host + " " + r.Phase); where != "" {
		fmt.Fprintf(&b, " at %s", where)
	}
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	return b.String()
}

// maxSummarySites bounds the sites a fleet summary lists one per line (the unfinished and
// failed first); the totals cover all.
const maxSummarySites = 50

// fleetSummaryLines renders a fleet's summary: the verdict, the totals by status, the sites
// that failed, were cancelled, deferred or have warnings (at most maxSummarySites; pending sites are
// only counted), and what to run next.
func fleetSummaryLines(prefix string, s *events.SummaryInfo) []string {
	count := map[events.SiteStatus]int{}
	var notDone []events.SiteResult
	for _, r := range s.Sites {
		count[r.Status]++
		switch r.Status {
		case events.SiteFailed, events.SiteCancelled, events.SiteWarnings, events.SiteDeferred:
			notDone = append(notDone, r)
		}
	}
	verdict := "OK"
	switch {
	case s.OK:
	case count[events.SiteFailed] == 0 && count[events.SiteDeferred] > 0:
		// Nothing failed; the unreachable sites wait for the next rollout (docs/fleet.md).
		verdict = fmt.Sprintf("INCOMPLETE (exit %d, %s)", s.ExitCode, s.ExitMeaning)
	default:
		verdict = fmt.Sprintf("FAILED (exit %d)", s.ExitCode)
	}
	var totals []string
	for _, st := range []events.SiteStatus{events.SiteDone, events.SiteChecked, events.SiteWarnings, events.SiteFailed, events.SiteDeferred, events.SiteCancelled, events.SitePending} {
		if n := count[st]; n > 0 {
			totals = append(totals, fmt.Sprintf("%d %s", n, st))
		}
	}
	lines := []string{prefix + fmt.Sprintf("fleet %s %s in %.1fs: %d site(s) in %d wave(s): %s", s.Command, verdict, s.Seconds, len(s.Sites), s.Waves, strings.Join(totals, ", "))}
	for i, r := range notDone {
		if i == maxSummarySites {
			lines = append(lines, prefix+fmt.Sprintf("    ... and %d more (k3strap fleet status lists every site)", len(notDone)-i))
			break
		}
		lines = append(lines, prefix+fmt.Sprintf("    %-16s wave %-3d %s", r.Site, r.Wave, SiteResultText(r)))
	}
	for _, n := range s.Next {
		lines = append(lines, prefix+"    next: "+n)
	}
	return lines
}
