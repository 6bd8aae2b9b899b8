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
	for _, e := range f.Evidence {
		l := prefix + "    evidence: " + e.Text
		if e.Source != "" {
			l += "   [" + e.Source + "]"
		}
		lines = append(lines, l)
	}
	for _, fx := range f.Fixes {
		lines = append(lines, prefix+"    fix: "+fx)
	}
	for _, c := range f.Commands {
		lines = append(lines, prefix+"    $ "+c)
	}
	if f.Repairable {
		lines = append(lines, prefix+"    (k3strap doctor --fix repairs this)")
	}
	return lines
}
