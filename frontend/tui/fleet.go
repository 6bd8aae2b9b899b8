// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"fmt"
	"time"

	"charm.land/bubbles/v2/progress"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
)

// The fleet dashboard (docs/fleet.md): the live view of a fleet run — its waves, a progress
// bar with the sites' totals, and one table row per site (state, time, what it does now or
// what failed with the exit's meaning) that scrolls and filters, so that 500 sites stay
// readable. It is driven by the fleet's events (wave, site_result, the fleet summary) and the
// sites' own events (stamped with their site), and by keys.

// FleetWave is one planned wave as the dashboard lists it before any event arrives.
type FleetWave struct {
	Number int
	Canary bool
	Sites  []string
}

// FleetOptions configure a fleet dashboard.
type FleetOptions struct {
	// Fleet is the fleet's name and Command what runs on its sites.
	Fleet, Command string
	// Waves is the run's plan, in order.
	Waves []FleetWave
	// Verbose adds debug events to the log pane.
	Verbose bool
	// Cancel is called once on q or ctrl+c (nil: the keys say the run cannot be cancelled).
	Cancel func()
	// Now is the clock (nil: time.Now); Static freezes spinners (tests).
	Now    func() time.Time
	Static bool
	// LogLines is how many log lines the log pane keeps (default 500).
	LogLines int
	// Fallback receives the events the program could not show (the terminal went away).
	Fallback events.Sink
}

// Filters of the site table, cycled by tab.
const (
	filterAll = iota
	filterActive
	filterFailed
	filterCount
)

var filterNames = [filterCount]string{"all", "active", "failed"}

// fleetSiteRow is one site's state.
type fleetSiteRow struct {
	name    string
	wave    int
	status  events.SiteStatus
	started time.Time
	// now says what runs on the site ("cp1 supervise: api-ready after 1.3s").
	now    string
	result *events.SiteResult
}

// fleetWaveRow is one wave's state: "" (not started), running, ok or failed.
type fleetWaveRow struct {
	FleetWave
	status       events.Status
	done, failed int
}

// askMsg asks the user a yes/no question (Session.Ask); the answer goes to reply.
type askMsg struct {
	question string
	reply    chan bool
}

// FleetDashboard is the bubbletea model of a fleet run.
type FleetDashboard struct {
	runView
	opts   FleetOptions
	st     styles
	width  int
	height int
	spin   spinner.Model
	bar    progress.Model
	table  table.Model

	sites  []*fleetSiteRow
	byName map[string]*fleetSiteRow
	waves  []*fleetWaveRow

	filter   int
	selected string
	stops    []string
	summary  *events.SummaryInfo
	ask      *askMsg

	cancelling, finished, showLog, showHelp bool
	runErr                                  error

	src <-chan events.Event
	res func() error
}

// NewFleetDashboard returns a fleet dashboard reading events from src until it is closed,
// then calling result for the run's error (src nil: driven by EventMsg and DoneMsg, tests).
func NewFleetDashboard(opts FleetOptions, src <-chan events.Event, result func() error) *FleetDashboard {
	d := &FleetDashboard{runView: newRunView(opts.LogLines, opts.Verbose, opts.Now), opts: opts, st: newStyles(), width: MinWidth, height: MinHeight, byName: map[string]*fleetSiteRow{}, src: src, res: result}
	d.spin = spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(d.st.accent))
	d.bar = progress.New(progress.WithFillCharacters('█', '░'), progress.WithoutPercentage(), progress.WithColors(lipgloss.Green))
	km := table.DefaultKeyMap()
	km.LineUp.SetKeys("up", "k")
	km.LineDown.SetKeys("down", "j")
	km.PageUp.SetKeys("pgup")
	km.PageDown.SetKeys("pgdown", "space")
	km.HalfPageUp.SetEnabled(false)
	km.HalfPageDown.SetEnabled(false)
	km.GotoTop.SetKeys("home")
	km.GotoBottom.SetKeys("end")
	d.table = table.New(table.WithFocused(true), table.WithKeyMap(km), table.WithStyles(table.Styles{
		Header:   d.st.dim.Padding(0, 1),
		Cell:     lipgloss.NewStyle().Padding(0, 1),
		Selected: d.st.selected,
	}))
	for _, w := range opts.Waves {
		d.waves = append(d.waves, &fleetWaveRow{FleetWave: w})
		for _, name := range w.Sites {
			d.site(name).wave = w.Number
		}
	}
	return d
}

// site returns the row of name, added when unknown.
func (d *FleetDashboard) site(name string) *fleetSiteRow {
	if r, ok := d.byName[name]; ok {
		return r
	}
	r := &fleetSiteRow{name: name, status: events.SitePending}
	d.sites = append(d.sites, r)
	d.byName[name] = r
	return r
}

// Init starts reading events and the spinner.
func (d *FleetDashboard) Init() tea.Cmd {
	cmds := []tea.Cmd{nextBatch(d.src, d.res)}
	if !d.opts.Static {
		cmds = append(cmds, d.spin.Tick)
	}
	return tea.Batch(cmds...)
}

