// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/gofrs/flock"
)

// Converger converges this box to the inventory at path (local mode, the same engine and
// safety rules as `apply`); changed says whether anything changed.
type Converger func(ctx context.Context, inventory string) (changed bool, err error)

// ConvergeError is a converge that failed, as the engine's events told it: the step, what
// happened and its fix (the status shows them); Err is the run's error (its exit code).
type ConvergeError struct {
	Step, Msg, Fix string
	Err            error
}

func (e *ConvergeError) Error() string { return e.Msg }
func (e *ConvergeError) Unwrap() error { return e.Err }

// LockName is the lock file in the state directory a run holds.
const LockName = ".lock"

// BusyError is a run that found another one running on the same state directory.
type BusyError struct{ Path string }

func (e *BusyError) Error() string {
	return "another `k3strap pull run` is running (it holds " + e.Path + "): this one does nothing; the timer runs again at the next interval"
}

// Runner is one `pull run`.
type Runner struct {
	Config *Config
	// Converge applies a verified inventory; Exit maps a run's error to its exit code and
	// meaning (the command layer's table).
	Converge Converger
	Exit     func(error) (int, string)
	// Log gets the journal lines (the unit's stdout).
	Log io.Writer
	// Force converges even when the verified revision is the applied one.
	Force bool
	// Backoff is the retry schedule of an unreachable source (nil: exponential from 5s to
	// 1m, for at most Config.RetryFor).
	Backoff backoff.BackOff
}

// Run fetches, verifies and, when the verified revision differs from the applied one (or
// Force), converges; it writes status.json before returning and returns the status and the
// run's error: *BusyError (another run holds the state directory: nothing done, no status
// written), *UnreachableError after retrying for RetryFor, *RefusedError, *RefError,
// *ConfigError, the converge's error, or ctx's. A refused, unreachable or bad state leaves the
// applied revision and the box as they were.
func (r *Runner) Run(ctx context.Context) (Status, error) {
	c := r.Config
	// One run at a time per state directory (the timer's and one by hand): the repository,
	// the tree and the status are this run's until it ends.
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return Status{}, err
	}
	lock := flock.New(filepath.Join(c.StateDir, LockName))
	locked, err := lock.TryLock()
	if err != nil {
		return Status{}, fmt.Errorf("locking %s: %w", lock.Path(), err)
	}
	if !locked {
		return Status{}, &BusyError{Path: lock.Path()}
	}
	defer lock.Unlock()
	prev, err := ReadStatus(c.StateDir)
	if err != nil {
		fmt.Fprintf(r.Log, "k3strap pull: the previous status is unreadable (%v); starting afresh\n", err)
		prev = Status{}
	}
	st := prev
	st.Host, st.Source = c.Host, c.SourceString()
	st.Report = nil // this run's report, if any, comes after the run
	st.Result = Result{State: ResultRunning}
	fmt.Fprintf(r.Log, "k3strap pull: host %s, source %s, applied %s\n", c.Host, st.Source, short(prev.AppliedRevision))

	d, err := r.fetch(ctx)
	var ue *UnreachableError
	switch {
	case errors.As(err, &ue):
		st.SourceReachable, st.SourceMessage = false, ue.Error()
		return r.finish(st, ResultUnreachable, "fetch", err, "the box keeps its state; check the source's address and the network; the next run retries")
	case err != nil && ctx.Err() != nil:
		st.SourceMessage = "not reached: cancelled"
		return r.finish(st, ResultFailed, "fetch", ctx.Err(), "")
	}
	st.SourceReachable, st.SourceMessage = true, "ok"
	var re *RefusedError
	var ce *ConfigError
	switch {
	case errors.As(err, &re):
		fmt.Fprintf(r.Log, "k3strap pull: REFUSED revision %s: %s\n", short(re.Revision), re.Msg)
		return r.finish(st, ResultRefused, "verify", err, re.Fix)
	case errors.As(err, &ce):
		return r.finish(st, ResultFailed, "config", err, ce.Fix)
	case err != nil:
		return r.finish(st, ResultFailed, "fetch", err, "")
	}
	st.DesiredRevision, st.Signer = d.Revision, d.Signer.String()
	if d.Signer.Fingerprint != "" {
		fmt.Fprintf(r.Log, "k3strap pull: revision %s verified: signed by %s\n", short(d.Revision), st.Signer)
	} else {
		fmt.Fprintf(r.Log, "k3strap pull: revision %s verified: its sha256 is the pinned one\n", short(d.Revision))
	}
	if d.Revision == prev.AppliedRevision && !r.Force {
		st.Result = Result{State: ResultUpToDate, Message: "revision " + short(d.Revision) + " is applied"}
		return r.finish(st, ResultUpToDate, "", nil, "")
	}
	_ = WriteStatus(c.StateDir, st)
	fmt.Fprintf(r.Log, "k3strap pull: converging to revision %s (applied: %s)\n", short(d.Revision), short(prev.AppliedRevision))
	changed, err := r.Converge(ctx, d.Inventory)
	st.Result.Changed = changed
	if err != nil {
		return r.finish(st, ResultFailed, "converge", err, "see the run's lines in the journal; the next run converges again")
	}
	st.AppliedRevision, st.AppliedAt = d.Revision, time.Now().UTC().Truncate(time.Second)
	return r.finish(st, ResultApplied, "", nil, "")
}

// fetch runs Fetch, retrying an unreachable source with backoff for at most RetryFor.
func (r *Runner) fetch(ctx context.Context) (Desired, error) {
	b := r.Backoff
	if b == nil {
		e := backoff.NewExponentialBackOff()
		e.InitialInterval, e.MaxInterval = 5*time.Second, time.Minute
		e.MaxElapsedTime = time.Duration(r.Config.RetryFor)
		b = e
	}
	b = backoff.WithContext(b, ctx)
	var d Desired
	op := func() error {
		var err error
		d, err = Fetch(ctx, r.Config)
		var ue *UnreachableError
		if errors.As(err, &ue) {
			fmt.Fprintf(r.Log, "k3strap pull: %v; retrying\n", err)
			return err
		}
		if err != nil {
			return backoff.Permanent(err)
		}
		return nil
	}
	err := backoff.Retry(op, b)
	return d, err
}

// finish records the outcome and returns it.
func (r *Runner) finish(st Status, state, step string, err error, fix string) (Status, error) {
	changed := st.Result.Changed
	st.Result = Result{State: state, Step: step, Fix: fix, Changed: changed}
	var cv *ConvergeError
	if errors.As(err, &cv) { // the engine's own account: its step and fix
		st.Result.Step += "/" + cv.Step
		if cv.Fix != "" {
			st.Result.Fix = cv.Fix
		}
	}
	if err != nil {
		st.Result.Message = err.Error()
	} else if state == ResultUpToDate {
		st.Result.Message = "revision " + short(st.DesiredRevision) + " is applied"
	}
	st.Result.ExitCode, st.Result.ExitMeaning = r.Exit(err)
	if werr := WriteStatus(r.Config.StateDir, st); werr != nil {
		fmt.Fprintf(r.Log, "k3strap pull: writing the status: %v\n", werr)
	}
	fmt.Fprintln(r.Log, st.Line())
	return st, err
}

// String is "principals (fingerprint)".
func (v Verified) String() string {
	if v.Fingerprint == "" {
		return ""
	}
	return v.Principals + " (" + v.Fingerprint + ")"
}
