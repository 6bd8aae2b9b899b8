// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/preflight"
)

// preflightStep says how files reach each host (reportFileMethods), reads every host's proxy
// environment and probes the proxy (gatherProxy), then judges the gathered facts and the plans
// with every preflight check, emits every finding, and keeps the report and its CNI-exclusion
// verdict for later steps. It fails (KindPreflight) when errors remain after
// --ignore-preflight-errors, and then (KindInstall)
// when a host's plan could not be built.
//
// Reads: hostState.facts, plan, connErr; s.pre.binaryReleases, s.pre.paths. Writes: s.pre.proxy,
// s.pre.report, s.pre.excluded; host results of failed hosts.
type preflightStep struct{}

func (preflightStep) Phase() events.Phase { return events.PhasePreflight }

func (preflightStep) Summary() string {
	return "run the preflight checks on the facts and plans (kubeadm-style IDs, --ignore-preflight-errors)"
}

func (preflightStep) Run(ctx context.Context, s *session) error {
	// Deciding how files reach each host (an SFTP start) and reading the proxy environment are
	// independent remote round trips: both at once, so the step waits for the longer, not the sum.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.reportFileMethods(ctx)
	}()
	proxy, err := s.gatherProxy(ctx)
	<-done
	if err != nil {
		return err
	}
	s.pre.proxy = proxy
	if _, err := s.preflight(); err != nil {
		return err
	}
	for _, hs := range s.hosts {
		if hs.planErr != nil {
			hs.setResult(events.StatusFailed, hs.planErr.Error())
			return &Failure{Kind: KindInstall, Phase: events.PhasePlan, Host: hs.host.Name, Info: events.ErrorInfo{
				Message: hs.planErr.Error(), Resume: "fix the inventory and re-run `k3strap " + s.command + "`"}}
		}
	}
	return ctx.Err()
}

// preflightInput is what the checks judge: the inventory, every host's facts and the
// connection failures.
func (s *session) preflightInput() *preflight.Input {
	input := &preflight.Input{Cluster: s.in.cluster, Facts: map[string]*facts.Host{}, Unreachable: map[string]error{},
		BinaryReleases: s.pre.binaryReleases, Paths: s.pre.paths, Writes: s.plannedWrites(), Proxy: s.pre.proxy}
	// Hosts --host left out, or all but itself for a box joining by itself, are not asked for.
	input.NotInRun = map[string]bool{}
	for _, h := range s.in.cluster.Spec.Hosts {
		input.NotInRun[h.Name] = true
	}
	for _, hs := range s.hosts {
		delete(input.NotInRun, hs.host.Name)
		if hs.facts != nil {
			input.Facts[hs.host.Name] = hs.facts
		}
		if hs.connErr != nil {
			input.Unreachable[hs.host.Name] = hs.connErr
		}
	}
	return input
}

// preflight runs the checks, emits every finding and records the report and the
// CNI-exclusion verdict on the session. It returns a Failure with KindPreflight when errors
// remain after --ignore-preflight-errors.
func (s *session) preflight() (*preflight.Report, error) {
	em := s.in.emitter(events.PhasePreflight)
	em.Started("running preflight checks")
	input := s.preflightInput()
	rep := preflight.Run(input, s.in.opts.IgnorePreflight)
	s.pre.report = rep
	s.pre.excluded = map[string]preflight.ExcludedHost{}
	for _, e := range preflight.CNIExcludedHosts(input) {
		s.pre.excluded[e.Host] = e
	}
	for _, f := range rep.Findings {
		sev := string(f.Severity)
		if f.Ignored {
			sev = "ignored"
		}
		res := events.PreflightResult{Check: f.ID, Severity: sev, Message: f.Message, Fix: f.Fix(), Commands: f.Commands}
		for _, e := range f.Evidence {
			res.Evidence = append(res.Evidence, events.EvidenceLine{Text: e.Text, Source: e.Source})
		}
		em.Finding(f.Host, res)
	}
	errs := rep.Errors()
	if len(errs) > 0 {
		checks, order, byHost := failedChecks(errs)
		for _, h := range order {
			if hs := s.state(h); hs != nil {
				hs.setResult(events.StatusFailed, "preflight: "+strings.Join(byHost[h], ", "))
			}
		}
		em.Finished(events.StatusFailed, fmt.Sprintf("%d preflight errors", len(errs)))
		return rep, &Failure{Kind: KindPreflight, Phase: events.PhasePreflight, Info: events.ErrorInfo{
			Message: fmt.Sprintf("preflight found %d errors (%s); nothing was changed on any host", len(errs), strings.Join(checks, ", ")),
			Fix:     "fix the findings above, or skip a check you accept with --ignore-preflight-errors=" + strings.Join(checks, ","),
			Resume:  "re-run the same command",
		}}
	}
	em.Finished(events.StatusOK, fmt.Sprintf("%d warnings", len(rep.Warnings())))
	return rep, nil
}

// failedChecks groups preflight errors: checks is every failed check ID once, in report order;
// hosts the hosts with errors in report order, and byHost every failed check of each host (not
// only the last: a host's summary line names them all).
func failedChecks(errs []finding.Finding) (checks, hosts []string, byHost map[string][]string) {
	byHost = map[string][]string{}
	for _, f := range errs {
		if !slices.Contains(checks, f.ID) {
			checks = append(checks, f.ID)
		}
		if _, ok := byHost[f.Host]; !ok {
			hosts = append(hosts, f.Host)
		}
		if !slices.Contains(byHost[f.Host], f.ID) {
			byHost[f.Host] = append(byHost[f.Host], f.ID)
		}
	}
	return checks, hosts, byHost
}
