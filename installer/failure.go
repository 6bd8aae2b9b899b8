// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// Kind says what ended a run. The command layer maps each kind to the process exit code
// documented in the README (cmd/k3strap/exitcodes.go); the installer knows no exit codes.
type Kind int

// Kinds of outcome.
const (
	// KindOK: the run succeeded.
	KindOK Kind = iota
	// KindError: an unexpected error.
	KindError
	// KindInvalid: the inventory or the command line is invalid.
	KindInvalid
	// KindPreflight: preflight found errors (unreachable hosts included).
	KindPreflight
	// KindInstall: a host step failed.
	KindInstall
	// KindBringUp: the first server did not come up (stall diagnosed or timeout).
	KindBringUp
	// KindDrift: `check` found nodes whose taints or labels differ from the inventory.
	KindDrift
	// KindCancelled: the run was cancelled (Ctrl-C).
	KindCancelled
	// KindFindingsWarning: doctor found warnings, no error.
	KindFindingsWarning
	// KindFindingsError: doctor found errors.
	KindFindingsError
	// KindChangesPending: a dry-run with Options.DetailedExitCode found changes to make
	// (terraform plan's -detailed-exitcode); the run itself succeeded.
	KindChangesPending
	// KindDeferred: a fleet rollout ended with sites it could not reach, deferred to the
	// next rollout; every site it reached succeeded (docs/fleet.md "Offline sites").
	KindDeferred
)

// Failure is an error with the kind of outcome it is and the explanation shown to the user.
type Failure struct {
	Kind Kind
	// Phase is the step of the command that failed.
	Phase events.Phase
	// Step is the per-host stage within it ("upload", "install", "token", ...), "" for the
	// step as a whole.
	Step string
	// Host is the inventory host that failed, "" for a cluster-wide failure.
	Host string
	Info events.ErrorInfo
}

func (f *Failure) Error() string {
	msg := f.Info.Message
	if f.Host != "" && !strings.HasPrefix(msg, f.Host) {
		msg = f.Host + ": " + msg
	}
	if f.Info.Fix != "" {
		msg += " — fix: " + f.Info.Fix
	}
	return msg
}

// KindOf returns the kind of outcome err is: a Failure's kind, KindCancelled for context
// cancellation, KindError otherwise, KindOK for nil.
func KindOf(err error) Kind {
	if err == nil {
		return KindOK
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Kind
	}
	if errors.Is(err, context.Canceled) {
		return KindCancelled
	}
	return KindError
}
