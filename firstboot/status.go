// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Where a technician looks (docs/edge-first-boot.md "Where a box says how it is"). The journal
// and the console get every line of the run (the unit's StandardOutput=journal+console).
const (
	// StatusName is the status file in the box directory: the human-readable one; StatusJSON
	// the same as JSON for scripts.
	StatusName = "status"
	StatusJSON = "status.json"
	// MotdPath is the line shown at login (pam_motd reads /run/motd.d); IssuePath the line
	// shown on the console above the login prompt (agetty reads /run/issue.d). Both are in
	// /run: every boot writes them afresh.
	MotdPath  = "/run/motd.d/50-k3strap"
	IssuePath = "/run/issue.d/50-k3strap.issue"
)

// States of a box.
const (
	StateRunning   = "running"
	StateWaiting   = "waiting" // for the cluster's API
	StateConverged = "converged"
	StateFailed    = "failed"
)

// Status is what the box says about its last (or current) run.
type Status struct {
	Cluster string `json:"cluster"`
	Host    string `json:"host"`
	// State is running, waiting, converged or failed.
	State string `json:"state"`
	// Step is the step that failed (or runs); Message what happened; Fix what to do.
	Step    string `json:"step,omitempty"`
	Message string `json:"message,omitempty"`
	Fix     string `json:"fix,omitempty"`
	// ExitCode and ExitMeaning are the run's exit code and its meaning (the README's table).
	ExitCode    int    `json:"exitCode"`
	ExitMeaning string `json:"exitMeaning,omitempty"`
	// Changed says whether the run changed anything on the box (false: nothing to do).
	Changed bool `json:"changed"`
	// Started and Updated are when the run started and when the status was written.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// Line is the one-line form for the console and the login banner.
func (s Status) Line() string {
	switch s.State {
	case StateConverged:
		what := "nothing changed"
		if s.Changed {
			what = "changes applied"
		}
		return fmt.Sprintf("k3strap: %s (%s) converged at %s: %s", s.Host, s.Cluster, s.Updated.Format(time.RFC3339), what)
	case StateFailed:
		l := fmt.Sprintf("k3strap: %s FAILED at step %s (exit %d, %s): %s", s.Host, s.Step, s.ExitCode, s.ExitMeaning, s.Message)
		if s.Fix != "" {
			l += " — fix: " + s.Fix
		}
		return l + " — details: " + filepath.Join(BoxDir, StatusName)
	default:
		l := fmt.Sprintf("k3strap: %s %s since %s", s.Host, s.State, s.Started.Format(time.RFC3339))
		if s.Message != "" {
			l += ": " + s.Message
		}
		return l
	}
}

// Text is the status file's content.
func (s Status) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "k3strap first boot: host %s of cluster %s\n", s.Host, s.Cluster)
	fmt.Fprintf(&b, "state:   %s\n", s.State)
	if s.Step != "" {
		fmt.Fprintf(&b, "step:    %s\n", s.Step)
	}
	if s.Message != "" {
		fmt.Fprintf(&b, "message: %s\n", s.Message)
	}
	if s.Fix != "" {
		fmt.Fprintf(&b, "fix:     %s\n", s.Fix)
	}
	if s.State == StateConverged || s.State == StateFailed {
		fmt.Fprintf(&b, "exit:    %d (%s)\n", s.ExitCode, s.ExitMeaning)
		fmt.Fprintf(&b, "changed: %t\n", s.Changed)
	}
	fmt.Fprintf(&b, "started: %s\nupdated: %s\n", s.Started.Format(time.RFC3339), s.Updated.Format(time.RFC3339))
	b.WriteString("journal: journalctl -u " + UnitName + "\n")
	return b.String()
}

// Reporter writes a box's status where a technician looks: the status files in Dir, and
// unless NoBanner the motd and console-issue lines. Root paths (Root) are for tests.
type Reporter struct {
	Dir string
	// Root is prefixed to MotdPath and IssuePath ("" on a box).
	Root     string
	NoBanner bool
}

// Write records st (Updated set to now). The first error is returned; each file is written
// atomically, so a reader never sees half a status.
func (r Reporter) Write(st Status) error {
	st.Updated = time.Now().UTC().Truncate(time.Second)
	js, _ := json.MarshalIndent(st, "", "  ")
	if err := writeAtomic(filepath.Join(r.Dir, StatusJSON), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(r.Dir, StatusName), []byte(st.Text()), 0o644); err != nil {
		return err
	}
	if r.NoBanner {
		return nil
	}
	line := st.Line() + "\n"
	for _, p := range []string{MotdPath, IssuePath} {
		p = filepath.Join(r.Root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeAtomic(p, []byte(line), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadStatus reads the status file a Reporter wrote in dir.
func ReadStatus(dir string) (Status, error) {
	var st Status
	b, err := os.ReadFile(filepath.Join(dir, StatusJSON))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}
