// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/k3strap/k3strap/events"
)

// fleetFixture is a rollout of 500 sites (site-001 … site-500): a canary, then waves of 125
// (the last 124). Wave 1 and 2 are done (site-007 failed in wave 2 within maxFailedSites);
// in wave 3, 60 sites are done, site-140 and site-171 failed, 10 run; the rest wait.
type fleetFixture struct {
	rec   recorder
	waves []FleetWave
}

func siteName(i int) string { return fmt.Sprintf("site-%03d", i) }

func newFleetFixture() *fleetFixture {
	f := &fleetFixture{}
	f.waves = append(f.waves, FleetWave{Number: 1, Canary: true, Sites: []string{siteName(1)}})
	for start := 2; start <= 500; start += 125 {
		w := FleetWave{Number: len(f.waves) + 1}
		for i := start; i < start+125 && i <= 500; i++ {
			w.Sites = append(w.Sites, siteName(i))
		}
		f.waves = append(f.waves, w)
	}
	return f
}

func (f *fleetFixture) info(n int) events.WaveInfo {
	w := f.waves[n-1]
	return events.WaveInfo{Number: n, Of: len(f.waves), Canary: w.Canary, Sites: w.Sites}
}

// site emits a site's run: connect, a milestone, and (unless running) its result.
func (f *fleetFixture) site(name string, wave int, status events.SiteStatus, secs float64) {
	r := &f.rec
	s := events.Emitter{Sink: events.SiteSink(name, &r.rec), Phase: events.PhaseConnect, Now: func() time.Time { return t0.Add(r.at) }}
	s.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	s.WithPhase(events.PhaseSupervise).Milestone("cp1", events.MilestoneInfo{Name: "api-ready", Seconds: 1.3})
	if status == events.SiteRunning {
		return
	}
	res := events.SiteResult{Site: name, Wave: wave, Status: status, Action: "apply", Seconds: secs, Message: "apply succeeded"}
	if status == events.SiteFailed {
		res.ExitCode, res.Exit, res.Host, res.Phase = 5, "the first server did not come up", "cp1", "supervise"
		res.Message = "the node.cloudprovider.kubernetes.io/uninitialized taint stayed on cp1 for 60s: no cloud controller runs (F1)"
	}
	r.em(events.PhaseFleet).Site(res)
}

// rollout is the run up to the middle of wave 3.
func (f *fleetFixture) rollout() *fleetFixture {
	fl := f.rec.em(events.PhaseFleet)
	fl.Started("apply on 500 site(s) of fleet stores in 5 wave(s)")
	for n := 1; n <= 2; n++ {
		info := f.info(n)
		fl.Wave(events.StatusRunning, "", info)
		for _, s := range info.Sites {
			f.rec.after(100 * time.Millisecond)
			st := events.SiteDone
			if s == siteName(7) {
				st = events.SiteFailed
				info.Failed++
			} else {
				info.Done++
			}
			f.site(s, n, st, 6.2)
		}
		st := events.StatusOK
		if info.Failed > 0 {
			st = events.StatusFailed
		}
		fl.Wave(st, "", info)
	}
	info := f.info(3)
	fl.Wave(events.StatusRunning, "", info)
	for i, s := range info.Sites {
		f.rec.after(100 * time.Millisecond)
		switch {
		case s == siteName(140) || s == siteName(171):
			f.site(s, 3, events.SiteFailed, 71.5)
		case i < 62:
			f.site(s, 3, events.SiteDone, 5.8)
		case i < 72:
			f.site(s, 3, events.SiteRunning, 0)
		}
	}
	return f
}

// stopped ends the rollout: the running sites finish, the stop, the summary.
func (f *fleetFixture) stopped() *fleetFixture {
	fl := f.rec.em(events.PhaseFleet)
	info := f.info(3)
	for i := 62; i < 72; i++ {
		f.rec.after(time.Second)
		f.site(info.Sites[i], 3, events.SiteDone, 9)
	}
	info.Done, info.Failed = 70, 2
	fl.Wave(events.StatusFailed, "", info)
	fl.Fail("", "", events.ErrorInfo{Message: "the rollout stopped: 3 site(s) failed, more than rollout.maxFailedSites (2); 302 site(s) not started"})
	sum := events.SummaryInfo{Command: "apply", ExitCode: 5, Waves: 5, Seconds: 3725,
		Next: []string{"look at: site-007, site-140, site-171", "k3strap apply -f stores.yaml   # continues: done sites are checked, not run again"}}
	fl.Summary(sum)
	return f
}

