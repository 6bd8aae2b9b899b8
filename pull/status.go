// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/k3strap/k3strap/internal/atomicfile"
)

// StatusName is the status file in the state directory.
const StatusName = "status.json"

// Results of a pull run (Result.State).
const (
	ResultRunning     = "running"
	ResultApplied     = "applied"     // a new verified revision was converged
	ResultUpToDate    = "up-to-date"  // the verified revision is the applied one: nothing to do
	ResultRefused     = "refused"     // verification failed: nothing applied
	ResultUnreachable = "unreachable" // the source could not be reached: nothing applied
	ResultFailed      = "failed"      // bad configuration or ref, or the converge failed
)

// Status is status.json: what a box says about its pull state (docs/edge-pull.md "Status").
type Status struct {
	// Host is this box's inventory host; Source where the desired state comes from.
	Host   string `json:"host"`
	Source string `json:"source"`
	// DesiredRevision is the last revision fetched and verified (a commit hash, or
	// sha256:<hex>); AppliedRevision the last one converged successfully, AppliedAt when.
	DesiredRevision string    `json:"desiredRevision,omitempty"`
	AppliedRevision string    `json:"appliedRevision,omitempty"`
	AppliedAt       time.Time `json:"appliedAt,omitzero"`
	// Signer is who signed the desired revision (principals and key fingerprint).
	Signer string `json:"signer,omitempty"`
	// SourceReachable says whether the last fetch reached the source; SourceMessage is "ok" or
	// "source unreachable: <error>".
	SourceReachable bool   `json:"sourceReachable"`
	SourceMessage   string `json:"sourceMessage"`
	// Result is the last run's outcome.
	Result Result `json:"result"`
	// Report is the outcome of the last run's report to the management cluster; nil when the
	// configuration names none (docs/edge-pull.md "Status").
	Report *Report `json:"report,omitempty"`
	// Time is when the status was written.
	Time time.Time `json:"time"`
}

// Report is how a run's report to the management cluster went: Reported, or the error
// (naming the fix, never a credential) in Message; Server is the management cluster's API
// address, Site the site's name there.
type Report struct {
	Reported bool   `json:"reported"`
	Server   string `json:"server"`
	Site     string `json:"site"`
	Message  string `json:"message,omitempty"`
}

// Result is a run's outcome: State (the Result* constants), the step that failed, what
// happened and the fix, and the run's exit code and its meaning (the README's table).
type Result struct {
	State       string `json:"state"`
	Step        string `json:"step,omitempty"`
	Message     string `json:"message,omitempty"`
	Fix         string `json:"fix,omitempty"`
	ExitCode    int    `json:"exitCode"`
	ExitMeaning string `json:"exitMeaning"`
	// Changed says whether the converge changed anything on the box.
	Changed bool `json:"changed"`
}

// ReadStatus reads StateDir/status.json; a missing file is an empty Status and no error.
func ReadStatus(stateDir string) (Status, error) {
	var st Status
	b, err := os.ReadFile(filepath.Join(stateDir, StatusName))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(stateDir, StatusName), err)
	}
	return st, nil
}

// WriteStatus writes st (Time set to now) to StateDir/status.json atomically.
func WriteStatus(stateDir string, st Status) error {
	st.Time = time.Now().UTC().Truncate(time.Second)
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(stateDir, StatusName), append(b, '\n'), 0o644)
}

// Line is the status's one line for the journal.
func (s Status) Line() string {
	l := fmt.Sprintf("k3strap pull: %s: %s (exit %d, %s); desired %s, applied %s; source: %s", s.Host, s.Result.State, s.Result.ExitCode, s.Result.ExitMeaning, short(s.DesiredRevision), short(s.AppliedRevision), s.SourceMessage)
	if s.Result.Message != "" && s.Result.State != ResultApplied && s.Result.State != ResultUpToDate && s.Result.Message != s.SourceMessage {
		l += " — " + s.Result.Message
	}
	if s.Result.Fix != "" {
		l += " — fix: " + s.Result.Fix
	}
	return l
}

func short(rev string) string {
	if rev == "" {
		return "none"
	}
	if len(rev) == 40 {
		return rev[:12]
	}
	return rev
}
