// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
)

// exitMeaning is one row of k3strap's exit codes (the README's table): the process exit code,
// the installer's kind of outcome it stands for, and the words front-ends show beside it (the
// summary event carries them: events.SummaryInfo.ExitMeaning).
type exitMeaning struct {
	code    int
	kind    installer.Kind
	meaning string
}

// exitTable is the only place k3strap's exit codes are numbered and named: the installer
// reports what kind of outcome a run had (installer.Kind), front-ends show what the summary
// event says.
var exitTable = []exitMeaning{
	{exitOK, installer.KindOK, "success"},
	{exitError, installer.KindError, "unexpected error"},
	{exitInvalid, installer.KindInvalid, "invalid inventory or usage"},
	{exitPreflight, installer.KindPreflight, "preflight failed"},
	{exitInstall, installer.KindInstall, "a host step failed"},
	{exitBringUp, installer.KindBringUp, "bring-up failed"},
	{exitDrift, installer.KindDrift, "drift found"},
	{exitWarnings, installer.KindFindingsWarning, "doctor found warnings"},
	{exitFindings, installer.KindFindingsError, "doctor found errors"},
	{exitChanges, installer.KindChangesPending, "changes pending"},
	{exitDeferred, installer.KindDeferred, "sites deferred (unreachable)"},
	{exitCancelled, installer.KindCancelled, "cancelled"},
}

// Process exit codes of k3strap, in exitTable's order.
const (
	exitOK        = 0
	exitError     = 1   // unexpected error
	exitInvalid   = 2   // invalid inventory, command line or static check
	exitPreflight = 3   // preflight found errors (unreachable hosts included)
	exitInstall   = 4   // a host step failed
	exitBringUp   = 5   // the first server did not come up (stall diagnosed or timeout)
	exitDrift     = 6   // check: node taints or labels differ from the inventory
	exitWarnings  = 7   // doctor: warnings found, no error
	exitFindings  = 8   // doctor: errors found
	exitChanges   = 9   // --dry-run --detailed-exitcode: the run succeeded and found changes to make
	exitDeferred  = 10  // fleet: sites unreachable, deferred; every site reached succeeded
	exitCancelled = 130 // cancelled (Ctrl-C)
)

// exitOf returns the row of exitTable for a command's error (success for nil).
func exitOf(err error) exitMeaning {
	kind := installer.KindOf(err)
	// Invalid input: the inventory, the command line, a state file k3strap cannot use (the
	// same in every command that reads one).
	if err != nil && (errors.As(err, new(inventory.ErrorList)) || errors.As(err, new(usageError)) || errors.As(err, new(*fleet.StateError))) {
		kind = installer.KindInvalid
	}
	for _, e := range exitTable {
		if e.kind == kind {
			return e
		}
	}
	return exitMeaning{exitError, installer.KindError, "unexpected error"}
}

// exitCode returns the process exit code for a command's error (0 for nil).
func exitCode(err error) int { return exitOf(err).code }

// exitSummary is the installer's Options.Exit: the code and meaning a run's summary event
// carries.
func exitSummary(err error) (int, string) {
	e := exitOf(err)
	return e.code, e.meaning
}