func fleetOpts(f *fleetFixture, cancel func()) FleetOptions {
	now := t0.Add(f.rec.at)
	return FleetOptions{Fleet: "stores", Command: "apply", Waves: f.waves, Static: true, Now: func() time.Time { return now }, Cancel: cancel}
}

// runFleetDashboard drives a fleet dashboard with teatest (as runDashboard does).
func runFleetDashboard(t *testing.T, w, h int, opts FleetOptions, evs []events.Event, done bool, keys ...string) *FleetDashboard {
	t.Helper()
	d := NewFleetDashboard(opts, nil, nil)
	tm := teatest.NewTestModel(t, d, teatest.WithInitialTermSize(w, h), teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI)))
	tm.Send(EventMsg(evs))
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
	if done {
		tm.Send(DoneMsg{})
	} else if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*FleetDashboard)
}

// keyMsg is the key press of k ("tab", "end", "q" or one character).
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	}
	return tea.KeyPressMsg{Code: rune(k[0]), Text: k}
}

// TestFleetDashboardFrames: golden frames of a 500-site rollout mid-wave and stopped, at
// 80×24 and 120×40; every frame fits its window.
func TestFleetDashboardFrames(t *testing.T) {
	mid := newFleetFixture().rollout()
	end := newFleetFixture().rollout().stopped()
	cases := []struct {
		name string
		f    *fleetFixture
		done bool
		keys []string
	}{
		{"rollout", mid, false, nil},
		{"failed-filter", mid, false, []string{"tab", "tab"}},
		{"stopped", end, true, []string{"tab", "tab", "down"}},
	}
	for _, c := range cases {
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%s-%dx%d", c.name, sz.w, sz.h), func(t *testing.T) {
				d := runFleetDashboard(t, sz.w, sz.h, fleetOpts(c.f, nil), c.f.rec.rec.Events(), c.done, c.keys...)
				checkFrame(t, d, sz.w, sz.h)
			})
		}
	}
}

// TestFleetDashboardContent: what the frames must say, independently of the golden files.
func TestFleetDashboardContent(t *testing.T) {
	mid := newFleetFixture().rollout()
	d := runFleetDashboard(t, 120, 40, fleetOpts(mid, nil), mid.rec.rec.Events(), false)
	f := frame(d)
	for _, want := range []string{"k3strap apply · fleet stores · 500 sites · 5 waves", "✓ 1 canary", "✗ 2 (1 failed)", "▶ 3 62/125 ✗2", "· 4 (125)",
		"188/500", "✓ 185 done", "✗ 3 failed", "▶ 10 running", "· 302 pending", "SITE", "site-001", "apply succeeded", "tab all→active"} {
		if !strings.Contains(f, want) {
			t.Errorf("mid-rollout frame lacks %q:\n%s", want, f)
		}
	}
	// The failed filter lists exactly the failed sites, with the exit's meaning.
	d = runFleetDashboard(t, 120, 40, fleetOpts(mid, nil), mid.rec.rec.Events(), false, "tab", "tab")
	f = frame(d)
	for _, want := range []string{"site-007", "site-140", "site-171", "exit 5 (the first server did not come up) at cp1 supervise", "(failed)"} {
		if !strings.Contains(f, want) {
			t.Errorf("failed filter lacks %q:\n%s", want, f)
		}
	}
	if strings.Contains(f, "site-001 ") {
		t.Errorf("the failed filter shows a done site:\n%s", f)
	}
	// End scrolls to the last site of 500.
	d = runFleetDashboard(t, 80, 24, fleetOpts(mid, nil), mid.rec.rec.Events(), false, "end")
	if f = frame(d); !strings.Contains(f, "site-500") || strings.Contains(f, "site-001 ") {
		t.Errorf("end did not scroll to the last site:\n%s", f)
	}
	end := newFleetFixture().rollout().stopped()
	d = runFleetDashboard(t, 120, 40, fleetOpts(end, nil), end.rec.rec.Events(), true)
	f = frame(d)
	for _, want := range []string{"✗ failed (exit 5)", "1h02m", "the rollout stopped: 3 site(s) failed", "next: look at: site-007, site-140, site-171", "✗ 3 (2 failed)"} {
		if !strings.Contains(f, want) {
			t.Errorf("final frame lacks %q:\n%s", want, f)
		}
	}
	if d.Summary() == nil || !d.Finished() {
		t.Error("the model did not record the summary")
	}
}

