// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

var sizes = []struct{ w, h int }{{80, 24}, {120, 40}}

// dashOpts are deterministic options: fixed clock, frozen spinners.
func dashOpts(now time.Time, cancel func()) DashboardOptions {
	return DashboardOptions{Cluster: "lab", Hosts: fixtureHosts, Static: true, Now: func() time.Time { return now }, Cancel: cancel}
}

// runDashboard drives a dashboard with teatest: it sends evs in one batch, then either quits
// (a mid-run frame) or ends the run (DoneMsg: the final frame), and returns the final model.
func runDashboard(t *testing.T, w, h int, opts DashboardOptions, evs []events.Event, done bool) *Dashboard {
	t.Helper()
	d := NewDashboard(opts, nil, nil)
	tm := teatest.NewTestModel(t, d, teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI)))
	tm.Send(EventMsg(evs))
	if done {
		tm.Send(DoneMsg{})
	} else {
		if err := tm.Quit(); err != nil {
			t.Fatal(err)
		}
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Dashboard)
}

// frame is a dashboard's text without styles, as a golden file holds it.
func frame(d interface{ Render() string }) string { return ansi.Strip(d.Render()) + "\n" }

// checkFrame asserts the frame fits the window and matches the golden file.
func checkFrame(t *testing.T, d interface{ Render() string }, w, h int) {
	t.Helper()
	f := frame(d)
	lines := strings.Split(strings.TrimSuffix(f, "\n"), "\n")
	if len(lines) > h-1 {
		t.Errorf("frame has %d lines, the %dx%d window takes %d", len(lines), w, h, h-1)
	}
	for _, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Errorf("line wider than %d: %q", w, l)
		}
	}
	golden.RequireEqual(t, f)
}

func TestDashboardFrames(t *testing.T) {
	mid := applyBringUp(applyStart())
	// applyStart alone: uploads under way.
	uploading := applyStart()
	done := applyDone(applyBringUp(applyStart()))
	failed := preflightFailed()
	cases := []struct {
		name string
		evs  []events.Event
		done bool
		now  time.Time
	}{
		{"uploading", uploading.rec.Events(), false, t0.Add(uploading.at)},
		{"bringup", mid.rec.Events(), false, t0.Add(mid.at + 500*time.Millisecond)},
		{"applied", done.rec.Events(), true, t0.Add(done.at)},
		{"preflight-failed", failed.rec.Events(), true, t0.Add(failed.at)},
	}
	for _, c := range cases {
		for _, sz := range sizes {
			t.Run(fmt.Sprintf("%s-%dx%d", c.name, sz.w, sz.h), func(t *testing.T) {
				d := runDashboard(t, sz.w, sz.h, dashOpts(c.now, nil), c.evs, c.done)
				checkFrame(t, d, sz.w, sz.h)
			})
		}
	}
}

// TestDashboardContent checks what the frames must say, independently of the golden files.
func TestDashboardContent(t *testing.T) {
	up := applyStart()
	d := runDashboard(t, 120, 40, dashOpts(t0.Add(up.at), nil), up.rec.Events(), false)
	f := frame(d)
	// 117 MiB of 160 MiB in 4 s: 73 % at 29.2 MiB/s.
	for _, want := range []string{"Uploads", "k3s-airgap-images-amd…", " 73%", "29.2 MiB/s", "117.0 MiB / 160.0 MiB", "1 done",
		"WARN", "Swap", "fix: turn it off", "IGNORED", "Memory", "cp1", "server*", "192.0.2.20", "recorded host key"} {
		if !strings.Contains(f, want) {
			t.Errorf("uploading frame lacks %q:\n%s", want, f)
		}
	}
	all := applyDone(applyBringUp(applyStart()))
	d = runDashboard(t, 120, 40, dashOpts(t0.Add(all.at), nil), all.rec.Events(), true)
	f = frame(d)
	for _, want := range []string{"✓ apply succeeded in 41.7s", "/home/ada/lab.kubeconfig", "https://rancher.192.0.2.10.sslip.io",
		"export KUBECONFIG=/home/ada/lab.kubeconfig", "kubectl get nodes", "6.1s  api-ready", "12.3s  node-ready", "10.42.0.0/24"} {
		if !strings.Contains(f, want) {
			t.Errorf("final frame lacks %q:\n%s", want, f)
		}
	}
	if strings.Contains(f, "Uploads") {
		t.Errorf("the final frame still shows uploads:\n%s", f)
	}
	if !d.Finished() || d.Summary() == nil || !d.Summary().OK {
		t.Error("the model did not record the summary")
	}
}

