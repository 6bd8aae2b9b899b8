// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/table"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
)

// View renders the fleet dashboard inline (the final frame stays in the scrollback).
func (d *FleetDashboard) View() tea.View { return tea.NewView(d.Render() + "\n") }

// Render returns the frame as text (with styles) for the window size: the header, the waves,
// the totals with a progress bar, the site table filling the rest, the selected site's detail
// (or the log pane), the stop or summary, and the keys. Below MinWidth×MinHeight only the
// header, waves and totals.
func (d *FleetDashboard) Render() string {
	top := []string{d.header(), d.waveLine(), d.totals()}
	if d.width < MinWidth || d.height < MinHeight {
		return d.frame(top)
	}
	if d.showHelp {
		return d.frame(append(top, d.help()...))
	}
	bottom := d.detail()
	if d.showLog {
		n := max(3, (d.height-len(top))/3)
		bottom = append([]string{d.st.section.Render("Log") + d.st.dim.Render("  (l hides)")}, tail(d.log, n-1)...)
	}
	bottom = append(bottom, d.footer()...)
	tableH := d.height - 1 - len(top) - 1 - len(bottom)
	d.layoutTableHeight(tableH)
	return d.frame(append(append(append(top, ""), strings.Split(d.table.View(), "\n")...), bottom...))
}

// frame cuts lines to the window.
func (d *FleetDashboard) frame(lines []string) string {
	h := max(1, d.height-1)
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, max(10, d.width), "…")
	}
	return strings.Join(lines, "\n")
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (d *FleetDashboard) spinner() string {
	if d.finished || d.opts.Static {
		return d.st.accent.Render("▶")
	}
	return d.spin.View()
}

func (d *FleetDashboard) header() string {
	st := d.st
	left := st.title.Render("k3strap "+d.opts.Command) + st.dim.Render(" · fleet ") + st.bold.Render(d.opts.Fleet) +
		st.dim.Render(fmt.Sprintf(" · %d %s · %d %s", len(d.sites), plural(len(d.sites), "site", "sites"), len(d.waves), plural(len(d.waves), "wave", "waves")))
	right := runVerdict(st, d.summary, d.finished, d.cancelling)
	if right == "" {
		right = d.spinner() + " running"
	}
	right += st.dim.Render(fmt.Sprintf("  %s", duration(d.elapsed(d.summary))))
	gap := max(1, d.width-lipgloss.Width(left)-lipgloss.Width(right))
	return left + strings.Repeat(" ", gap) + right
}

// duration formats seconds as 12.3s, 4m05s or 1h02m.
func duration(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.1fs", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
}

// waveLine shows every wave as one chip — ✓ done, ✗ failed, ▶ running with its progress,
// · not started — the running and failed ones kept when the line is too long.
func (d *FleetDashboard) waveLine() string {
	st := d.st
	label := st.section.Render("Waves")
	if len(d.waves) == 0 {
		return label + st.dim.Render("  one wave: every site, no canary (the command changes nothing)")
	}
	chips := make([]string, len(d.waves))
	keep := make([]bool, len(d.waves))
	for i, w := range d.waves {
		name := fmt.Sprint(w.Number)
		if w.Canary {
			name += " canary"
		}
		switch w.status {
		case events.StatusRunning:
			done, failed := d.waveCounts(w)
			chips[i] = st.accent.Render(fmt.Sprintf("▶ %s %d/%d", name, done+failed, len(w.Sites)))
			if failed > 0 {
				chips[i] += st.fail.Render(fmt.Sprintf(" ✗%d", failed))
			}
			keep[i] = true
		case events.StatusFailed:
			chips[i] = st.fail.Render(fmt.Sprintf("✗ %s (%d failed)", name, w.failed))
			keep[i] = true
		case events.StatusOK:
			chips[i] = st.ok.Render("✓ " + name)
		default:
			chips[i] = st.dim.Render(fmt.Sprintf("· %s (%d)", name, len(w.Sites)))
		}
	}
	line := label + "  " + strings.Join(chips, "  ")
	if lipgloss.Width(line) <= d.width {
		return line
	}
	// Too many waves: the finished ones before the first kept chip fold into a count.
	var shown []string
	folded := 0
	for i, c := range chips {
		if keep[i] || (i > 0 && keep[i-1]) || d.waves[i].status == "" {
			shown = append(shown, c)
			continue
		}
		folded++
	}
	prefix := ""
	if folded > 0 {
		prefix = st.ok.Render(fmt.Sprintf("✓ %d waves", folded)) + "  "
	}
	return label + "  " + prefix + strings.Join(shown, "  ")
}

