// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/k3strap/k3strap/inventory"
)

// Rendering the wizard's screens.

// View renders the current screen.
func (w *Wizard) View() tea.View {
	v := tea.NewView(w.Render())
	v.AltScreen = true
	return v
}

// Render returns the current screen as text (with styles).
func (w *Wizard) Render() string {
	st := w.st
	width := max(40, w.width)
	lines := []string{st.title.Render("k3strap init") + st.dim.Render(" · ") + st.bold.Render(screenTitles[w.screen]), ""}
	var keys string
	switch w.screen {
	case scCluster:
		lines = append(lines, "Let's describe your cluster. Every answer can be changed later in the file.", "")
		lines = append(lines, w.cluster.view(st, width)...)
		keys = "enter next · tab/↑/↓ move · ctrl+c quit"
	case scHosts:
		lines = append(lines, w.hostsView(width)...)
		keys = "a add · e edit · d delete · t test SSH · T test all · n next · esc back"
		if w.deleting {
			keys = st.warn.Render(fmt.Sprintf("delete %s? y to confirm, any other key keeps it", w.hosts[w.selected].Name))
		}
	case scHost:
		verb := "Add a host"
		if w.editing >= 0 {
			verb = "Edit " + w.hosts[w.editing].Name
		}
		lines = append(lines, verb, "")
		lines = append(lines, w.host.view(st, width)...)
		keys = "enter next (on the last field: save) · tab/↑/↓ move · esc cancel"
	case scK3s:
		lines = append(lines, w.k3s.view(st, width)...)
		keys = "enter next · ←/→ choose · esc back"
	case scNetwork:
		lines = append(lines, w.net.view(st, width)...)
		keys = "enter next · ←/→ choose · esc back"
	case scReview:
		lines = append(lines, w.reviewView(width)...)
		keys = "w write the file · ↑/↓/space scroll · esc back"
	case scDone:
		lines = append(lines, w.doneView()...)
		keys = "p preflight · a apply · q quit"
		if len(w.result.Problems) > 0 {
			keys = "q quit"
		}
	}
	foot := []string{}
	if w.message != "" {
		foot = append(foot, st.warn.Render(w.message))
	}
	foot = append(foot, st.dim.Render(keys))
	room := max(1, w.height-1-len(foot))
	if len(lines) > room {
		lines = lines[:room]
	}
	for len(lines) < room {
		lines = append(lines, "")
	}
	lines = append(lines, foot...)
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, width, "…")
	}
	return strings.Join(lines, "\n")
}

func (w *Wizard) hostsView(width int) []string {
	st := w.st
	if len(w.hosts) == 0 {
		return []string{"No hosts yet. Press " + st.key.Render("a") + " to add the first one: it becomes the first server,",
			"which initialises the cluster. Add more servers for high availability (3 or 5), agents for workloads."}
	}
	nameW, addrW := 4, 7
	for _, h := range w.hosts {
		nameW, addrW = max(nameW, len(h.Name)), max(addrW, len(h.Address))
	}
	nameW, addrW = min(nameW, 16), min(addrW, 24)
	head := fmt.Sprintf("  %-*s  %-*s  %-7s  %-18s  %s", nameW, "NAME", addrW, "ADDRESS", "ROLE", "SSH", "CONNECTION TEST")
	lines := []string{st.dim.Render(head)}
	c := w.build()
	firstServer := true
	for i, h := range w.hosts {
		mark := "  "
		if i == w.selected {
			mark = st.accent.Render("› ")
		}
		sc := c.HostSSH(&c.Spec.Hosts[i])
		role := string(h.Role)
		if h.Role == inventory.RoleServer && firstServer {
			role += "*"
			firstServer = false
		}
		ssh := fmt.Sprintf("%s:%d", sc.User, sc.Port)
		var test string
		switch t, ok := w.tests[h.Name]; {
		case !ok:
			test = st.dim.Render("not tested (t)")
		case t.running:
			test = w.spin.View() + " connecting…"
		case t.res.OK:
			test = st.ok.Render("✓ ") + t.res.Detail + st.dim.Render(fmt.Sprintf(" (%.1fs)", t.res.Seconds))
		default:
			test = st.fail.Render("✗ ") + t.res.Detail
		}
		l := fmt.Sprintf("%s%-*s  %-*s  %-7s  %-18s  %s", mark, nameW, ansi.Truncate(h.Name, nameW, "…"), addrW, ansi.Truncate(h.Address, addrW, "…"), role, ansi.Truncate(ssh, 18, "…"), test)
		if i == w.selected {
			l = st.bold.Render(ansi.Strip(l[:0])) + l
		}
		lines = append(lines, l)
		if t, ok := w.tests[h.Name]; ok && t.res.HostKey != "" && !t.running {
			lines = append(lines, "    "+st.dim.Render(t.res.HostKey))
		}
		if len(h.Taints) > 0 {
			var ts []string
			for _, t := range h.Taints {
				ts = append(ts, t.String())
			}
			lines = append(lines, "    "+st.dim.Render("taints: "+strings.Join(ts, ", ")))
		}
	}
	lines = append(lines, "", st.dim.Render("* the first server initialises the cluster"))
	return lines
}

func (w *Wizard) reviewView(width int) []string {
	st := w.st
	var lines []string
	if len(w.problems) > 0 {
		lines = append(lines, st.fail.Render(fmt.Sprintf("✗ %d %s to fix (esc goes back; w writes it anyway):", len(w.problems), plural(len(w.problems), "problem", "problems"))))
		for i, p := range w.problems {
			if i == 4 {
				break
			}
			lines = append(lines, "  "+st.warn.Render(firstLineOf(p)))
		}
	} else {
		lines = append(lines, st.ok.Render("✓ valid")+st.dim.Render(" — this is the file that will be written to "+w.absPath()))
	}
	h := w.reviewHeight()
	end := min(len(w.yaml), w.scroll+h)
	for _, l := range w.yaml[w.scroll:end] {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			l = st.dim.Render(l)
		}
		lines = append(lines, "  "+l)
	}
	if end < len(w.yaml) {
		lines = append(lines, st.dim.Render(fmt.Sprintf("  … %d more lines (↓)", len(w.yaml)-end)))
	}
	return lines
}

func firstLineOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func (w *Wizard) doneView() []string {
	st := w.st
	r := w.result
	rel := w.cluster.value("path")
	lines := []string{st.ok.Render("✓ wrote ") + st.bold.Render(r.Path), "  Keep it in git: it holds no secrets.", ""}
	if len(r.Problems) > 0 {
		lines = append(lines, st.warn.Render(fmt.Sprintf("It has %d %s; fix them in the file, then check it with:", len(r.Problems), plural(len(r.Problems), "problem", "problems"))),
			"  "+st.key.Render("k3strap validate -f "+rel))
		return lines
	}
	return append(lines,
		"What now?",
		"  "+st.key.Render("p")+"  run preflight: connect to every host and check it, changing nothing",
		"  "+st.key.Render("a")+"  run apply: install K3s on every host and watch the first server come up",
		"  "+st.key.Render("q")+"  quit; later run "+st.key.Render("k3strap preflight -f "+rel)+" and "+st.key.Render("k3strap apply -f "+rel),
	)
}

// reviewHeight is the number of YAML lines the review screen shows.
func (w *Wizard) reviewHeight() int {
	n := w.height - 6 - min(len(w.problems), 4)
	if len(w.problems) > 0 {
		n--
	}
	return max(3, n)
}
