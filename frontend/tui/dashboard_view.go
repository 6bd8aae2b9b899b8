// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"path"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/k3s"
)

// The dashboard's view: layout (sections fitted to the terminal, lowest priority dropped
// first) and one renderer per section. The state it renders is dashboard.go's.

// View renders the dashboard inline (the final frame stays in the terminal's scrollback). The
// frame ends with an empty line: the renderer erases the screen below its last line on exit.
func (d *Dashboard) View() tea.View {
	return tea.NewView(d.Render() + "\n")
}

// Render returns the dashboard's frame as text (with styles) for the current window size.
func (d *Dashboard) Render() string {
	if d.width < MinWidth || d.height < MinHeight {
		return d.compact()
	}
	if d.showHelp {
		return d.fit([]section{d.header(), d.help()}, d.footer())
	}
	secs := []section{d.header(), d.hostSection(), d.uploadSection(), d.preflightSection(), d.changeSection(), d.timelineSection(), d.warningSection(), d.failureSection(), d.summarySection()}
	if d.showLog {
		secs = append(secs, d.logSection())
	}
	return d.fit(secs, d.footer())
}

// section is a block of lines; when the frame is too tall, sections shrink (lowest priority
// first) down to min lines, a last line saying how many were left out.
type section struct {
	lines []string
	min   int
	// prio orders shrinking: lower shrinks first.
	prio int
	// fixed sections never shrink.
	fixed bool
}

// Shrinking priorities.
const (
	prioWarnings = iota + 1
	prioLog
	prioPreflight
	prioUploads
	prioHosts
	prioTimeline
	prioFailures
)

