// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package frontend renders installer events for people and programs: plain log lines
// (`HH:MM:SS host phase message`, stable for grepping) and JSON lines (one object per event,
// schema in events/schema.json). The terminal UI lives in frontend/tui. Front-ends only consume
// events; they never reach into the installer.
package frontend

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// Plain writes one line per event: `HH:MM:SS host phase message` ("-" for cluster-wide
// events). Preflight findings use kubeadm's `[ERROR Check]` / `[WARNING Check]` form with the
// fix on an indented line; errors are followed by their evidence, fixes and how to resume.
type Plain struct {
	W io.Writer
	// Verbose adds debug events (remote command lines, secrets masked).
	Verbose bool
	// Quiet keeps only warnings, errors, findings and the summary.
	Quiet bool
	// Terminal says W is a terminal a person reads: the summary then shows a Rancher bootstrap
	// password generated in this run, once (RancherPasswordLines); otherwise it names the file.
	Terminal bool

	mu sync.Mutex
	// uploads tracks each running upload (key: site, host and file) for its progress lines;
	// hostLine is when a progress line was last printed per site and host.
	uploads  map[string]*uploadTrack
	hostLine map[string]time.Time
}

// Emit writes e.
func (p *Plain) Emit(e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !Keep(e, p.Verbose, p.Quiet) {
		return
	}
	lines := PlainLines(e)
	if e.Type == events.UploadProgress && e.Upload != nil && len(lines) > 0 {
		show, tail := p.uploadLine(e)
		if !show && !p.Verbose {
			return
		}
		lines[0] += tail
	}
	for _, l := range lines {
		fmt.Fprintln(p.W, l)
	}
	if e.Type == events.Summary {
		for _, l := range RancherPasswordLines(e.Summary, p.Terminal) {
			fmt.Fprintf(p.W, "%s - %s     %s\n", e.Time.Format(time.TimeOnly), e.Phase, l)
		}
	}
}

// Keep reports whether a front-end with these settings shows e: debug events only when
// verbose; with quiet only warnings, errors, preflight findings and the summary.
func Keep(e events.Event, verbose, quiet bool) bool {
	if e.Type == events.Debug && !verbose {
		return false
	}
	if quiet {
		switch e.Type {
		case events.Warning, events.Error, events.Finding, events.DoctorFindingType, events.Summary, events.WaveType, events.SiteResultType:
		default:
			return false
		}
	}
	return true
}

// PlainLines renders e as the lines Plain writes. Every line starts with the
// `HH:MM:SS host phase ` prefix (a message spanning lines is split, each part prefixed), terminal
// control sequences from remote output are removed, and secret-looking values are masked
// (k3s.Mask) as a second line of defence: events carry no secrets.
func PlainLines(e events.Event) []string {
	var out []string
	for _, l := range plainLines(e) {
		prefix, rest := splitPrefix(l, e)
		// A step's "STEP: STATUS" is k3strap's own label, not text from a host: masked with the
		// message, a step named like a secret key ("token") would read as `token: <secret>`
		// and hide the whole line. The message is masked on its own, as the TUI does.
		label := ""
		if l := e.Step + ": " + string(e.Status); e.Type == events.HostStep && strings.HasPrefix(rest, l) {
			label, rest = StripControl(l), rest[len(l):]
		}
		for i, part := range strings.Split(label+Sanitize(rest), "\n") {
			if i > 0 {
				part = "    " + part
			}
			out = append(out, prefix+part)
		}
	}
	return out
}

// Prefix returns the `HH:MM:SS host phase ` prefix of e's plain lines ("-" for no host or
// phase). In a fleet run the host column names the site: `site/host`, or `site` for the
// site's cluster-wide events.
func Prefix(e events.Event) string {
	host := e.Host
	switch {
	case e.Site != "" && host != "":
		host = e.Site + "/" + host
	case e.Site != "":
		host = e.Site
	case host == "":
		host = "-"
	}
	phase := e.Phase
	if phase == "" {
		phase = "-"
	}
	// Host and site names come from the inventory: no control character reaches the terminal.
	return fmt.Sprintf("%s %s %s ", e.Time.Format(time.TimeOnly), StripControl(host), StripControl(string(phase)))
}

func splitPrefix(l string, e events.Event) (string, string) {
	p := Prefix(e)
	if strings.HasPrefix(l, p) {
		return p, l[len(p):]
	}
	return "", l
}

// Sanitize makes s safe to show on a terminal (StripControl) and masks secrets (k3s.Mask).
func Sanitize(s string) string {
	return k3s.Mask(StripControl(s))
}

