// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// TestRancherPasswordOnlyOnTerminal: the generated bootstrap password is shown once, in the
// summary, only on a terminal and only by the run that wrote it; otherwise the file is named.
func TestRancherPasswordOnlyOnTerminal(t *testing.T) {
	const pw = "Zq8dkK2mWn4pRt6vXy3bCd5f"
	file := filepath.Join(t.TempDir(), "lab.kubeconfig.rancher-bootstrap-password")
	if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(terminal, isNew bool) string {
		var buf bytes.Buffer
		p := &Plain{W: &buf, Terminal: terminal}
		em := events.Emitter{Sink: p, Phase: "apply", Now: func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }}
		em.WithPhase("rancher").Step("cp1", "bootstrap-password", events.StatusChanged, "stored Rancher's bootstrap password in "+file+" (mode 0600)")
		em.Summary(events.SummaryInfo{Command: "apply", OK: true, RancherURL: "https://10.0.0.1.sslip.io", RancherPasswordFile: file, RancherPasswordNew: isNew})
		return buf.String()
	}
	out := run(true, true)
	if strings.Count(out, pw) != 1 {
		t.Fatalf("terminal output shows the password %d times, want once:\n%s", strings.Count(out, pw), out)
	}
	summaryAt := strings.Index(out, "apply OK")
	if summaryAt < 0 || strings.Index(out, pw) < summaryAt {
		t.Errorf("the password is not in the final summary:\n%s", out)
	}
	for _, c := range []struct {
		name            string
		terminal, isNew bool
	}{{"not a terminal", false, true}, {"terminal, password from an earlier run", true, false}} {
		out := run(c.terminal, c.isNew)
		if strings.Contains(out, pw) {
			t.Errorf("%s: the password is shown:\n%s", c.name, out)
		}
		if !strings.Contains(out, "rancher bootstrap password: in "+file+" (mode 0600)") {
			t.Errorf("%s: the file is not named:\n%s", c.name, out)
		}
	}
	if RancherPasswordLines(&events.SummaryInfo{}, true) != nil {
		t.Error("a summary without a password file produced lines")
	}
	// An unreadable file falls back to naming it.
	if l := RancherPasswordLines(&events.SummaryInfo{RancherPasswordFile: file + ".missing", RancherPasswordNew: true}, true); len(l) != 1 || !strings.Contains(l[0], "in "+file+".missing") {
		t.Errorf("missing file: %v", l)
	}
}
