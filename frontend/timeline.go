// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
)

// A run's timeline (`k3strap timeline`, docs/output.md "A picture of a run"): one self-contained
// HTML page holding an inline SVG chart — a row per host (per site in a fleet run, with the
// fleet's waves on top) whose bars are the stages the host went through (connect, facts,
// upload, configure, install, start, join, ...), its bring-up milestones and Ready as markers,
// failures in red, a time axis, and a hover title on every bar and marker — and, below, the
// same as a table. No script, no network: the page opens offline and prints.

// ReadEvents reads the JSON lines of a run (`--output json`, schema events/schema.json) from r;
// name is the file's name for errors. Blank lines are skipped. A line that is not a k3strap
// event is an error naming name and the line number (never the line's text); an empty stream
// is one too.
func ReadEvents(r io.Reader, name string) ([]events.Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []events.Event
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Type == "" || e.Time.IsZero() {
			return nil, fmt.Errorf("%s:%d: not a k3strap JSON event; timeline reads what `--output json` prints (--log-file holds plain lines): run the command with -o json > events.jsonl", name, n)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no events; timeline reads what `--output json` prints: run the command with -o json > events.jsonl", name)
	}
	return out, nil
}

// Stage is the label of a host's bar for a phase: the apply stages a reader knows (connect,
// facts, upload, configure, install, start, join) and the phase's own name otherwise; "" for
// phases that are no stage of their own (--verbose's remote commands, dry-run diffs).
func Stage(p events.Phase) string {
	switch p {
	case events.PhaseUpload, events.PhaseStage:
		return "upload"
	case events.PhaseFirstServer, events.PhaseSupervise, events.PhaseBringUp:
		return "start"
	case events.PhaseJoinServers, events.PhaseJoinAgents:
		return "join"
	case events.PhaseSSH, events.PhaseDryRun, "":
		return ""
	}
	return string(p)
}

// tlBar is one bar or marker of the chart, positions in SVG user units.
type tlBar struct {
	Label, Title, Class string
	X, W, Y             float64
	Failed              bool
}

// tlRow is one row of the chart: a host, a site's cluster-wide phases, or the fleet's waves.
type tlRow struct {
	Label, Title string
	Y            float64
	Bars, Marks  []tlBar
	Heading      bool // a site's heading row
	// H is the row's height: taller when its milestone labels need more lanes.
	H          float64
	site, host string
	items      map[string]*tlItem
	order      []string
	marks      []tlItem
}

// tlItem is a bar (start to end) or a mark (At only) before layout.
type tlItem struct {
	Label, Detail string
	Start, End    time.Time
	Failed        bool
	Mark          bool
}

// tlTick is a time-axis tick.
type tlTick struct {
	X     float64
	Label string
}

// tlRowData is a table row below the chart.
type tlRowData struct {
	Row, What, Start, Took, Detail string
	Failed                         bool
}

type timelinePage struct {
	Title, Subtitle    string
	Width, Height      float64
	PlotX, PlotW       float64
	AxisY              float64
	Rows               []*tlRow
	Ticks              []tlTick
	Legend             []tlBar
	Table              []tlRowData
	StartTime, EndTime string
}

const (
	tlLabelW = 230.0
	tlPlotW  = 960.0
	tlRowH   = 30.0
	tlTop    = 40.0
	tlLaneH  = 12.0
	tlCharW  = 6.0 // width of a character of a milestone label, about, at 10px
)

// Timeline writes the HTML page of evs (a run's events in emitted order) to w. Errors are w's.
func Timeline(w io.Writer, evs []events.Event) error {
	page := buildTimeline(evs)
	return timelineTemplate.Execute(w, page)
}