func plainLines(e events.Event) []string {
	prefix := Prefix(e)
	switch e.Type {
	case events.PhaseStarted:
		if e.Message == "" {
			return nil
		}
		return []string{prefix + e.Message}
	case events.PhaseFinished:
		if e.Message == "" {
			return nil
		}
		return []string{prefix + e.Message}
	case events.HostStep:
		return []string{prefix + fmt.Sprintf("%s: %s%s", e.Step, e.Status, suffix(e.Message))}
	case events.UploadProgress:
		u := e.Upload
		if u == nil {
			return []string{prefix + e.Message}
		}
		// No verb: the prefix's phase column already says "upload" (an upload_progress event
		// is emitted in events.PhaseUpload only, installer/converge.go).
		return []string{prefix + fmt.Sprintf("%s %s/%s", u.File, HumanBytes(u.Bytes), HumanBytes(u.Total))}
	case events.Finding:
		f := e.Finding
		if f == nil {
			return []string{prefix + e.Message}
		}
		tag := strings.ToUpper(f.Severity)
		if f.Severity == "ignored" {
			tag = "WARNING"
		}
		lines := []string{prefix + fmt.Sprintf("[%s %s] %s", tag, f.Check, f.Message)}
		if f.Severity == "ignored" {
			lines[0] += " (error ignored by --ignore-preflight-errors)"
		}
		lines = append(lines, evidenceLines(prefix, f.Evidence)...)
		if f.Fix != "" {
			lines = append(lines, prefix+"    fix: "+f.Fix)
		}
		return append(lines, commandLines(prefix, f.Commands)...)
	case events.DoctorFindingType:
		if e.Doctor == nil {
			return []string{prefix + e.Message}
		}
		return DoctorLines(prefix, *e.Doctor)
	case events.Milestone:
		m := e.Milestone
		if m == nil {
			return []string{prefix + e.Message}
		}
		if m.Skipped {
			return []string{prefix + fmt.Sprintf("milestone %s skipped: %s", m.Name, m.Detail)}
		}
		return []string{prefix + fmt.Sprintf("+%.1fs %s%s", m.Seconds, m.Name, suffix(m.Detail))}
	case events.Warning:
		return []string{prefix + "WARNING " + e.Message}
	case events.Error:
		info := e.Error
		if info == nil {
			info = &events.ErrorInfo{Message: e.Message}
		}
		lines := []string{prefix + "ERROR " + info.Message}
		for _, ev := range info.Evidence {
			lines = append(lines, prefix+"    evidence: "+ev)
		}
		for _, fx := range strings.Split(info.Fix, "\n") {
			if fx != "" {
				lines = append(lines, prefix+"    fix: "+fx)
			}
		}
		if info.Resume != "" {
			lines = append(lines, prefix+"    then: "+info.Resume)
		}
		return lines
	case events.WaveType, events.SiteResultType:
		return fleetLines(prefix, e)
	case events.Summary:
		s := e.Summary
		if s == nil {
			return []string{prefix + e.Message}
		}
		if s.Waves > 0 || len(s.Sites) > 0 {
			return fleetSummaryLines(prefix, s)
		}
		verdict := "OK"
		if !s.OK {
			verdict = fmt.Sprintf("FAILED (exit %d)", s.ExitCode)
		}
		lines := []string{prefix + fmt.Sprintf("%s %s in %.1fs", s.Command, verdict, s.Seconds)}
		for _, h := range s.Hosts {
			lines = append(lines, prefix+fmt.Sprintf("    %-12s %-7s %-9s %s", h.Host, h.Role, h.Status, h.Message))
		}
		if s.Kubeconfig != "" {
			lines = append(lines, prefix+"    kubeconfig: "+s.Kubeconfig)
		}
		if s.RancherURL != "" {
			lines = append(lines, prefix+"    rancher: "+s.RancherURL)
		}
		for _, n := range s.Next {
			lines = append(lines, prefix+"    next: "+n)
		}
		return lines
	default:
		lines := []string{prefix + e.Message}
		for _, d := range strings.Split(strings.TrimRight(e.Diff, "\n"), "\n") {
			if d != "" {
				lines = append(lines, prefix+"    | "+d)
			}
		}
		return lines
	}
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// HumanBytes formats n bytes with a binary unit (KiB, MiB, GiB).
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// JSON writes one JSON object per event and line (the schema is events/schema.json, version in
// "v"). Messages and error evidence pass through k3s.Mask.
type JSON struct {
	W io.Writer
	// Verbose adds debug events (remote command lines, secrets masked).
	Verbose bool
	// Quiet keeps only warnings, errors, findings and the summary, as for Plain.
	Quiet bool

	mu sync.Mutex
}

// Emit writes e.
func (j *JSON) Emit(e events.Event) {
	if !Keep(e, j.Verbose, j.Quiet) {
		return
	}
	e.Message = k3s.Mask(e.Message)
	if e.Error != nil {
		info := *e.Error
		info.Message = k3s.Mask(info.Message)
		info.Evidence = append([]string(nil), info.Evidence...)
		for i := range info.Evidence {
			info.Evidence[i] = k3s.Mask(info.Evidence[i])
		}
		e.Error = &info
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.W.Write(append(b, '\n'))
}
