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

// command is a k3strap command: its name and its steps in order.
type command struct {
	name  string
	steps []step
	// withFirst adds the first server to the session when --host selected only other hosts:
	// the command needs it (token, API, lock).
	withFirst bool
}

// applySteps is `k3strap apply` (and `upgrade`, which is apply for a new version).
func applySteps() []step {
	return []step{
		connectStep{}, factsStep{}, planStep{}, pathsStep{}, preflightStep{}, lockStep{},
		firstServerStep{}, stageStep{}, superviseStep{}, replaceStep{}, joinServersStep{}, joinAgentsStep{},
		bringUpStep{}, kubeconfigStep{}, nodesStep{}, cniStep{}, rancherStep{},
	}
}

func commandFor(name string) command {
	switch name {
	case "apply", "upgrade":
		return command{name: name, steps: applySteps(), withFirst: true}
	case "preflight":
		return command{name: name, steps: []step{connectStep{}, factsStep{}, planStep{}, pathsStep{}, preflightStep{}}}
	case "check":
		return command{name: name, steps: []step{connectStep{firstOnly: true}, driftStep{}}, withFirst: true}
	case "reset":
		return command{name: name, steps: []step{connectStep{}, factsStep{}, resetStep{}}, withFirst: true}
	case "kubeconfig":
		return command{name: name, steps: []step{connectStep{firstOnly: true}, fetchKubeconfigStep{}}, withFirst: true}
	case "doctor":
		return command{name: name, steps: doctorSteps()}
	}
	if c, ok := day2Command(name); ok {
		return c
	}
	return command{name: name}
}

// StepInfo describes one step of a command for `k3strap steps` and the commands' --help.
type StepInfo struct {
	// Phase is the step's name (also the phase of its events).
	Phase events.Phase
	// Summary says what it does in one line.
	Summary string
	// Changes is true when the step changes hosts, the cluster or local files, or watches
	// what such a change does: --dry-run previews it instead of running it.
	Changes bool
}

// Commands lists the commands that run as steps, in the order `k3strap steps` shows them.
func Commands() []string {
	return append([]string{"apply", "upgrade", "preflight", "check", "reset", "kubeconfig", "doctor"}, day2Commands()...)
}

// Steps returns command's steps in order (nil for an unknown command).
func Steps(command string) []StepInfo {
	var out []StepInfo
	for _, st := range commandFor(command).steps {
		_, changes := st.(previewer)
		out = append(out, StepInfo{Phase: st.Phase(), Summary: st.Summary(), Changes: changes})
	}
	return out
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
	s.summary(start, err)
	return err
}

// runSteps runs steps in order; under --dry-run a step that has a Preview is previewed. A step
// may leave work running in the background (the supervisor, staging uploads): such work stops
// the run with its failure through s.abort, and is stopped and waited for when the steps end.
func (s *session) runSteps(parent context.Context, steps []step) error {
	ctx, cancel := context.WithCancelCause(parent)
	s.abort = cancel
	defer func() {
		cancel(context.Canceled)
		s.background.Wait()
	}()
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return s.aborted(parent, ctx, err)
		}
		s.current = st.Phase()
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
	return nil
}

// settle is called when a step failed while the first server's supervisor may still run: the
// first server's bring-up is waited for (unless the run was cancelled), so that its result is
// known and a diagnosed stall — the cause of everything else — is what the run reports.
func (s *session) settle(parent context.Context, err error) error {
	if s.bringUp == nil || s.in.opts.DryRun {
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