func buildTimeline(evs []events.Event) timelinePage {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
	t0, t1 := evs[0].Time, evs[len(evs)-1].Time
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	var rows []*tlRow
	byKey := map[string]*tlRow{}
	row := func(key, label, title string) *tlRow {
		if r, ok := byKey[key]; ok {
			return r
		}
		site, host, _ := strings.Cut(key, "\x00")
		if strings.HasPrefix(key, "\x01") {
			site, host = "", "" // the fleet's and the cluster's rows (key "\x01name")
		}
		r := &tlRow{Label: label, Title: title, items: map[string]*tlItem{}, site: site, host: host}
		byKey[key] = r
		rows = append(rows, r)
		return r
	}
	span := func(r *tlRow, label string, e events.Event) *tlItem {
		it, ok := r.items[label]
		if !ok {
			it = &tlItem{Label: label, Start: e.Time, End: e.Time}
			r.items[label] = it
			r.order = append(r.order, label)
		}
		if e.Time.Before(it.Start) {
			it.Start = e.Time
		}
		if e.Time.After(it.End) {
			it.End = e.Time
		}
		if e.Status == events.StatusFailed || e.Type == events.Error {
			it.Failed = true
		}
		return it
	}
	command := ""
	var summary *events.SummaryInfo
	fleet := false
	siteWave := map[string]int{}
	for _, e := range evs {
		if e.Type == events.WaveType || e.Type == events.SiteResultType || (e.Summary != nil && len(e.Summary.Sites) > 0) {
			fleet = true
		}
		if e.SiteResult != nil && e.SiteResult.Wave > 0 {
			siteWave[e.SiteResult.Site] = e.SiteResult.Wave
		}
		if e.Wave != nil {
			for _, s := range e.Wave.Sites {
				siteWave[s] = e.Wave.Number
			}
		}
	}
	if fleet {
		row("\x01fleet", "fleet waves", "the fleet's waves")
	}
	for _, e := range evs {
		if e.Type == events.Debug {
			continue
		}
		switch {
		case e.Type == events.Summary:
			if e.Summary != nil {
				summary, command = e.Summary, e.Summary.Command
			}
			continue
		case e.Type == events.WaveType && e.Wave != nil:
			r := row("\x01fleet", "fleet waves", "the fleet's waves")
			it := span(r, fmt.Sprintf("wave %d", e.Wave.Number), e)
			if e.Wave.Canary || strings.HasPrefix(it.Detail, "canary") {
				it.Detail = "canary: " + strings.Join(e.Wave.Sites, ", ")
			} else {
				it.Detail = strings.Join(e.Wave.Sites, ", ")
			}
			continue
		case e.Type == events.SiteResultType && e.SiteResult != nil:
			r := siteRow(row, e.SiteResult.Site, siteWave)
			if it, ok := r.items["site"]; ok || e.SiteResult.Seconds > 0 {
				if !ok {
					it = &tlItem{Label: "site", Start: e.Time.Add(-time.Duration(e.SiteResult.Seconds * float64(time.Second))), End: e.Time}
					r.items["site"] = it
					r.order = append(r.order, "site")
				}
				it.Detail = strings.TrimSuffix(string(e.SiteResult.Status)+": "+Sanitize(e.SiteResult.Message), ": ")
				it.Failed = e.SiteResult.Status == events.SiteFailed || e.SiteResult.Status == events.SiteCancelled
			}
			continue
		}
		var r *tlRow
		if e.Host == "" {
			if e.Site == "" && fleet {
				r = row("\x01fleet", "fleet waves", "the fleet's waves")
			} else if e.Site != "" {
				r = siteRow(row, e.Site, siteWave)
			} else {
				r = row("\x01cluster", "cluster", "cluster-wide steps")
			}
		} else {
			if e.Site != "" {
				siteRow(row, e.Site, siteWave)
			}
			label := e.Host
			if e.Site != "" {
				label = e.Site + "/" + e.Host
			}
			r = row(e.Site+"\x00"+e.Host, label, "host "+label)
		}
		switch {
		case e.Type == events.Milestone && e.Milestone != nil:
			if e.Milestone.Skipped {
				continue
			}
			r.marks = append(r.marks, tlItem{Label: e.Milestone.Name, Start: e.Time, Mark: true,
				Detail: fmt.Sprintf("+%.1fs after the start%s", e.Milestone.Seconds, suffix(Sanitize(e.Milestone.Detail)))})
			if e.Milestone.Name == "node-ready" {
				r.marks = append(r.marks, tlItem{Label: "Ready", Start: e.Time, Mark: true, Detail: "node Ready"})
			}
		case e.Type == events.Error:
			msg := e.Message
			if e.Error != nil {
				msg = e.Error.Message
			}
			r.marks = append(r.marks, tlItem{Label: "failed", Start: e.Time, Mark: true, Failed: true, Detail: Sanitize(msg)})
		case e.Type == events.HostStep && e.Step == "node" && strings.HasPrefix(e.Message, "node Ready"):
			r.marks = append(r.marks, tlItem{Label: "Ready", Start: e.Time, Mark: true, Detail: Sanitize(e.Message)})
		}
		if st := Stage(e.Phase); st != "" && !(e.Host == "" && e.Phase == events.CommandPhase(command)) {
			it := span(r, st, e)
			if e.Status == events.StatusFailed && it.Detail == "" {
				it.Detail = Sanitize(e.Message)
			}
		}
	}
	total := t1.Sub(t0)
	x := func(t time.Time) float64 {
		return tlLabelW + float64(t.Sub(t0))/float64(total)*tlPlotW
	}
	page := timelinePage{Title: "k3strap run", PlotX: tlLabelW, PlotW: tlPlotW, Width: tlLabelW + tlPlotW + 40, AxisY: tlTop - 12,
		StartTime: t0.Format(time.DateTime + " MST"), EndTime: t1.Format(time.TimeOnly)}
	if command != "" {
		page.Title = "k3strap " + command
	}
	page.Subtitle = fmt.Sprintf("%s – %s (%s)", page.StartTime, page.EndTime, total.Round(100*time.Millisecond))
	if summary != nil {
		verdict := "succeeded"
		if !summary.OK {
			verdict = fmt.Sprintf("FAILED (exit %d)", summary.ExitCode)
		}
		page.Subtitle += " — " + verdict
	}
	// Rows grouped by site in order of appearance, each group's own rows first, then its hosts
	// in the summary's (the inventory's) order.
	rank, siteAt := map[string]int{}, map[string]int{}
	if summary != nil {
		for i, h := range summary.Hosts {
			rank[h.Host] = i + 1
		}
	}
	for i, r := range rows {
		if _, ok := siteAt[r.site]; !ok {
			siteAt[r.site] = i
		}
	}
	key := func(r *tlRow) [3]int {
		if r.host == "" {
			return [3]int{siteAt[r.site], 0, 0}
		}
		return [3]int{siteAt[r.site], 1, rank[r.host]}
	}
	slices.SortStableFunc(rows, func(a, b *tlRow) int {
		ka, kb := key(a), key(b)
		for i := range ka {
			if ka[i] != kb[i] {
				return ka[i] - kb[i]
			}
		}
		return 0
	})
	y := tlTop
	for _, r := range rows {
		r.Y = y
		lanes := markLanes(r.marks, x)
		r.H = tlRowH + float64(max(0, slices.Max(append(lanes, 0))-1))*tlLaneH
		y += r.H
		for _, l := range r.order {
			it := r.items[l]
			w := math.Max(x(it.End)-x(it.Start), 3)
			took := it.End.Sub(it.Start).Round(100 * time.Millisecond)
			title := fmt.Sprintf("%s %s: +%s, took %s", r.Label, it.Label, offset(it.Start, t0), took)
			if it.Detail != "" {
				title += " — " + it.Detail
			}
			if it.Failed {
				title += " (failed)"
			}
			r.Bars = append(r.Bars, tlBar{Label: it.Label, Title: title, Class: stageClass(it.Label), X: x(it.Start), W: w, Y: r.Y + 6, Failed: it.Failed})
			page.Table = append(page.Table, tlRowData{Row: r.Label, What: it.Label, Start: "+" + offset(it.Start, t0), Took: took.String(), Detail: it.Detail, Failed: it.Failed})
		}
		for i, m := range r.marks {
			title := fmt.Sprintf("%s %s at +%s", r.Label, m.Label, offset(m.Start, t0))
			if m.Detail != "" {
				title += " — " + strings.TrimSpace(m.Detail)
			}
			// Labels alternate above and below the row's middle so that close milestones stay legible.
			r.Marks = append(r.Marks, tlBar{Label: m.Label, Title: title, X: x(m.Start), Y: r.Y + 2 + float64(lanes[i])*tlLaneH, Failed: m.Failed})
			page.Table = append(page.Table, tlRowData{Row: r.Label, What: m.Label, Start: "+" + offset(m.Start, t0), Detail: strings.TrimSpace(m.Detail), Failed: m.Failed})
		}
	}
	page.Rows = rows
	page.Height = y + 20
	step := tickStep(total)
	for t := time.Duration(0); t <= total; t += step {
		page.Ticks = append(page.Ticks, tlTick{X: tlLabelW + float64(t)/float64(total)*tlPlotW, Label: "+" + fmtDur(t)})
	}
	for _, s := range []string{"connect", "facts", "upload", "configure", "install", "start", "join"} {
		page.Legend = append(page.Legend, tlBar{Label: s, Class: stageClass(s)})
	}
	return page
}