// TestDashboardKeys: q cancels once and keeps the dashboard up until the run returns; l and ?
// toggle the log pane and the help.
func TestDashboardKeys(t *testing.T) {
	var cancels atomic.Int32
	r := applyStart()
	ch := make(chan events.Event, 1024)
	d := NewDashboard(dashOpts(t0.Add(r.at), func() { cancels.Add(1) }), ch, nil)
	tm, p := newProbe(t, d, 100, 30)
	for _, e := range r.rec.Events() {
		ch <- e
	}
	waitScreen(t, tm, p, "Uploads")
	tm.Type("l")
	if f := waitScreen(t, tm, p, "(l hides)"); !strings.Contains(f, "preflight [WARNING Swap] swap is on") {
		t.Errorf("the log pane does not show the plain lines:\n%s", f)
	}
	tm.Type("?")
	waitScreen(t, tm, p, "Symbols")
	tm.Type("?")
	tm.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	waitScreen(t, tm, p, "cancelling")
	tm.Type("q") // a second request does not cancel twice
	// The installer stops: the remaining events arrive, then the stream ends.
	em := events.Emitter{Sink: events.SinkFunc(func(e events.Event) { ch <- e }), Phase: "apply"}
	em.Fail("", "apply", events.ErrorInfo{Message: "cancelled; the step that was running finished or was stopped before anything was half-written", Resume: "re-run `k3strap apply` to continue"})
	em.Summary(events.SummaryInfo{Command: "apply", ExitCode: 130, ExitMeaning: "cancelled", Seconds: 9})
	close(ch)
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*probe).renderer.(*Dashboard)
	if n := cancels.Load(); n != 1 {
		t.Errorf("Cancel called %d times, want 1", n)
	}
	f := frame(fm)
	for _, want := range []string{"exit 130 (cancelled)", "re-run `k3strap apply` to continue", "cancel requested"} {
		if !strings.Contains(f, want) {
			t.Errorf("final frame lacks %q:\n%s", want, f)
		}
	}
}

// TestDashboardColours: severities are coloured on a colour terminal, and NO_COLOR removes
// every colour (text stays).
func TestDashboardColours(t *testing.T) {
	r := preflightFailed()
	render := func(p colorprofile.Profile) string {
		var out bytes.Buffer
		s := Start(Terminal{In: strings.NewReader(""), Out: &out, Width: 100, Height: 30, Profile: &p}, dashOpts(t0.Add(r.at), nil))
		for _, e := range r.rec.Events() {
			s.Emit(e)
		}
		if err := s.Finish(nil); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	colour := render(colorprofile.ANSI)
	if !strings.Contains(colour, "\x1b[31") && !strings.Contains(colour, ";31m") && !strings.Contains(colour, "[1;31m") {
		t.Errorf("no red in the colour output: %q", colour)
	}
	none := render(Profile(io.Discard, []string{"NO_COLOR=1", "TERM=xterm-256color"}))
	if strings.Contains(none, "[31m") || strings.Contains(none, ";31m") || strings.Contains(none, "[33m") || strings.Contains(none, ";33m") {
		t.Errorf("NO_COLOR output has colours: %q", none)
	}
	if !strings.Contains(none, "ERROR") || !strings.Contains(none, "CloudController") {
		t.Errorf("NO_COLOR output lost the text: %q", none)
	}
	if p := Profile(io.Discard, []string{"NO_COLOR=yes"}); p != colorprofile.Ascii {
		t.Errorf("NO_COLOR=yes gives profile %v", p)
	}
	if p := Profile(io.Discard, []string{"NO_COLOR="}); p == colorprofile.Ascii {
		t.Error("an empty NO_COLOR turned colours off")
	}
}

// TestDashboardSmallTerminal: below 80x24 the dashboard shows one line per host.
func TestDashboardSmallTerminal(t *testing.T) {
	r := applyDone(applyBringUp(applyStart()))
	d := runDashboard(t, 60, 12, dashOpts(t0.Add(r.at), nil), r.rec.Events(), true)
	f := frame(d)
	lines := strings.Split(strings.TrimSuffix(f, "\n"), "\n")
	if len(lines) > 11 {
		t.Errorf("%d lines in a 12-line window:\n%s", len(lines), f)
	}
	for _, want := range []string{"cp1", "cp2", "edge-1", "✓ apply succeeded"} {
		if !strings.Contains(f, want) {
			t.Errorf("compact frame lacks %q:\n%s", want, f)
		}
	}
}

// TestSessionRun: Run runs the function with a sink feeding the dashboard, returns its error,
// and q cancels the function's context.
func TestSessionRun(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	var out bytes.Buffer
	p := colorprofile.Ascii
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Run(t.Context(), Terminal{In: inR, Out: &out, Width: 100, Height: 30, Profile: &p}, DashboardOptions{Cluster: "lab", Static: true},
			func(ctx context.Context, sink events.Sink) error {
				em := events.Emitter{Sink: sink, Phase: "connect"}
				em.Started("connecting")
				close(started)
				<-ctx.Done()
				em.WithPhase("apply").Summary(events.SummaryInfo{Command: "apply", ExitCode: 130, ExitMeaning: "cancelled"})
				return ctx.Err()
			})
	}()
	<-started
	if _, err := inW.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want the run's context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not cancel the run")
	}
	if !strings.Contains(ansi.Strip(out.String()), "exit 130 (cancelled)") {
		t.Errorf("final frame not drawn: %q", out.String())
	}
}

