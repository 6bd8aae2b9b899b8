// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

// Steps of `k3strap doctor` (docs/doctor.md); it also uses PhaseConnect.
const (
	// PhaseClusterView reads the cluster's nodes, pods, events, DaemonSets, Deployments,
	// Jobs and HelmCharts through one server.
	PhaseClusterView Phase = "cluster-view"
	// PhaseDiscover finds the cluster's other nodes (doctor --ssh) and connects to them.
	PhaseDiscover Phase = "discover"
	// PhaseEvidence gathers facts and evidence from every node, one command each.
	PhaseEvidence Phase = "evidence"
	// PhaseFindings judges the evidence and reports the findings.
	PhaseFindings Phase = "findings"
	// PhaseFix applies doctor --fix's safe repairs (lost taints and labels).
	PhaseFix Phase = "fix"
	// PhaseBundle writes doctor --bundle's support bundle.
	PhaseBundle Phase = "bundle"
)

// DoctorFindingType is the event type of one `k3strap doctor` finding (payload Doctor).
const DoctorFindingType Type = "doctor_finding"

// DoctorFinding is one problem `k3strap doctor` found.
type DoctorFinding struct {
	// ID is stable (README, "k3strap doctor"), e.g. F1-cloud-controller, no-pod-network.
	ID string `json:"id"`
	// Severity is "error", "warning" or "info".
	Severity string `json:"severity"`
	// Node is the node or host it concerns ("" for the cluster).
	Node    string `json:"node,omitempty"`
	Title   string `json:"title"`
	Message string `json:"message,omitempty"`
	// Evidence are the facts it rests on, each with where it was read.
	Evidence []EvidenceLine `json:"evidence,omitempty"`
	// Fixes are the ways out, best first; Commands repair it by hand.
	Fixes    []string `json:"fixes,omitempty"`
	Commands []string `json:"commands,omitempty"`
	// Repairable says `doctor --fix` can repair it.
	Repairable bool `json:"repairable,omitempty"`
}

// EvidenceLine is one fact and its source.
type EvidenceLine struct {
	Text   string `json:"text"`
	Source string `json:"source,omitempty"`
}

// Doctor emits a doctor finding.
func (em Emitter) Doctor(f DoctorFinding) {
	em.send(Event{Type: DoctorFindingType, Host: f.Node, Message: f.Title, Doctor: &f})
}