// markLanes puts each mark's label in the first lane (0, 1, ...) where it does not overlap
// the previous label, so that milestones seconds apart stay legible.
func markLanes(marks []tlItem, x func(time.Time) float64) []int {
	lanes := make([]int, len(marks))
	var ends []float64 // per lane, where its last label ends
	for i, m := range marks {
		start := x(m.Start) - 6
		lane := 0
		for lane < len(ends) && ends[lane] > start {
			lane++
		}
		end := x(m.Start) + 8 + float64(len(m.Label))*tlCharW
		if lane == len(ends) {
			ends = append(ends, end)
		} else {
			ends[lane] = end
		}
		lanes[i] = lane + 1
	}
	for i := range lanes {
		lanes[i]-- // 0-based
	}
	return lanes
}

// siteRow returns a fleet site's row (its cluster-wide phases and its result), labelled with
// its wave.
func siteRow(row func(key, label, title string) *tlRow, site string, wave map[string]int) *tlRow {
	label := "site " + site
	if n := wave[site]; n > 0 {
		label = fmt.Sprintf("wave %d · site %s", n, site)
	}
	r := row(site+"\x00", label, "site "+site+": cluster-wide steps and result")
	r.Heading = true
	return r
}

func offset(t, t0 time.Time) string { return fmtDur(t.Sub(t0)) }