// fit lays sections out within the window: while the frame is too tall the lowest-priority
// section that can still shrink gives up lines; blank lines separate sections while there is
// room; long lines are truncated.
func (d *Dashboard) fit(secs []section, footer []string) string {
	var kept []section
	for _, s := range secs {
		if len(s.lines) > 0 {
			kept = append(kept, s)
		}
	}
	total := func() int {
		n := len(footer)
		for _, s := range kept {
			n += len(s.lines)
		}
		return n
	}
	budget := d.height - 1 // the cursor line below an inline frame
	for total() > budget {
		pick := -1
		for i, s := range kept {
			if s.fixed || len(s.lines) <= max(s.min, 1) {
				continue
			}
			if pick < 0 || s.prio < kept[pick].prio {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		kept[pick] = shrink(kept[pick], len(kept[pick].lines)-(total()-budget), d.st)
	}
	gaps := budget - total()
	var out []string
	for i, s := range kept {
		if i > 0 && gaps > 0 {
			out = append(out, "")
			gaps--
		}
		out = append(out, s.lines...)
	}
	out = append(out, footer...)
	if len(out) > budget {
		out = out[:budget]
	}
	for i, l := range out {
		out[i] = ansi.Truncate(l, d.width, "…")
	}
	return strings.Join(out, "\n")
}

// shrink cuts s to n lines (at least its minimum, and 1): the title line stays, the last line
// says how many lines are hidden; a section cut to one line gets the count on its title.
func shrink(s section, n int, st styles) section {
	n = max(n, s.min, 1)
	if n >= len(s.lines) {
		return s
	}
	out := section{min: s.min, prio: s.prio}
	if n == 1 {
		n := len(s.lines) - 1
		out.lines = []string{s.lines[0] + st.dim.Render(fmt.Sprintf("  (%d more %s; l shows the log)", n, plural(n, "line", "lines")))}
		return out
	}
	hidden := len(s.lines) - n + 1
	out.lines = append(append([]string(nil), s.lines[:n-1]...), st.dim.Render(fmt.Sprintf("  … %d more", hidden)))
	return out
}

func (d *Dashboard) header() section {
	st := d.st
	title := "k3strap"
	if d.summary != nil {
		title += " " + d.summary.Command
	}
	left := st.title.Render(title)
	if d.opts.Cluster != "" {
		left += st.dim.Render(" · cluster ") + st.bold.Render(d.opts.Cluster)
	}
	left += st.dim.Render(fmt.Sprintf(" · %d %s", len(d.hosts), plural(len(d.hosts), "host", "hosts")))
	right := runVerdict(st, d.summary, d.finished, d.cancelling)
	switch {
	case right != "":
	case d.phase != "":
		right = d.spinner() + " " + string(d.phase)
	default:
		right = d.spinner() + " starting"
	}
	right += st.dim.Render(fmt.Sprintf("  %.1fs", d.elapsed(d.summary)))
	gap := max(1, d.width-lipgloss.Width(left)-lipgloss.Width(right))
	return section{lines: []string{left + strings.Repeat(" ", gap) + right}, fixed: true}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (d *Dashboard) spinner() string {
	if d.finished {
		return " "
	}
	return d.spin.View()
}

// icon is a host's or milestone's state symbol.
func (d *Dashboard) hostIcon(r *hostRow) string {
	st := d.st
	switch {
	case r.failed:
		return st.fail.Render("✗")
	case r.final && r.status == events.StatusSkipped:
		return st.dim.Render("–")
	case r.final:
		return st.ok.Render("✓")
	case d.finished:
		return st.dim.Render("–")
	case !r.touched || (r.idle && !d.supervising(r)):
		return st.dim.Render("·")
	default:
		return d.spin.View()
	}
}

// supervising reports whether r is the first server while its bring-up is being watched.
func (d *Dashboard) supervising(r *hostRow) bool {
	if !d.superv || r.Name != d.timeline || d.summary != nil {
		return false
	}
	for _, m := range d.milestones {
		if m.Name == "node-ready" {
			return false
		}
	}
	return true
}

func (d *Dashboard) hostSection() section {
	if len(d.hosts) == 0 {
		return section{}
	}
	st := d.st
	nameW, addrW := 4, 7
	for _, r := range d.hosts {
		nameW = max(nameW, lipgloss.Width(r.Name))
		addrW = max(addrW, lipgloss.Width(r.Address))
	}
	nameW, addrW = min(nameW, 20), min(addrW, 22)
	wide := d.width >= 110
	head := fmt.Sprintf("   %-*s  %-7s  ", nameW, "HOST", "ROLE")
	if wide {
		head += fmt.Sprintf("%-*s  ", addrW, "ADDRESS")
	}
	head += fmt.Sprintf("%-11s  %s", "PHASE", "STATUS")
	lines := []string{st.dim.Render(head)}
	for _, r := range d.hosts {
		role := r.Role
		if r.First {
			role += "*"
		}
		phase := string(r.phase)
		if r.final {
			phase = string(r.status)
		}
		l := fmt.Sprintf(" %s %-*s  %-7s  ", d.hostIcon(r), nameW, ansi.Truncate(r.Name, nameW, "…"), role)
		if wide {
			l += fmt.Sprintf("%-*s  ", addrW, ansi.Truncate(r.Address, addrW, "…"))
		}
		msg := r.message
		if r.failed {
			msg = st.fail.Render(msg)
		}
		l += fmt.Sprintf("%-11s  %s", ansi.Truncate(phase, 11, "…"), msg)
		lines = append(lines, l)
	}
	return section{lines: lines, min: 3, prio: prioHosts}
}

func (d *Dashboard) uploadSection() section {
	if len(d.uploads) == 0 || d.finished {
		return section{}
	}
	st := d.st
	lines := []string{st.section.Render("Uploads") + st.dim.Render(fmt.Sprintf("  %d done", d.uploaded))}
	// ↑ host(10) file(22) bar(*) pct(5) rate(12) [size(21) on wide terminals]
	wide := d.width >= 110
	barW := d.width - 2 - 2 - 10 - 1 - 22 - 1 - 1 - 5 - 2 - 12
	if wide {
		barW -= 2 + 21
	}
	barW = max(10, min(barW, 50))
	d.bar.SetWidth(barW)
	for _, u := range d.uploads {
		pct := 0.0
		if u.total > 0 {
			pct = float64(u.bytes) / float64(u.total)
		}
		rate := "–"
		if r := u.rate(); r > 0 {
			rate = frontend.HumanBytes(int64(r)) + "/s"
		}
		l := fmt.Sprintf("  %s %-10s %-22s %s %4.0f%%  %12s",
			st.accent.Render("↑"), ansi.Truncate(u.host, 10, "…"), ansi.Truncate(path.Base(u.file), 22, "…"),
			d.bar.ViewAs(pct), pct*100, rate)
		if wide {
			l += "  " + st.dim.Render(frontend.HumanBytes(u.bytes)+" / "+frontend.HumanBytes(u.total))
		}
		lines = append(lines, l)
	}
	return section{lines: lines, min: 2, prio: prioUploads}
}

func severityRank(s string) int {
	switch s {
	case "error":
		return 0
	case "warning":
		return 1
	}
	return 2
}

func (d *Dashboard) preflightSection() section {
	if d.preflight == "" && len(d.findings) == 0 {
		return section{}
	}
	st := d.st
	errs, warns, ign := 0, 0, 0
	for _, f := range d.findings {
		switch f.Severity {
		case "error":
			errs++
		case "warning":
			warns++
		default:
			ign++
		}
	}
	title := st.section.Render("Preflight") + "  "
	switch {
	case d.preflight == events.StatusRunning:
		title += d.spinner() + " checking"
	case errs > 0:
		title += st.fail.Render(fmt.Sprintf("✗ %d %s", errs, plural(errs, "error", "errors")))
	default:
		title += st.ok.Render("✓ passed")
	}
	if warns > 0 {
		title += st.warn.Render(fmt.Sprintf("  %d %s", warns, plural(warns, "warning", "warnings")))
	}
	if ign > 0 {
		title += st.ignored.Render(fmt.Sprintf("  %d ignored", ign))
	}
	lines := []string{title}
	fs := append([]finding(nil), d.findings...)
	sort.SliceStable(fs, func(i, j int) bool { return severityRank(fs[i].Severity) < severityRank(fs[j].Severity) })
	hostW, checkW := 4, 5
	for _, f := range fs {
		hostW = max(hostW, len(f.host))
		checkW = max(checkW, len(f.Check))
	}
	hostW, checkW = min(hostW, 14), min(checkW, 22)
	indent := strings.Repeat(" ", 2+7+1+hostW+1+checkW+1)
	for _, f := range fs {
		var tag string
		switch f.Severity {
		case "error":
			tag = st.fail.Render("ERROR  ")
		case "warning":
			tag = st.warn.Render("WARN   ")
		default:
			tag = st.ignored.Render("IGNORED")
		}
		host := f.host
		if host == "" {
			host = "-"
		}
		msg := wrapWords(frontend.Sanitize(f.Message), max(20, d.width-lipgloss.Width(indent)))
		if len(msg) == 0 {
			msg = []string{""}
		}
		lines = append(lines, fmt.Sprintf("  %s %-*s %-*s %s", tag, hostW, ansi.Truncate(host, hostW, "…"), checkW, ansi.Truncate(f.Check, checkW, "…"), msg[0]))
		for _, part := range msg[1:] {
			lines = append(lines, indent+part)
		}
		if f.Fix != "" {
			w := max(20, d.width-lipgloss.Width(indent)-5)
			for i, part := range wrapWords(frontend.Sanitize(f.Fix), w) {
				lead := "fix: "
				if i > 0 {
					lead = "     "
				}
				lines = append(lines, indent+st.accent.Render(lead)+part)
			}
		}
	}
	return section{lines: lines, min: 1, prio: prioPreflight}
}

// wrapWords wraps s at spaces to lines of at most w cells; longer words are cut.
func wrapWords(s string, w int) []string {
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		cur := ""
		for _, word := range strings.Fields(para) {
			for ansi.StringWidth(word) > w {
				if cur != "" {
					lines, cur = append(lines, cur), ""
				}
				lines = append(lines, ansi.Cut(word, 0, w))
				word = ansi.Cut(word, w, ansi.StringWidth(word))
			}
			switch {
			case cur == "":
				cur = word
			case ansi.StringWidth(cur)+1+ansi.StringWidth(word) <= w:
				cur += " " + word
			default:
				lines, cur = append(lines, cur), word
			}
		}
		if cur != "" {
			lines = append(lines, cur)
		}
	}
	return lines
}

func (d *Dashboard) timelineSection() section {
	if d.timeline == "" || (!d.superv && len(d.milestones) == 0) {
		return section{}
	}
	st := d.st
	title := st.section.Render("Bring-up") + "  " + st.bold.Render(d.timeline) + st.dim.Render(" (first server)")
	lines := []string{title}
	seen := map[string]milestone{}
	var order []string
	for _, m := range d.milestones {
		if _, ok := seen[m.Name]; !ok {
			order = append(order, m.Name)
		}
		seen[m.Name] = m
	}
	// Reached milestones in the order they happened (skipped ones where the canonical order
	// puts them), then the pending ones in the canonical order.
	canonical := k3s.Milestones()
	rank := func(n string) int {
		if i := k3s.Milestone(n).Index(); i >= 0 {
			return i
		}
		return len(canonical)
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := seen[order[i]], seen[order[j]]
		if a.Skipped || b.Skipped || a.Seconds == b.Seconds {
			return rank(a.Name) < rank(b.Name)
		}
		return a.Seconds < b.Seconds
	})
	names := order
	for _, m := range canonical {
		if n := string(m); seen[n].Name == "" {
			names = append(names, n)
		}
	}
	// The widest bar spans the latest milestone's seconds.
	maxSec := 0.0
	for _, m := range d.milestones {
		maxSec = max(maxSec, m.Seconds)
	}
	barW := max(0, min(24, d.width-96))
	pendingShown := false
	for _, n := range names {
		m, ok := seen[n]
		switch {
		case ok && m.Skipped:
			lines = append(lines, fmt.Sprintf("  %s %8s  %-26s %s", st.dim.Render("–"), "skipped", n, st.dim.Render(frontend.Sanitize(m.Detail))))
		case ok:
			l := fmt.Sprintf("  %s %7.1fs  %-26s", st.ok.Render("✓"), m.Seconds, n)
			if barW > 0 && maxSec > 0 {
				n := max(1, int(float64(barW)*m.Seconds/maxSec+0.5))
				l += " " + st.accent.Render(strings.Repeat("▪", n))
				if m.Detail != "" {
					l += strings.Repeat(" ", barW-n+1)
				}
			}
			if m.Detail != "" {
				l += " " + st.dim.Render(frontend.Sanitize(m.Detail))
			}
			lines = append(lines, l)
		case !pendingShown && !d.finished && d.summary == nil:
			pendingShown = true
			lines = append(lines, fmt.Sprintf("  %s %8s  %s", d.spin.View(), "", n))
		default:
			lines = append(lines, st.dim.Render(fmt.Sprintf("  · %8s  %s", "", n)))
		}
	}
	return section{lines: lines, min: 2, prio: prioTimeline}
}

// changeSection lists what a dry run would change (apply --dry-run), with diff sizes.
func (d *Dashboard) changeSection() section {
	if len(d.changes) == 0 {
		return section{}
	}
	st := d.st
	lines := []string{st.section.Render("Dry run") + st.dim.Render("  nothing is changed; --output plain prints the diffs")}
	for _, c := range d.changes {
		l := "  " + st.accent.Render("~") + " " + hostPrefix(c.host) + c.what
		if c.added+c.removed > 0 {
			l += " " + st.ok.Render(fmt.Sprintf("+%d", c.added)) + " " + st.fail.Render(fmt.Sprintf("-%d", c.removed))
		}
		lines = append(lines, l)
	}
	return section{lines: lines, min: 2, prio: prioPreflight}
}

func (d *Dashboard) warningSection() section {
	if len(d.warnings) == 0 {
		return section{}
	}
	lines := []string{d.st.section.Render("Warnings")}
	for _, w := range d.warnings {
		lines = append(lines, "  "+d.st.warn.Render("!")+" "+w)
	}
	return section{lines: lines, min: 1, prio: prioWarnings}
}

func (d *Dashboard) failureSection() section {
	if len(d.failures) == 0 {
		return section{}
	}
	st := d.st
	var lines []string
	for _, f := range d.failures {
		where := string(f.phase)
		if f.host != "" {
			where = f.host + " " + where
		}
		lines = append(lines, st.fail.Render("✗ "+where+": ")+frontend.Sanitize(f.info.Message))
		if f.info.Diagnosis != "" {
			lines = append(lines, "    "+st.dim.Render("diagnosis ")+f.info.Diagnosis)
		}
		for _, ev := range f.info.Evidence {
			lines = append(lines, "    "+st.dim.Render("evidence  ")+frontend.Sanitize(ev))
		}
		for _, fx := range strings.Split(frontend.Sanitize(f.info.Fix), "\n") {
			if fx != "" {
				lines = append(lines, "    "+st.accent.Render("fix       ")+fx)
			}
		}
		if f.info.Resume != "" {
			lines = append(lines, "    "+st.accent.Render("then      ")+frontend.Sanitize(f.info.Resume))
		}
	}
	return section{lines: lines, min: 2, prio: prioFailures}
}

func (d *Dashboard) summarySection() section {
	st := d.st
	s := d.summary
	if s == nil {
		if d.finished {
			msg := "the run stopped before its summary"
			if d.runErr != nil {
				msg += ": " + frontend.Sanitize(d.runErr.Error())
			}
			return section{lines: []string{st.fail.Render("✗ " + msg)}, fixed: true}
		}
		return section{}
	}
	var lines []string
	if s.OK {
		lines = append(lines, st.ok.Bold(true).Render(fmt.Sprintf("✓ %s succeeded in %.1fs", s.Command, s.Seconds)))
	} else {
		lines = append(lines, st.fail.Render(fmt.Sprintf("✗ %s failed after %.1fs — exit %d (%s)", s.Command, s.Seconds, s.ExitCode, s.ExitMeaning)))
	}
	if s.Kubeconfig != "" {
		lines = append(lines, "  "+st.dim.Render("kubeconfig ")+" "+st.bold.Render(s.Kubeconfig))
	}
	if s.RancherURL != "" {
		lines = append(lines, "  "+st.dim.Render("rancher    ")+" "+st.accent.Render(s.RancherURL))
	}
	for _, l := range frontend.RancherPasswordLines(s, d.opts.RevealRancherPassword) {
		for _, part := range wrapWords(l, max(20, d.width-14)) {
			lines = append(lines, "  "+st.dim.Render("           ")+" "+part)
		}
	}
	for i, n := range s.Next {
		label := "           "
		if i == 0 {
			label = "next       "
		}
		lines = append(lines, "  "+st.dim.Render(label)+" "+st.key.Render(frontend.Sanitize(n)))
	}
	return section{lines: lines, min: 1, fixed: len(lines) <= 6}
}

func (d *Dashboard) logSection() section {
	st := d.st
	n := max(3, d.height/3)
	lines := []string{st.section.Render("Log") + st.dim.Render("  (l hides)")}
	from := max(0, len(d.log)-n)
	for _, l := range d.log[from:] {
		lines = append(lines, st.dim.Render(l))
	}
	if len(d.log) == 0 {
		lines = append(lines, st.dim.Render("  no events yet"))
	}
	return section{lines: lines, min: 4, prio: prioLog}
}

func (d *Dashboard) footer() []string {
	st := d.st
	if d.finished {
		return nil
	}
	if d.cancelling {
		return []string{st.warn.Render("cancelling: waiting for the current remote step to stop — nothing is left half-written")}
	}
	keys := []string{st.key.Render("q") + " cancel", st.key.Render("l") + " log", st.key.Render("?") + " help"}
	if d.showHelp {
		keys[2] = st.key.Render("?") + " close help"
	}
	return []string{st.dim.Render(strings.Join(keys, st.dim.Render(" · ")))}
}

func (d *Dashboard) help() section {
	st := d.st
	w := max(30, d.width-14)
	var lines []string
	key := func(k, what string) {
		for i, part := range wrapWords(what, w) {
			label := "        "
			if i == 0 {
				label = fmt.Sprintf("%-8s", k)
			}
			lines = append(lines, "  "+st.key.Render(label)+"  "+part)
		}
	}
	text := func(s string) {
		for _, part := range wrapWords(s, d.width-2) {
			lines = append(lines, "  "+part)
		}
	}
	lines = append(lines, st.section.Render("Keys"))
	key("q ctrl+c", "cancel the run: the remote step that runs is stopped (SIGTERM) or finishes; uploads land in temporary files, so nothing is left half-written. Re-run to resume.")
	key("l", "show or hide the log pane (the plain event lines; --verbose adds remote commands)")
	key("?", "show or hide this help")
	lines = append(lines, "", st.section.Render("Symbols"),
		"  "+d.spin.View()+" working   "+st.ok.Render("✓")+" done   "+st.fail.Render("✗")+" failed   · waiting   – skipped",
		"  "+st.fail.Render("ERROR")+" stops the run   "+st.warn.Render("WARN")+" worth a look   "+st.ignored.Render("IGNORED")+" error made a warning")
	text("server* is the first server: it initialises the cluster; its bring-up is timed below the hosts.")
	lines = append(lines, "")
	text("Headless runs: --output plain (one line per event) or --output json (schema: events/schema.json).")
	return section{lines: lines, fixed: true}
}

// compact is the frame below MinWidth×MinHeight: one line per host and the verdict.
func (d *Dashboard) compact() string {
	var out []string
	out = append(out, d.header().lines...)
	for _, r := range d.hosts {
		out = append(out, fmt.Sprintf("%s %s %s %s", d.hostIcon(r), r.Name, string(r.phase), r.message))
	}
	if s := d.summarySection(); len(s.lines) > 0 {
		out = append(out, s.lines[0])
	}
	if f := d.footer(); len(f) > 0 {
		out = append(out, f...)
	}
	h := max(1, d.height-1)
	if len(out) > h {
		out = append(out[:1], out[len(out)-h+1:]...)
	}
	for i, l := range out {
		out[i] = ansi.Truncate(l, max(10, d.width), "…")
	}
	return strings.Join(out, "\n")
}
