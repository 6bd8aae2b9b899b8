// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// DoctorLines renders one `k3strap doctor` finding as plain lines, each starting with prefix:
// `[ERROR F1-cloud-controller] cp1: title`, the message, the evidence with its source, the
// fixes and the repair commands.
func DoctorLines(prefix string, f events.DoctorFinding) []string {
	node := ""
	if f.Node != "" {
		node = f.Node + ": "
	}
	lines := []string{prefix + fmt.Sprintf("[%s %s] %s%s", strings.ToUpper(f.Severity), f.ID, node, f.Title)}
	if f.Message != "" {
		lines = append(lines, prefix+"    "+f.Message)
	}
	lines = append(lines, evidenceLines(prefix, f.Evidence)...)
	for _, fx := range f.Fixes {
		lines = append(lines, prefix+"    fix: "+fx)
	}
	lines = append(lines, commandLines(prefix, f.Commands)...)
	if f.Repairable {
		lines = append(lines, prefix+"    (k3strap doctor --fix repairs this)")
	}
	return lines
}

// evidenceLines renders a finding's evidence, each line with its source.
func evidenceLines(prefix string, ev []events.EvidenceLine) []string {
	var out []string
	for _, e := range ev {
		l := prefix + "    evidence: " + e.Text
		if e.Source != "" {
			l += "   [" + e.Source + "]"
		}
		out = append(out, l)
	}
	return out
}

// commandLines renders the commands that fix a finding by hand.
func commandLines(prefix string, cmds []string) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, prefix+"    $ "+c)
	}
	return out
}