// fmtDur formats d as 1m05s, 12.3s or 0s.
func fmtDur(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// tickStep picks the axis step giving at most 12 ticks.
func tickStep(total time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if total/s <= 12 {
			return s
		}
	}
	return time.Hour * (total/time.Hour/12 + 1)
}

// stageClass is the CSS class colouring a stage's bars.
func stageClass(stage string) string {
	switch stage {
	case "connect", "facts", "upload", "configure", "install", "start", "join", "preflight", "plan", "site":
		return "s-" + stage
	}
	if strings.HasPrefix(stage, "wave") {
		return "s-wave"
	}
	return "s-other"
}

var timelineTemplate = template.Must(template.New("timeline").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}} timeline</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px} p.sub{margin:0 0 12px;color:#555}
svg text{font-size:12px;fill:#222} svg .axis{fill:#666;font-size:11px} svg .grid{stroke:#ddd}
svg .rowlabel{font-weight:600} svg .heading{fill:#f3f3f3} svg .mark{font-size:10px}
.s-connect{fill:#8ecae6}.s-facts{fill:#219ebc}.s-upload{fill:#ffb703}.s-configure{fill:#b5838d}
.s-install{fill:#fb8500}.s-start{fill:#2a9d8f}.s-join{fill:#6a4c93}.s-preflight{fill:#90be6d}
.s-plan{fill:#cdb4db}.s-site{fill:#a3b18a}.s-wave{fill:#588157}.s-other{fill:#adb5bd}
rect.failed{stroke:#d00000;stroke-width:2.5} .failmark{fill:#d00000} .okmark{fill:#111}
table{border-collapse:collapse;margin-top:16px;font-size:13px} td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
tr.failed td{color:#d00000;font-weight:600}
.legend span{display:inline-block;margin-right:12px} .legend svg{vertical-align:middle}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="sub">{{.Subtitle}}</p>
<p class="legend">{{range .Legend}}<span><svg width="14" height="12"><rect class="{{.Class}}" width="14" height="12"/></svg> {{.Label}}</span>{{end}}
<span><svg width="12" height="12"><path class="okmark" d="M6 0 L12 6 L6 12 L0 6 Z"/></svg> milestone</span>
<span><svg width="12" height="12"><path class="failmark" d="M6 0 L12 6 L6 12 L0 6 Z"/></svg> failure</span></p>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}} timeline">
{{range .Rows}}{{if .Heading}}<rect class="heading" x="0" y="{{.Y}}" width="{{$.Width}}" height="{{.H}}"/>{{end}}{{end}}
{{range .Ticks}}<line class="grid" x1="{{.X}}" x2="{{.X}}" y1="{{$.AxisY}}" y2="{{$.Height}}"/><text class="axis" x="{{.X}}" y="{{$.AxisY}}" text-anchor="middle">{{.Label}}</text>
{{end}}
{{range .Rows}}<g class="row" data-row="{{.Label}}"><title>{{.Title}}</title>
<text class="rowlabel" x="6" y="{{.Y}}" dy="19">{{.Label}}</text>
{{range .Bars}}<g class="bar" data-stage="{{.Label}}"><title>{{.Title}}</title><rect class="{{.Class}}{{if .Failed}} failed{{end}}" x="{{printf "%.1f" .X}}" y="{{.Y}}" width="{{printf "%.1f" .W}}" height="18" rx="2"/></g>
{{end}}{{range .Marks}}<g class="milestone" data-milestone="{{.Label}}"><title>{{.Title}}</title><path class="{{if .Failed}}failmark{{else}}okmark{{end}}" d="M{{printf "%.1f" .X}} {{.Y}} l5 5 l-5 5 l-5 -5 Z"/><text class="mark{{if .Failed}} failmark{{end}}" x="{{printf "%.1f" .X}}" y="{{.Y}}" dx="7" dy="9">{{.Label}}</text></g>
{{end}}</g>
{{end}}</svg>
<table><thead><tr><th>row</th><th>what</th><th>start</th><th>took</th><th>detail</th></tr></thead><tbody>
{{range .Table}}<tr{{if .Failed}} class="failed"{{end}}><td>{{.Row}}</td><td>{{.What}}</td><td>{{.Start}}</td><td>{{.Took}}</td><td>{{.Detail}}{{if .Failed}} (failed){{end}}</td></tr>
{{end}}</tbody></table>
</body></html>
`))