// Update handles events, keys, questions, window sizes and spinner ticks.
func (d *FleetDashboard) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		d.width, d.height = msg.Width, msg.Height
	case EventMsg:
		for _, e := range msg {
			d.apply(e)
		}
		return d, nextBatch(d.src, d.res)
	case DoneMsg:
		d.finished, d.runErr = true, msg.Err
		if d.ask != nil {
			d.answer(false)
		}
		return d, tea.Quit
	case askMsg:
		d.ask = &msg
	case tea.KeyPressMsg:
		return d, d.key(msg)
	case spinner.TickMsg:
		if d.opts.Static || d.finished {
			return d, nil
		}
		var cmd tea.Cmd
		d.spin, cmd = d.spin.Update(msg)
		return d, cmd
	}
	return d, nil
}

func (d *FleetDashboard) answer(yes bool) {
	d.ask.reply <- yes
	d.ask = nil
}

func (d *FleetDashboard) key(k tea.KeyPressMsg) tea.Cmd {
	if d.ask != nil {
		switch k.String() {
		case "y", "enter":
			d.answer(true)
			return nil
		case "n", "esc":
			d.answer(false)
			return nil
		}
	}
	switch k.String() {
	case "q", "ctrl+c":
		if d.finished || d.cancelling {
			return nil
		}
		if d.ask != nil {
			d.answer(false)
		}
		d.cancelling = true
		d.addLog("cancel requested: running sites stop after their current remote step (nothing is left half-written)")
		if d.opts.Cancel != nil {
			d.opts.Cancel()
		}
		return nil
	case "tab":
		d.filter = (d.filter + 1) % filterCount
		return nil
	case "l":
		d.showLog = !d.showLog
		return nil
	case "?", "h":
		d.showHelp = !d.showHelp
		return nil
	case "esc":
		d.showHelp = false
		return nil
	}
	d.layoutTable()
	var cmd tea.Cmd
	d.table, cmd = d.table.Update(k)
	if row := d.table.SelectedRow(); row != nil {
		d.selected = row[0]
	}
	return cmd
}

// apply folds one event into the state.
func (d *FleetDashboard) apply(e events.Event) {
	// Names come from the inventories: made terminal-safe once here.
	e.Host, e.Site = frontend.StripControl(e.Host), frontend.StripControl(e.Site)
	d.observe(e)
	switch {
	case e.Type == events.WaveType && e.Wave != nil:
		w := d.wave(*e.Wave)
		w.status, w.done, w.failed = e.Status, e.Wave.Done, e.Wave.Failed
	case e.Type == events.SiteResultType && e.SiteResult != nil:
		r := d.site(e.Site)
		res := *e.SiteResult
		r.result, r.status = &res, res.Status
		if res.Wave > 0 {
			r.wave = res.Wave
		}
	case e.Site != "":
		r := d.site(e.Site)
		// A deferred site's events are its next attempt (docs/fleet.md "Offline sites").
		if r.status == events.SitePending || r.status == events.SiteDeferred {
			r.status, r.started = events.SiteRunning, e.Time
		}
		if now := siteNow(e); now != "" {
			r.now = now
		}
	case e.Type == events.Error:
		d.stops = append(d.stops, frontend.Sanitize(e.Message))
	case e.Type == events.Summary && e.Summary != nil:
		s := *e.Summary
		d.summary = &s
		for _, res := range s.Sites {
			r := d.site(res.Site)
			if r.result == nil {
				rc := res
				r.result, r.status = &rc, res.Status
			}
		}
	}
}

// wave returns the row of wave w (added when the plan did not have it).
func (d *FleetDashboard) wave(w events.WaveInfo) *fleetWaveRow {
	for _, r := range d.waves {
		if r.Number == w.Number {
			return r
		}
	}
	r := &fleetWaveRow{FleetWave: FleetWave{Number: w.Number, Canary: w.Canary, Sites: w.Sites}}
	d.waves = append(d.waves, r)
	return r
}

// siteNow is what a site's event says it does now, "" for events that say nothing new.
func siteNow(e events.Event) string {
	where := e.Host
	if where != "" {
		where += " "
	}
	where += string(e.Phase)
	switch e.Type {
	case events.HostStep:
		return fmt.Sprintf("%s: %s %s", where, e.Step, e.Status)
	case events.Milestone:
		if e.Milestone != nil && !e.Milestone.Skipped {
			return fmt.Sprintf("%s: %s after %.1fs", where, e.Milestone.Name, e.Milestone.Seconds)
		}
	case events.PhaseStarted:
		return where
	case events.Error:
		return where + ": " + frontend.Sanitize(e.Message)
	case events.UploadProgress:
		if e.Upload != nil && e.Upload.Total > 0 {
			return fmt.Sprintf("%s: upload %.0f%%", where, 100*float64(e.Upload.Bytes)/float64(e.Upload.Total))
		}
	}
	return ""
}

// Finished reports whether the run has returned.
func (d *FleetDashboard) Finished() bool { return d.finished }

// Summary returns the fleet's summary, nil before it arrived.
func (d *FleetDashboard) Summary() *events.SummaryInfo { return d.summary }

// StartFleet runs a fleet dashboard on term in a goroutine; opts.Cancel is what q/ctrl+c call.
func StartFleet(term Terminal, opts FleetOptions) *Session {
	s := newSession(opts.Fallback)
	s.run(term, NewFleetDashboard(opts, s.ch, s.result))
	return s
}

// Ask shows question on the session's dashboard and returns the answer (y/enter yes, n/esc
// no; q cancels the run and answers no). A dashboard that has ended answers no.
func (s *Session) Ask(ctx context.Context, question string) (bool, error) {
	reply := make(chan bool, 1)
	go s.prog.Send(askMsg{question: question, reply: reply})
	select {
	case yes := <-reply:
		return yes, nil
	case <-s.exited:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