// waveCounts counts a wave's sites that ended done (or checked) and failed so far.
func (d *FleetDashboard) waveCounts(w *fleetWaveRow) (done, failed int) {
	for _, name := range w.Sites {
		switch d.byName[name].status {
		case events.SiteDone, events.SiteChecked, events.SiteWarnings:
			done++
		case events.SiteFailed:
			failed++
		}
	}
	return done, failed
}

// totals is the progress bar and the count of sites per state.
func (d *FleetDashboard) totals() string {
	st := d.st
	n := map[events.SiteStatus]int{}
	for _, r := range d.sites {
		n[r.status]++
	}
	ended := n[events.SiteDone] + n[events.SiteChecked] + n[events.SiteWarnings] + n[events.SiteFailed] + n[events.SiteCancelled]
	for _, r := range d.sites {
		// A deferred site with no attempt left has ended; one waiting for its retry has not.
		if r.status == events.SiteDeferred && r.result != nil && r.result.RetryInSeconds == 0 {
			ended++
		}
	}
	parts := []string{fmt.Sprintf("%d/%d", ended, len(d.sites))}
	add := func(s events.SiteStatus, style lipgloss.Style, sym string) {
		if n[s] > 0 {
			parts = append(parts, style.Render(fmt.Sprintf("%s %d %s", sym, n[s], s)))
		}
	}
	add(events.SiteDone, st.ok, "✓")
	add(events.SiteChecked, st.ok, "✓")
	add(events.SiteWarnings, st.warn, "!")
	add(events.SiteFailed, st.fail, "✗")
	add(events.SiteCancelled, st.warn, "–")
	add(events.SiteDeferred, st.warn, "↻")
	add(events.SiteRunning, st.accent, "▶")
	add(events.SitePending, st.dim, "·")
	counts := strings.Join(parts, "  ")
	barW := max(10, min(40, d.width-lipgloss.Width(counts)-2))
	d.bar.SetWidth(barW)
	pct := 0.0
	if len(d.sites) > 0 {
		pct = float64(ended) / float64(len(d.sites))
	}
	return d.bar.ViewAs(pct) + "  " + counts
}