// TestFleetDashboardKeys: q cancels once; a question between waves is answered with y or n.
func TestFleetDashboardKeys(t *testing.T) {
	var cancels atomic.Int32
	mid := newFleetFixture().rollout()
	ch := make(chan events.Event, 4096)
	d := NewFleetDashboard(fleetOpts(mid, func() { cancels.Add(1) }), ch, nil)
	tm, p := newProbe(t, d, 100, 30)
	for _, e := range mid.rec.rec.Events() {
		ch <- e
	}
	waitScreen(t, tm, p, "▶ 3 62/125")
	reply := make(chan bool, 1)
	tm.Send(askMsg{question: "start wave 4 of 5 (125 sites)?", reply: reply})
	waitScreen(t, tm, p, "start wave 4 of 5 (125 sites)?  y yes · n stop here")
	tm.Type("y")
	select {
	case yes := <-reply:
		if !yes {
			t.Error("y answered no")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	tm.Send(askMsg{question: "start wave 5 of 5?", reply: reply})
	waitScreen(t, tm, p, "start wave 5 of 5?")
	tm.Type("n")
	select {
	case yes := <-reply:
		if yes {
			t.Error("n answered yes")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to n")
	}
	tm.Type("q")
	waitScreen(t, tm, p, "cancelling")
	tm.Type("q")
	close(ch)
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	if n := cancels.Load(); n != 1 {
		t.Errorf("Cancel called %d times, want 1", n)
	}
}

// TestFleetDashboardDeferred: an unreachable site shows ↻ offline (deferred) with its next attempt and
// when it was last reached, is active (not failed), runs again on its retry; one left
// deferred counts as ended; a run whose only problem is deferred sites is incomplete, not
// failed.
func TestFleetDashboardDeferred(t *testing.T) {
	f := &fleetFixture{waves: []FleetWave{{Number: 1, Sites: []string{"store-1", "store-2", "store-3"}}}}
	fl := f.rec.em(events.PhaseFleet)
	fl.Wave(events.StatusRunning, "", f.info(1))
	f.site("store-1", 1, events.SiteDone, 4)
	retry := events.SiteResult{Site: "store-2", Wave: 1, Status: events.SiteDeferred, Action: "apply", ExitCode: 3, Seconds: 2,
		Message: "unreachable (cp1: i/o timeout); attempt 1, next in 3s", Attempt: 1, RetryInSeconds: 3}
	fl.Site(retry)
	last := events.SiteResult{Site: "store-3", Wave: 1, Status: events.SiteDeferred, Action: "apply", ExitCode: 3, Seconds: 2,
		Message: "unreachable after 3 attempt(s) (cp1: i/o timeout): deferred", Attempt: 3}
	fl.Site(last)
	mid := f.rec.rec.Events()
	d := runFleetDashboard(t, 120, 30, fleetOpts(f, nil), mid, false, "tab")
	fr := frame(d)
	for _, want := range []string{"↻ offline", "next in 3s; last reached never", "↻ 2 deferred", "2/3", "store-2", "store-3", "(active)"} {
		if !strings.Contains(fr, want) {
			t.Errorf("frame lacks %q:\n%s", want, fr)
		}
	}
	if strings.Contains(fr, "store-1 ") {
		t.Errorf("the active filter shows a done site:\n%s", fr)
	}
	// store-2's retry: its events make it run again, then it is done.
	f.site("store-2", 1, events.SiteRunning, 0)
	d = runFleetDashboard(t, 120, 30, fleetOpts(f, nil), f.rec.rec.Events(), false)
	if fr = frame(d); !strings.Contains(fr, "▶ 1 running") || !strings.Contains(fr, "↻ 1 deferred") {
		t.Errorf("store-2's retry does not show it running:\n%s", fr)
	}
	f.site("store-2", 1, events.SiteDone, 3)
	fl.Summary(events.SummaryInfo{Command: "apply", ExitCode: 10, ExitMeaning: "sites deferred (unreachable)", Waves: 1, Seconds: 20,
		Sites: []events.SiteResult{{Site: "store-1", Status: events.SiteDone}, {Site: "store-2", Status: events.SiteDone}, last}})
	d = runFleetDashboard(t, 120, 30, fleetOpts(f, nil), f.rec.rec.Events(), true)
	if fr = frame(d); !strings.Contains(fr, "↻ incomplete (exit 10)") || !strings.Contains(fr, "3/3") || strings.Contains(fr, "✗ failed") {
		t.Errorf("final frame:\n%s", fr)
	}
}
