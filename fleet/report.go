// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet/sitestatus"
)

// Reporting a push site's status into the management cluster (spec.management,
// docs/fleet.md "Status in a management cluster"): after each site's run the runner calls
// RunOptions.Report with the site's record; a report that fails is a warning, never a failed
// site or rollout.

// PushStatus is the SiteStatus of push site s from its state record st: the cluster as last
// seen, the newest finished command's outcome, doctor's verdict, the site's digest as the
// desired revision and the digest of its last successful rollout as the applied one, and as
// LastSeen when a host of the site last answered k3strap (zero: never).
func PushStatus(s *Site, st SiteState) sitestatus.Status {
	out := sitestatus.Status{Source: sitestatus.SourcePush, DesiredRevision: s.Digest, LastSeen: st.Reached,
		DoctorVerdict: verdict(st.Doctor)}
	if c := st.Cluster; c != nil {
		out.Version, out.NodesReady, out.NodesTotal = strings.Join(c.Versions, ","), c.Ready, c.Nodes
	}
	if r := st.Rollout; r != nil && r.Status == events.SiteDone {
		out.AppliedRevision = r.Digest
	}
	var last *Record
	for _, r := range []*Record{st.Rollout, st.Check, st.Doctor, st.Preflight} {
		if r != nil && !r.Finished.IsZero() && (last == nil || r.Finished.After(last.Finished)) {
			last = r
		}
	}
	if last != nil {
		out.LastResult = &sitestatus.Result{Command: last.Command, ExitCode: last.ExitCode, ExitMeaning: last.Exit, Message: last.Message, Time: last.Finished}
	}
	return out
}

// PushReporter returns a RunOptions.Report that writes each site's PushStatus with the
// operator's kubeconfig file, creating the site's SiteStatus object when it is missing (a
// push site needs no credential of its own).
func PushReporter(kubeconfig string) func(ctx context.Context, s *Site, st SiteState) error {
	return func(ctx context.Context, s *Site, st SiteState) error {
		status := PushStatus(s, st)
		err := sitestatus.Write(ctx, kubeconfig, s.Name, status)
		var e *sitestatus.Error
		if errors.As(err, &e) && e.Code == 404 {
			if err := sitestatus.Register(ctx, kubeconfig, s.Name); err != nil {
				return err
			}
			err = sitestatus.Write(ctx, kubeconfig, s.Name, status)
		}
		return err
	}
}

// report writes site s's status when RunOptions.Report is set and the run records (not under
// --dry-run, not once cancelled); a failure is a warning on the site's events.
func (r *runner) report(ctx context.Context, s *Site) {
	if r.opts.Report == nil || !r.opts.Record || ctx.Err() != nil {
		return
	}
	if err := r.opts.Report(ctx, s, r.j.Site(s.Name)); err != nil {
		events.Emitter{Sink: events.SiteSink(s.Name, r.opts.Sink), Phase: events.PhaseFleet, Now: r.opts.Now}.Warn("",
			fmt.Sprintf("site %s: its status was not reported to the management cluster (the rollout goes on): %v", s.Name, err))
	}
}
