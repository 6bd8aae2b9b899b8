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

	mu sync.Mutex
}

// Emit writes e.
func (p *Plain) Emit(e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Type == events.Debug && !p.Verbose {
		return
	}
	if p.Quiet {
		switch e.Type {
		case events.Warning, events.Error, events.Finding, events.Summary:
		default:
			return
		}
	}
	if e.Type == events.UploadProgress && !(e.Upload.Done || p.Verbose) {
		return
	}
	for _, l := range PlainLines(e) {
		fmt.Fprintln(p.W, l)
	}
}

// PlainLines renders e as the lines Plain writes.
func PlainLines(e events.Event) []string {
	host := e.Host
	if host == "" {
		host = "-"
	}
	phase := e.Phase
	if phase == "" {
		phase = "-"
	}
	prefix := fmt.Sprintf("%s %s %s ", e.Time.Format(time.TimeOnly), host, phase)
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
		return []string{prefix + fmt.Sprintf("upload %s %s/%s", u.File, HumanBytes(u.Bytes), HumanBytes(u.Total))}
	case events.Finding:
		f := e.Finding
		tag := strings.ToUpper(f.Severity)
		if f.Severity == "ignored" {
			tag = "WARNING"
		}
		lines := []string{prefix + fmt.Sprintf("[%s %s] %s", tag, f.Check, f.Message)}
		if f.Severity == "ignored" {
			lines[0] += " (error ignored by --ignore-preflight-errors)"
		}
		if f.Fix != "" {
			lines = append(lines, prefix+"    fix: "+f.Fix)
		}
		return lines
	case events.Milestone:
		m := e.Milestone
		if m.Skipped {
			return []string{prefix + fmt.Sprintf("milestone %s skipped: %s", m.Name, m.Detail)}
		}
		return []string{prefix + fmt.Sprintf("+%.1fs %s%s", m.Seconds, m.Name, suffix(m.Detail))}
	case events.Warning:
		return []string{prefix + "WARNING " + e.Message}
	case events.Error:
		info := e.Error
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
	case events.Summary:
		s := e.Summary
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
		return []string{prefix + e.Message}
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

// JSON writes one JSON object per event and line (the schema is events/schema.json).
type JSON struct {
	W       io.Writer
	Verbose bool

	mu sync.Mutex
}

// Emit writes e.
func (j *JSON) Emit(e events.Event) {
	if e.Type == events.Debug && !j.Verbose {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.W.Write(append(b, '\n'))
}
