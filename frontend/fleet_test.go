// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// TestPlainFleet: in a fleet run the host column names the site (site/host, or the site for
// its cluster-wide events); waves, site results and the fleet's summary have their own lines;
// quiet keeps the waves and results.
func TestPlainFleet(t *testing.T) {
	var buf, quiet bytes.Buffer
	sink := events.Tee(&Plain{W: &buf}, &Plain{W: &quiet, Quiet: true})
	now := func() time.Time { return at }
	fl := events.Emitter{Sink: sink, Phase: events.PhaseFleet, Now: now}
	site := events.Emitter{Sink: events.SiteSink("store-7", sink), Phase: events.PhaseConnect, Now: now}
	fl.Wave(events.StatusRunning, "wave 2/3: store-7, store-8", events.WaveInfo{Number: 2, Of: 3, Sites: []string{"store-7", "store-8"}})
	site.Started("connecting to 2 hosts")
	site.Step("cp1", "connect", events.StatusOK, "connected")
	fail := events.SiteResult{Site: "store-8", Wave: 2, Status: events.SiteFailed, Action: "apply", ExitCode: 5, Exit: "the first server did not come up",
		Host: "cp1", Phase: "supervise", Message: "F1", Seconds: 70.25}
	fl.Site(events.SiteResult{Site: "store-7", Wave: 2, Status: events.SiteChecked, Action: "check", Seconds: 0.5})
	fl.Site(fail)
	var sites []events.SiteResult
	for i := range 60 {
		st := events.SiteFailed
		if i >= 55 {
			st = events.SitePending
		}
		sites = append(sites, events.SiteResult{Site: fmt.Sprintf("s%02d", i), Wave: 3, Status: st, ExitCode: 3})
	}
	fl.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", ExitCode: 5, Waves: 3, Seconds: 80, Sites: append([]events.SiteResult{fail}, sites...),
		Next: []string{"k3strap fleet status -f f.yaml"}})
	got := buf.String()
	for _, want := range []string{
		"09:04:05 - fleet wave 2/3: store-7, store-8\n",
		"09:04:05 store-7 connect connecting to 2 hosts\n",
		"09:04:05 store-7/cp1 connect connect: ok (connected)\n",
		"09:04:05 store-7 fleet checked (check, 0.5s)\n",
		"09:04:05 store-8 fleet failed (apply, 70.2s): exit 5 (the first server did not come up) at cp1 supervise: F1\n",
		"09:04:05 - apply fleet apply FAILED (exit 5) in 80.0s: 61 site(s) in 3 wave(s): 56 failed, 5 pending\n",
		"09:04:05 - apply     store-8          wave 2   failed",
		"09:04:05 - apply     ... and 6 more (k3strap fleet status lists every site)\n",
		"09:04:05 - apply     next: k3strap fleet status -f f.yaml\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plain output lacks %q:\n%s", want, got)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !lineRE.MatchString(l) {
			t.Errorf("line without the prefix: %q", l)
		}
	}
	q := quiet.String()
	if !strings.Contains(q, "fleet wave 2/3") || !strings.Contains(q, "store-8 fleet failed") || strings.Contains(q, "connect: ok") {
		t.Errorf("quiet output:\n%s", q)
	}
}

// TestPlainFleetSummaryOmitsPending: pending sites are counted, not listed.
func TestPlainFleetSummaryOmitsPending(t *testing.T) {
	var buf bytes.Buffer
	em := events.Emitter{Sink: &Plain{W: &buf}, Phase: "apply", Now: func() time.Time { return at }}
	em.Summary(events.SummaryInfo{Command: "apply", ExitCode: 3, Waves: 2, Sites: []events.SiteResult{{Site: "a", Status: events.SiteFailed}, {Site: "b", Status: events.SitePending}}})
	if strings.Contains(buf.String(), " b ") || !strings.Contains(buf.String(), "1 failed, 1 pending") {
		t.Errorf("summary:\n%s", buf.String())
	}
}

// TestPlainFleetDeferred: a deferred site's line says why, the next attempt and when it was
// last reached; a run whose only problem is deferred sites is INCOMPLETE, not FAILED, and
// lists them.
func TestPlainFleetDeferred(t *testing.T) {
	var buf bytes.Buffer
	em := events.Emitter{Sink: &Plain{W: &buf}, Phase: events.PhaseFleet, Now: func() time.Time { return at }}
	retry := events.SiteResult{Site: "store-5", Wave: 3, Status: events.SiteDeferred, Action: "apply", ExitCode: 3, Seconds: 2.1,
		Message: "unreachable (cp1: i/o timeout); attempt 1, next in 3s", Attempt: 1, RetryInSeconds: 3}
	last := events.SiteResult{Site: "store-4", Wave: 3, Status: events.SiteDeferred, Action: "apply", ExitCode: 3, Seconds: 2,
		Message: "unreachable after 3 attempt(s) (cp1: i/o timeout): deferred", Attempt: 3, LastReached: time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)}
	em.Site(retry)
	em.Site(last)
	em.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", ExitCode: 10, ExitMeaning: "sites deferred (unreachable)", Waves: 3, Seconds: 30,
		Sites: []events.SiteResult{{Site: "store-1", Status: events.SiteDone}, last}})
	got := buf.String()
	for _, want := range []string{
		"store-5 fleet deferred (apply, 2.1s): unreachable (cp1: i/o timeout); attempt 1, next in 3s; last reached never\n",
		"store-4 fleet deferred (apply, 2.0s): unreachable after 3 attempt(s) (cp1: i/o timeout): deferred; last reached 2026-11-20 08:00:00Z\n",
		"fleet apply INCOMPLETE (exit 10, sites deferred (unreachable)) in 30.0s: 2 site(s) in 3 wave(s): 1 done, 1 deferred\n",
		"    store-4          wave 3   deferred",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plain output lacks %q:\n%s", want, got)
		}
	}
}
