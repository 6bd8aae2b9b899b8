package main

import (
	"errors"
	"fmt"

	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
)

// Process exit codes of k3strap (the README's table). Only this file knows the numbers: the
// installer reports what kind of outcome a run had (installer.Kind).
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
	exitCancelled = 130 // cancelled (Ctrl-C)
)

// exitCode returns the process exit code for a command's error (0 for nil).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if errors.As(err, new(inventory.ErrorList)) || errors.As(err, new(usageError)) {
		return exitInvalid
	}
	switch installer.KindOf(err) {
	case installer.KindInvalid:
		return exitInvalid
	case installer.KindPreflight:
		return exitPreflight
	case installer.KindInstall:
		return exitInstall
	case installer.KindBringUp:
		return exitBringUp
	case installer.KindDrift:
		return exitDrift
	case installer.KindCancelled:
		return exitCancelled
	case installer.KindFindingsWarning:
		return exitWarnings
	case installer.KindFindingsError:
		return exitFindings
	}
	return exitError
}

// exitMeaningOf returns what an exit code means (the README's table), for the events of a fleet
// run and `k3strap fleet status`.
func exitMeaningOf(code int) string {
	switch code {
	case exitOK:
		return "success"
	case exitError:
		return "unexpected error"
	case exitInvalid:
		return "invalid inventory or command line"
	case exitPreflight:
		return "preflight failed"
	case exitInstall:
		return "a host step failed"
	case exitBringUp:
		return "the first server did not come up"
	case exitDrift:
		return "node taints or labels differ from the inventory"
	case exitWarnings:
		return "doctor found warnings"
	case exitFindings:
		return "doctor found errors"
	case exitCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("exit code %d", code)
}
