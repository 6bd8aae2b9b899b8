// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"time"

	"github.com/k3strap/k3strap/events"
)

// step is one named stage of a command. Each lives in a file step_<name>.go. What a step
// learns (facts, plans, the preflight verdicts, the token, the convergeResult of the first
// server) is stored on the session for later steps; no step recomputes another's result.
type step interface {
	// Phase is the step's name in events and in `k3strap steps`.
	Phase() events.Phase
	// Summary says in one line what the step does.
	Summary() string
	// Run does the step. It returns a *Failure saying what failed and how to resume, or the
	// context's error when cancelled.
	Run(ctx context.Context, s *session) error
}

// previewer is implemented by every step that changes something (on a host, in the cluster or
// on the workstation) or watches what a change does: under --dry-run the engine calls Preview
// instead of Run, which reports what Run would do and changes nothing. Steps without Preview
// only read, and run as they are under --dry-run.
type previewer interface {
	Preview(ctx context.Context, s *session) error
}

// runCommand runs a command's steps in order on a new session, stopping at the first failure,
// then turns the outcome into the events the user sees (the failure with its fix, the summary).
func (in *Installer) runCommand(ctx context.Context, name string, configure func(*session)) error {
	start := time.Now()
	cmd := commandFor(name)
	s := in.newSession(cmd)
	if configure != nil {
		configure(s)
	}
	defer s.close()
	err := s.runSteps(ctx, cmd.steps)
	err = s.finish(ctx, err)
	err = s.changesPending(err) // summary.go: --detailed-exitcode
	s.summary(start, err)
	return err
}

// runSteps runs steps in order (each start said in a debug event, shown with --verbose); the
// context is looked at before each step, after the last and once the background work has
// stopped, so a cancellation is the run's outcome whichever step it came in (a step that
// honours it sooner stops sooner); under
// --dry-run a step that has a Preview is previewed. A step
// may leave work running in the background (the supervisor, staging uploads): such work stops
// the run with its failure through s.abort, and is stopped and waited for when the steps end.
func (s *session) runSteps(parent context.Context, steps []step) (err error) {
	ctx, cancel := context.WithCancelCause(parent)
	s.abort = cancel
	defer func() {
		cancel(context.Canceled)
		s.background.Wait()
		// A Ctrl-C handled while the background work wound down (the supervisor's probe
		// ending takes a few hundred milliseconds) stops the run too.
		if err == nil && parent.Err() != nil {
			err = parent.Err()
		}
	}()
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return s.aborted(parent, ctx, err)
		}
		s.current = st.Phase()
		s.in.emitter(st.Phase()).Debug("", "step "+string(st.Phase())+" starts")
		var err error
		if p, ok := st.(previewer); ok && s.in.opts.DryRun {
			err = p.Preview(ctx, s)
		} else {
			err = st.Run(ctx, s)
		}
		if err != nil {
			return s.aborted(parent, ctx, s.settle(parent, err))
		}
	}
	// A Ctrl-C (or a failure of background work) that came while the last step ran is the
	// run's outcome too, even when that step had nothing left to stop (rancher without Rancher
	// asked for): the run is cancelled at every step, the last included, and while background
	// work is stopped after it (above). Only a signal handled after that — the summary being
	// written, the run lock released — leaves exit 0 (docs/failure-modes.md "Faults during a
	// run").
	if err := ctx.Err(); err != nil {
		return s.aborted(parent, ctx, err)
	}
	return nil
}

// settle is called when a step failed while the first server's supervisor may still run: the
// first server's bring-up is waited for (unless the run was cancelled), so that its result is
// known and a diagnosed stall — the cause of everything else — is what the run reports.
func (s *session) settle(parent context.Context, err error) error {
	if s.boot.bringUp == nil || s.in.opts.DryRun {
		return err
	}
	if upErr := s.firstUp(parent); upErr != nil && parent.Err() == nil {
		var f *Failure
		if errors.As(upErr, &f) && f.Kind == KindBringUp {
			return upErr
		}
	}
	return err
}

// aborted returns the failure that stopped the run: the one background work reported through
// s.abort when it cancelled the steps' context (a diagnosed stall of the first server), else
// err.
func (s *session) aborted(parent, ctx context.Context, err error) error {
	if parent.Err() == nil && ctx.Err() != nil {
		var f *Failure
		if cause := context.Cause(ctx); errors.As(cause, &f) {
			return f
		}
	}
	return err
}

// errNoServer is the failure of a command that needs a server when the inventory has none.
func errNoServer(phase events.Phase) *Failure {
	return &Failure{Kind: KindInvalid, Phase: phase, Info: events.ErrorInfo{
		Message: "the inventory has no server", Fix: "give at least one host role: server"}}
}

// finish turns a run's error into what the user sees: cancellation becomes KindCancelled,
// every failure but preflight's (already reported as findings) is emitted with its fix.
func (s *session) finish(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cmd := events.CommandPhase(s.command)
	if ctx.Err() != nil {
		// The cause, not a secondary error of what the cancellation stopped (a closed
		// connection, a killed command): "interrupt signal received" for Ctrl-C.
		why := "cancelled"
		if c := context.Cause(ctx); c != nil && c.Error() != context.Canceled.Error() {
			why += " (" + c.Error() + ")"
		}
		err = &Failure{Kind: KindCancelled, Phase: s.current, Info: events.ErrorInfo{
			Message: why + " during step " + string(s.current) + "; the step that was running finished or was stopped before anything was half-written",
			Resume:  "re-run `k3strap " + s.command + "` to continue",
		}}
	}
	var f *Failure
	switch {
	case errors.As(err, &f):
		if f.Kind != KindPreflight {
			s.in.emitter(f.Phase).Fail(f.Host, f.Step, f.Info)
		}
	default:
		s.in.emitter(cmd).Fail("", string(s.current), events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap " + s.command + "`"})
	}
	return err
}