// filtered returns the rows the table shows under the filter, in wave order.
func (d *FleetDashboard) filtered() []*fleetSiteRow {
	var out []*fleetSiteRow
	for _, r := range d.sites {
		switch d.filter {
		case filterActive:
			if r.status != events.SiteRunning && r.status != events.SiteFailed && r.status != events.SiteCancelled && r.status != events.SiteDeferred {
				continue
			}
		case filterFailed:
			if r.status != events.SiteFailed {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// layoutTable fills the table with the filtered sites for the current size (before a key
// moves its cursor).
func (d *FleetDashboard) layoutTable() { d.layoutTableHeight(max(3, d.height-8)) }

// layoutTableHeight sets the table's columns, rows (the selected site kept under the cursor)
// and height h (header included).
func (d *FleetDashboard) layoutTableHeight(h int) {
	nameW := 4
	for _, r := range d.sites {
		nameW = max(nameW, lipgloss.Width(r.name))
	}
	nameW = min(nameW, 24)
	// Each cell has one space of padding on each side.
	fixed := (nameW + 2) + (4 + 2) + (9 + 2) + (7 + 2)
	whatW := max(10, d.width-fixed-2)
	d.table.SetColumns([]table.Column{{Title: "SITE", Width: nameW}, {Title: "WAVE", Width: 4}, {Title: "STATE", Width: 9}, {Title: "TIME", Width: 7}, {Title: d.whatTitle(), Width: whatW}})
	rows := d.filtered()
	tr := make([]table.Row, len(rows))
	cursor := -1
	for i, r := range rows {
		tr[i] = table.Row{r.name, fmt.Sprint(r.wave), d.stateText(r), d.timeText(r), d.whatText(r)}
		if r.name == d.selected {
			cursor = i
		}
	}
	if cursor < 0 {
		// The selected site is not shown (a new filter): select the first shown.
		cursor, d.selected = 0, ""
		if len(rows) > 0 {
			d.selected = rows[0].name
		}
	}
	d.table.SetRows(tr)
	d.table.SetWidth(d.width)
	d.table.SetHeight(max(2, min(h, len(rows)+1)))
	d.table.SetCursor(cursor)
}

func (d *FleetDashboard) whatTitle() string {
	t := "NOW / WHAT FAILED"
	if d.filter != filterAll {
		t += " (" + filterNames[d.filter] + ")"
	}
	return t
}

// stateText is a row's state with its symbol (words, so nothing is lost without colour).
func (d *FleetDashboard) stateText(r *fleetSiteRow) string {
	switch r.status {
	case events.SiteDone:
		return "✓ done"
	case events.SiteChecked:
		return "✓ checked"
	case events.SiteWarnings:
		return "! warnings"
	case events.SiteFailed:
		return "✗ failed"
	case events.SiteCancelled:
		return "– cancelled"
	case events.SiteDeferred:
		// "offline" fits the column (the totals and the row's text say deferred).
		return "↻ offline"
	case events.SiteRunning:
		return "▶ running"
	}
	return "· pending"
}

func (d *FleetDashboard) timeText(r *fleetSiteRow) string {
	switch {
	case r.result != nil && r.result.Status != events.SitePending:
		return duration(r.result.Seconds)
	case r.status == events.SiteRunning && !r.started.IsZero():
		return duration(max(0, d.now().Sub(r.started).Seconds()))
	}
	return ""
}

// whatText is what a site does now, or its outcome: for a failure the exit code and its
// meaning, the host and step, and the message.
func (d *FleetDashboard) whatText(r *fleetSiteRow) string {
	if r.result != nil && r.result.Status != events.SitePending {
		if r.result.Status == events.SiteDone || r.result.Status == events.SiteChecked {
			return frontend.Sanitize(r.result.Message)
		}
		if r.result.Status == events.SiteDeferred {
			return frontend.Sanitize(r.result.Message + "; last reached " + frontend.LastReachedText(*r.result))
		}
		return frontend.Sanitize(frontend.SiteFailureText(*r.result))
	}
	return frontend.Sanitize(r.now)
}

// detail is the selected site's line in full (wrapped), and the stop or the summary's next
// steps.
func (d *FleetDashboard) detail() []string {
	st := d.st
	var out []string
	if r := d.byName[d.selected]; r != nil && (r.result != nil || r.now != "") {
		text := d.whatText(r)
		for i, l := range wrapWords(r.name+": "+text, d.width-2) {
			if i == 2 {
				break
			}
			if r.status == events.SiteFailed {
				l = st.fail.Render(l)
			}
			out = append(out, l)
		}
	}
	for _, s := range d.stops {
		out = append(out, st.fail.Render("✗ "+s))
	}
	if d.summary != nil {
		for _, n := range d.summary.Next {
			out = append(out, st.dim.Render("next: ")+n)
		}
	}
	return out
}

func (d *FleetDashboard) footer() []string {
	st := d.st
	switch {
	case d.ask != nil:
		return []string{st.warn.Render(d.ask.question) + "  " + st.key.Render("y") + " yes · " + st.key.Render("n") + " stop here"}
	case d.finished:
		return nil
	case d.cancelling:
		return []string{st.warn.Render("cancelling: running sites stop after their current remote step — nothing is left half-written")}
	}
	keys := []string{st.key.Render("↑↓ pgup pgdn") + " scroll", st.key.Render("tab") + " " + filterNames[d.filter] + "→" + filterNames[(d.filter+1)%filterCount],
		st.key.Render("l") + " log", st.key.Render("?") + " help", st.key.Render("q") + " cancel"}
	return []string{strings.Join(keys, st.dim.Render(" · "))}
}

func (d *FleetDashboard) help() []string {
	st := d.st
	w := max(30, d.width-16)
	lines := []string{"", st.section.Render("Keys")}
	key := func(k, what string) {
		for i, part := range wrapWords(what, w) {
			label := "          "
			if i == 0 {
				label = fmt.Sprintf("%-10s", k)
			}
			lines = append(lines, "  "+st.key.Render(label)+"  "+part)
		}
	}
	key("↑↓ pg home", "move through the sites (the line below the table shows the selected one in full)")
	key("tab", "show all sites, the active ones (running, failed, cancelled), or the failed ones")
	key("y n", "answer the question between waves (rollout.pause)")
	key("q ctrl+c", "cancel: running sites stop as a cancelled apply does, no new site starts; the state file says which are done. Re-run to continue.")
	key("l ?", "log pane; this help")
	lines = append(lines, "", st.section.Render("States"),
		"  ✓ done  ✓ checked (done before with the same inventory)  ✗ failed  – cancelled  ▶ running  · pending")
	return lines
}
