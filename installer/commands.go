package installer

import (
	"context"
	"errors"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/preflight"
)

// Apply converges every host to the inventory, running the steps of Steps("apply") in order:
// connect, facts, plan, preflight, lock, the first server (converged and supervised), further
// servers one at a time, agents in parallel, the kubeconfig, node taints and labels, the CNI
// and Rancher. A host whose files, unit and service already match is left alone (no upload,
// no rewrite, no restart) and reported "unchanged". With Options.DryRun every step that would
// change something reports what instead. It returns a *Failure (or the context's error).
func (in *Installer) Apply(ctx context.Context) error {
	return in.runCommand(ctx, "apply", nil)
}

// Upgrade is Apply for a new spec.k3s.version: servers one at a time, then agents in batches
// (UpgradeBatchPercent of the agents, at least 1), each drained (unless NoDrain) and
// uncordoned once Ready on the new version. Downgrades are refused by preflight's
// ExistingInstall check unless Force.
func (in *Installer) Upgrade(ctx context.Context) error {
	return in.runCommand(ctx, "upgrade", nil)
}

// Preflight connects, gathers facts, plans and runs every check; it changes nothing. It
// returns the report (nil when the checks did not run) and a *Failure with KindPreflight
// when errors remain.
func (in *Installer) Preflight(ctx context.Context) (*preflight.Report, error) {
	var s *session
	err := in.runCommand(ctx, "preflight", func(ss *session) { s = ss })
	return s.report, err
}

// Check compares every node's taints and labels with the inventory through the first server
// and reports drift per node, changing nothing (`k3strap check`). It returns a *Failure with
// KindDrift when any node differs.
func (in *Installer) Check(ctx context.Context) error {
	return in.runCommand(ctx, "check", nil)
}

// Reset uninstalls K3s from the selected hosts (every host when Options.Hosts is empty):
// agents first, in parallel; then servers one at a time, the first server last. The caller
// asks for confirmation.
func (in *Installer) Reset(ctx context.Context) error {
	return in.runCommand(ctx, "reset", nil)
}

// Kubeconfig fetches the cluster's kubeconfig from the first server and writes or merges it as
// req says. It returns the path written.
func (in *Installer) Kubeconfig(ctx context.Context, req KubeconfigRequest) (string, error) {
	var s *session
	err := in.runCommand(ctx, "kubeconfig", func(ss *session) { s = ss; s.kubeconfigReq = req })
	return s.kubeconfig, err
}

// finish turns a run's error into what the user sees: cancellation becomes KindCancelled,
// every failure but preflight's (already reported as findings) is emitted with its fix.
func (s *session) finish(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cmd := events.CommandPhase(s.command)
	if ctx.Err() != nil {
		err = &Failure{Kind: KindCancelled, Phase: s.current, Info: events.ErrorInfo{
			Message: "cancelled during step " + string(s.current) + "; the step that was running finished or was stopped before anything was half-written",
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
