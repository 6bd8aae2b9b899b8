package installer

import (
	"context"
	"errors"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// ExitCode is a process exit code of k3strap (documented in the README).
type ExitCode int

// Failure is an error with the exit code it maps to and the explanation shown to the user.
type Failure struct {
	Code ExitCode
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

// CodeOf returns the exit code for err: a Failure's code, ExitCancelled for context
// cancellation, ExitError otherwise, ExitOK for nil.
func CodeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Code
	}
	if errors.Is(err, context.Canceled) {
		return ExitCancelled
	}
	return ExitError
}

// Exit codes.
const (
	ExitOK        ExitCode = 0
	ExitError     ExitCode = 1 // unexpected error
	ExitInvalid   ExitCode = 2 // invalid inventory or command line
	ExitPreflight ExitCode = 3 // preflight found errors (unreachable hosts included)
	ExitInstall   ExitCode = 4 // a host step failed
	ExitBringUp   ExitCode = 5 // the first server did not come up (stall diagnosed or timeout)
	ExitCancelled ExitCode = 130
)