// TestDashboardSpinnerTurns: with animation on, a working host's spinner advances.
func TestDashboardSpinnerTurns(t *testing.T) {
	opts := dashOpts(t0, nil)
	opts.Static = false
	d := NewDashboard(opts, nil, nil)
	tm, p := newProbe(t, d, 100, 30)
	r := &recorder{}
	r.em(events.PhaseConnect).Started("connecting to 3 hosts")
	tm.Send(EventMsg(r.rec.Events()))
	row := func(f string) string {
		for _, l := range strings.Split(f, "\n") {
			if strings.Contains(l, " cp1 ") {
				return l
			}
		}
		return ""
	}
	first := row(waitScreen(t, tm, p, "cp1"))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if now := row(waitScreen(t, tm, p, "cp1")); now != first {
			_ = tm.Quit()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the spinner did not move: %q", first)
}

// TestTimelineIsChronological: reached milestones are listed by their seconds, pending ones
// after them in the canonical order.
func TestTimelineIsChronological(t *testing.T) {
	r := &recorder{}
	sv := r.em(events.PhaseSupervise)
	sv.Started("watching cp1")
	sv.Milestone("cp1", events.MilestoneInfo{Name: "service-active", Seconds: 0.5})
	sv.Milestone("cp1", events.MilestoneInfo{Name: "api-ready", Seconds: 2.0})
	sv.Milestone("cp1", events.MilestoneInfo{Name: "node-ready", Seconds: 1.5})
	d := NewDashboard(dashOpts(t0, nil), nil, nil)
	d.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	d.Update(EventMsg(r.rec.Events()))
	var got []string
	_, tl, _ := strings.Cut(frame(d), "Bring-up")
	for _, l := range strings.Split(tl, "\n") {
		for _, m := range k3s.Milestones() {
			n := string(m)
			if strings.HasSuffix(strings.TrimSpace(l), n) || strings.Contains(l, " "+n+" ") {
				got = append(got, n)
			}
		}
	}
	want := []string{"service-active", "node-ready", "api-ready", "node-registered", "uninitialized-taint-gone", "podcidr-set", "subnet-env"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("timeline order %v, want %v\n%s", got, want, frame(d))
	}
}

// TestDashboardDryRun: what a dry run would change is listed with the size of each diff.
func TestDashboardDryRun(t *testing.T) {
	r := &recorder{}
	em := r.em(events.PhaseDryRun)
	em.Emit(events.Event{Type: events.Info, Host: "cp1", Message: "would replace /etc/rancher/k3s/config.yaml (mode 0600, 210 bytes, sha256 0123456789ab)",
		Diff: "--- /etc/rancher/k3s/config.yaml\n+++ /etc/rancher/k3s/config.yaml\n@@ -1,2 +1,3 @@\n-a: 1\n+a: 2\n+b: 3\n c: 4\n"})
	em.Info("cp1", "would restart k3s")
	em.Step("cp1", "plan", events.StatusChanged, "would replace /etc/rancher/k3s/config.yaml, restart k3s")
	d := NewDashboard(dashOpts(t0, nil), nil, nil)
	d.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	d.Update(EventMsg(r.rec.Events()))
	f := frame(d)
	for _, want := range []string{"Dry run", "~ cp1: would replace /etc/rancher/k3s/config.yaml", "+2 -1", "~ cp1: would restart k3s"} {
		if !strings.Contains(f, want) {
			t.Errorf("frame lacks %q:\n%s", want, f)
		}
	}
}

// TestDashboardHelpFits: the help fits an 80x24 window without cutting words off.
func TestDashboardHelpFits(t *testing.T) {
	d := NewDashboard(dashOpts(t0, nil), nil, nil)
	d.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	d.Update(tea.KeyPressMsg{Code: '?', Text: "?"})
	f := frame(d)
	if strings.Contains(f, "…") || !strings.Contains(f, "half-written. Re-run to resume.") || !strings.Contains(f, "events/schema.json") {
		t.Fatalf("help at 80x24:\n%s", f)
	}
	golden.RequireEqual(t, f)
}

// TestDashboardRancherPassword: a generated Rancher bootstrap password is shown from its file
// only when the options say so; otherwise the summary names the file. It is never in an event.
func TestDashboardRancherPassword(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "lab.rancher-password")
	if err := os.WriteFile(pwFile, []byte("s3cr3t-b00tstrap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	r.em(events.CommandPhase("apply")).Summary(events.SummaryInfo{Command: "apply", OK: true, Seconds: 1, RancherURL: "https://rancher.192.0.2.10.sslip.io",
		RancherPasswordFile: pwFile, RancherPasswordNew: true})
	for _, reveal := range []bool{false, true} {
		opts := dashOpts(t0, nil)
		opts.RevealRancherPassword = reveal
		d := NewDashboard(opts, nil, nil)
		d.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		d.Update(EventMsg(r.rec.Events()))
		f := frame(d)
		if got := strings.Contains(f, "s3cr3t-b00tstrap"); got != reveal {
			t.Errorf("reveal=%v: password shown %v:\n%s", reveal, got, f)
		}
		if !strings.Contains(f, pwFile) {
			t.Errorf("reveal=%v: the file is not named:\n%s", reveal, f)
		}
	}
}
