// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/inventory"
)

// fixStep applies doctor --fix's safe, reversible repairs: the taints and labels a node
// lost (docs/failure-modes.md F5), put back by read-modify-write with conflict retries
// (drift.Reconcile, as apply --reconcile-taints). Only after confirmation (a terminal prompt, or
// --yes); without --fix it names what --fix would do (the commands are in the findings).
//
// Reads: s.doctor.findings, viewHost, req. Writes: s.doctor.findings (repaired ones removed),
// s.doctor.report.Repaired.
type fixStep struct{}

func (fixStep) Phase() events.Phase { return events.PhaseFix }

func (fixStep) Summary() string {
	return "with --fix and after confirmation: put lost taints and labels back (read-modify-write, retried on conflict)"
}

// Preview names the repairs and changes nothing.
func (fixStep) Preview(_ context.Context, s *session) error {
	s.doctorRepairsInfo("would repair")
	return nil
}

func (fixStep) Run(ctx context.Context, s *session) error {
	ds := s.doctor
	em := s.in.emitter(events.PhaseFix)
	lines := s.doctorRepairsInfo("")
	if len(lines) == 0 || !ds.req.Fix {
		return nil
	}
	if ds.viewHost == nil {
		em.Warn("", "--fix: the cluster's API could not be read; nothing repaired")
		return nil
	}
	if ds.req.Confirm == nil || !ds.req.Confirm(lines) {
		em.Warn("", "--fix not confirmed: nothing changed (give --yes to repair without asking)")
		return nil
	}
	em.Started(fmt.Sprintf("repairing %d nodes", len(lines)))
	api, err := ds.viewHost.api(ctx)
	if err != nil {
		msg := "--fix: the cluster's API could not be reached (" + err.Error() + "); nothing repaired"
		em.Warn("", msg)
		em.Finished(events.StatusFailed, msg)
		return nil
	}
	var kept []finding.Finding
	repaired := map[string]bool{}
	for _, f := range ds.findings {
		if f.Repair == nil {
			kept = append(kept, f)
			continue
		}
		node := f.Repair.Node
		if !repaired[node] {
			d := s.doctorDesired(node)
			_, wrote, err := drift.Reconcile(ctx, api, d, drift.RepairAll, func(attempt int, err error) {
				em.Info(node, fmt.Sprintf("node changed while repairing (attempt %d): read again and retried", attempt))
			})
			if err != nil {
				em.Step(node, "fix", events.StatusFailed, err.Error())
				kept = append(kept, f)
				continue
			}
			repaired[node] = true
			st := events.StatusUnchanged
			if wrote {
				st = events.StatusChanged
			}
			em.Step(node, "fix", st, "taints and labels put back: "+describeRepair(f.Repair))
		}
		ds.report.Repaired = append(ds.report.Repaired, node+": "+describeRepair(f.Repair))
	}
	ds.findings = kept
	em.Finished(events.StatusOK, fmt.Sprintf("repaired %d nodes", len(repaired)))
	return nil
}

// doctorRepairsInfo lists the repairs (one line per repairable finding) and, with verb, reports
// them as info.
func (s *session) doctorRepairsInfo(verb string) []string {
	var lines []string
	for _, f := range s.doctor.findings {
		if f.Repair != nil {
			lines = append(lines, f.Repair.Node+": "+describeRepair(f.Repair))
		}
	}
	if len(lines) > 0 && (verb != "" || !s.doctor.req.Fix) {
		if verb == "" {
			verb = "can repair"
		}
		s.in.emitter(events.PhaseFix).Info("", "`k3strap doctor --fix` "+verb+": "+strings.Join(lines, "; "))
	}
	return lines
}

func describeRepair(r *finding.Repair) string {
	var parts []string
	for _, t := range r.Taints {
		parts = append(parts, "taint "+t)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		parts = append(parts, "label "+k+"="+r.Labels[k])
	}
	return strings.Join(parts, ", ")
}

// doctorDesired is what node must carry: the inventory's declaration with an inventory, else
// the node-taint and node-label it registered with (its k3s.io/node-args annotation).
func (s *session) doctorDesired(node string) drift.Desired {
	ds := s.doctor
	if !ds.req.Discover {
		if hs := s.state(node); hs != nil {
			return s.desired(hs)
		}
	}
	d := drift.Desired{Name: node, Labels: map[string]string{}}
	args := diagnose.NodeArgs(nodeNamed(ds.view.Nodes, node))
	for _, t := range args["node-taint"] {
		if tt, err := inventory.ParseTaint(t); err == nil {
			d.Taints = append(d.Taints, tt)
		}
	}
	for _, l := range args["node-label"] {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && k != "" {
			d.Labels[k] = v
		}
	}
	return d
}
