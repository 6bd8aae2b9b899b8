// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/k3strap/k3strap/events"
)

// A host name and messages with escape sequences and C0/C1 controls reach the dashboard's
// frame without them: the frame holds only the dashboard's own styling (SGR sequences).
func TestDashboardHostNameSanitized(t *testing.T) {
	evil := "cp1\x1b]0;pwned\x07\u009b2J\x1b[2J\r"
	r := &recorder{}
	em := r.em(events.PhaseConnect)
	em.Started("connecting")
	em.Warn(evil, "remote says \u009b31mred\x1b]8;;http://x\x1b\\link")
	em.Step(evil, "connect", events.StatusFailed, "dial \x1b[2Jfailed\u0085")
	d := NewDashboard(dashOpts(t0, nil), nil, nil)
	d.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	d.Update(EventMsg(r.rec.Events()))
	raw := d.Render()
	for _, bad := range []string{"\x1b]", "\x07", "\x1b[2J", "\r"} {
		if strings.Contains(raw, bad) {
			t.Errorf("frame holds %q", bad)
		}
	}
	for _, c := range raw {
		if c >= 0x80 && c <= 0x9f {
			t.Errorf("frame holds C1 control %U", c)
		}
	}
	if !strings.Contains(frame(d), "cp1") {
		t.Errorf("the host's printable name is gone:\n%s", frame(d))
	}
}
