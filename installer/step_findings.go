// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
	"github.com/k3strap/k3strap/templates/cni"
)

// findingsStep judges the evidence (diagnose.Findings) and reports each finding as an event:
// with an inventory it also compares intent with reality (drift.Diff per declared host).
//
// Reads: s.doctor (view, nodes, req) and, for the intent, hostState.
// Writes: s.doctor.findings, s.doctor.report.Findings.
type findingsStep struct{}

func (findingsStep) Phase() events.Phase { return events.PhaseFindings }

func (findingsStep) Summary() string {
	return "judge the evidence: F1–F5, pod network, crash loops, certificates, NotReady nodes, version skew, etcd, clock, disk"
}

func (findingsStep) Run(_ context.Context, s *session) error {
	ds := s.doctor
	em := s.in.emitter(events.PhaseFindings)
	in := s.doctorInput()
	ds.findings = diagnose.Findings(in)
	if ds.viewErr != "" {
		ds.findings = append([]finding.Finding{{ID: checkid.APIUnreachable, Severity: finding.Error,
			Title: "the cluster's API could not be read", Message: ds.viewErr + "; only the nodes' own evidence was judged.",
			Fixes:  []string{"look at the K3s unit of the servers (`systemctl status k3s`, `journalctl -u k3s`)"},
			Source: finding.Doctor}}, ds.findings...)
	}
	ds.report.Findings = ds.findings
	for _, f := range ds.findings {
		em.Doctor(doctorEvent(f))
	}
	worst := finding.Worst(ds.findings)
	var errs, warns int
	for _, f := range ds.findings {
		switch f.Severity {
		case finding.Error:
			errs++
		case finding.Warning:
			warns++
		}
	}
	if worst == "" || worst == finding.Info {
		em.Finished(events.StatusOK, fmt.Sprintf("healthy: no problem found on %d nodes", len(ds.view.Nodes)))
	} else {
		em.Finished(events.StatusFailed, fmt.Sprintf("%d errors, %d warnings", errs, warns))
	}
	return nil
}

// doctorEvent is a finding as an event payload.
func doctorEvent(f finding.Finding) events.DoctorFinding {
	e := events.DoctorFinding{ID: f.ID, Severity: string(f.Severity), Node: f.Host, Title: f.Title, Message: f.Message,
		Fixes: f.Fixes, Commands: f.Commands, Repairable: f.Repair != nil}
	for _, l := range f.Evidence {
		e.Evidence = append(e.Evidence, events.EvidenceLine{Text: l.Text, Source: l.Source})
	}
	return e
}

// doctorInput assembles what diagnose.Findings judges: the evidence, the view and, with an
// inventory, the intent (drift.Diff against every declared host).
func (s *session) doctorInput() diagnose.Input {
	ds := s.doctor
	now := time.Now()
	if ds.req.Now != nil {
		now = ds.req.Now()
	}
	in := diagnose.Input{Now: now, View: ds.view, TaintGrace: ds.req.TaintGrace}
	if ds.viewHost != nil {
		in.ViewHost = ds.viewHost.host.Name
	}
	for _, hs := range s.hosts {
		if ne := ds.nodes[hs.host.Name]; ne != nil {
			in.Nodes = append(in.Nodes, *ne)
		}
	}
	for _, t := range []inventory.CNIType{inventory.CNICalico, inventory.CNIFlannelStandalone} {
		if w, ok := cni.NodeDaemonSet(t); ok {
			in.CNIDaemonSets = append(in.CNIDaemonSets, w.Namespace+"/"+w.Name)
		}
	}
	in.RancherVersion = doctorRancherVersion(ds)
	if in.RancherVersion != "" {
		in.RancherFixed, in.RancherKnown = preflight.RancherHasAgentTaintFix(in.RancherVersion)
	}
	if !ds.req.Discover && ds.view.Nodes != nil {
		c := s.in.cluster
		in.ExternalCloudController = c.ExternalCloudControllerDeclared()
		in.Intent = map[string]diagnose.Intent{}
		for _, hs := range s.hosts {
			n := nodeNamed(ds.view.Nodes, hs.host.Name)
			d := drift.Diff(n, s.desired(hs))
			it := diagnose.Intent{Registered: d.Registered, Describe: d.Describe()}
			for _, t := range d.MissingTaints {
				it.MissingTaints = append(it.MissingTaints, t.Core())
			}
			for _, l := range d.Labels {
				if it.Labels == nil {
					it.Labels = map[string]string{}
				}
				it.Labels[l.Key] = l.Want
			}
			in.Intent[hs.host.Name] = it
		}
	}
	return in
}

// doctorRancherVersion is the Rancher release the cluster runs: the tag of the rancher Deployment's
// image in cattle-system, else the version of the rancher HelmChart ("" when none).
func doctorRancherVersion(ds *doctorState) string {
	for _, d := range ds.view.Deployments {
		if d.Namespace == "cattle-system" && d.Name == "rancher" {
			for _, c := range d.Spec.Template.Spec.Containers {
				if i := strings.LastIndex(c.Image, ":"); i > 0 && strings.Contains(c.Image, "rancher") {
					return c.Image[i+1:]
				}
			}
		}
	}
	for _, h := range ds.view.HelmCharts {
		if h.Name == "rancher" && h.Version != "" {
			return h.Version
		}
	}
	return ""
}
