// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package finding is the one model of what k3strap's judges find: preflight's checks before an
// install (docs/preflight.md), the host-network checks both share (package netcheck;
// docs/failure-modes.md "Host networks") and doctor's findings on a running cluster
// (docs/doctor.md). A judgement preflight and doctor share (checkid.Shared) produces the same
// Finding on both sides — same ID, severity, host, evidence, fixes and commands; only Source
// says which judge ran it.
//
// The package holds types only and imports nothing of the project; the front-ends get findings
// as events (events.PreflightResult, events.DoctorFinding), whose shapes docs/output.md
// describes.
package finding

import (
	"fmt"
	"strings"
)

// Severity is how bad a finding is.
type Severity string

// Severities, worst first. A preflight error stops apply unless its check is ignored; doctor
// exits 8 on an error and 7 on a warning (docs/doctor.md); info is only reported.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Rank orders severities: 0 for Error, 1 for Warning, 2 for Info and anything else.
func (s Severity) Rank() int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Source is the judge that produced a finding.
type Source string

// Sources.
const (
	// Preflight: judged before an install, from gathered facts, the plan and the inventory.
	Preflight Source = "preflight"
	// Doctor: judged on a running cluster, from its evidence.
	Doctor Source = "doctor"
)

// Evidence is one fact a finding rests on and where it was read, e.g. Text "nameservers:
// 127.0.0.53", Source "cp1: /etc/resolv.conf".
type Evidence struct {
	Text   string
	Source string
}

// Repair is a safe, reversible repair `k3strap doctor --fix` may apply to a node: put lost
// taints (K3s's node-taint form key[=value]:Effect) and labels back (read-modify-write; never
// removing anything but a taint replaced by its declared value; docs/doctor.md).
type Repair struct {
	Node   string
	Taints []string
	Labels map[string]string
}

// Finding is one thing a judge found.
type Finding struct {
	// ID is the stable check, finding or diagnosis ID (checkid: "CloudController",
	// "Port-6443", "F1-cloud-controller", "NodePaths", ...).
	ID       string
	Severity Severity
	// Host is the inventory host (or, in doctor, the node) it is about; a cluster-wide
	// preflight finding names every host involved, separated by ", ", in inventory order;
	// "" for a doctor finding about the whole cluster.
	Host string
	// Peers are the other hosts involved (the sources of a path, the nodes a blocked port cuts
	// off); set by the host-network checks.
	Peers []string
	// Title is one line (doctor's headline; preflight prints Message instead).
	Title string
	// Message says what is wrong, with the host's actual values.
	Message string
	// Evidence are the facts it rests on, with their source.
	Evidence []Evidence
	// Fixes are the ways out, best first; Commands the exact commands that fix it by hand
	// (k3strap never runs them).
	Fixes    []string
	Commands []string
	// Ignored is true for a preflight error turned into a warning by
	// --ignore-preflight-errors.
	Ignored bool
	// Repair is set when `doctor --fix` can repair it.
	Repair *Repair
	// Source is the judge that produced it ("" until the judge stamps it).
	Source Source
}

// Fix is the fixes as one line ("" when there is none), for outputs with one fix field.
func (f Finding) Fix() string { return strings.Join(f.Fixes, "; ") }

// Hosts returns the host names a finding names (Host split at ", "; none for "").
func (f Finding) Hosts() []string {
	if f.Host == "" {
		return nil
	}
	return strings.Split(f.Host, ", ")
}

// String renders the finding like kubeadm, with the host: `[ERROR CloudController] cp1: msg`
// or `[WARNING Swap] w1: msg`.
func (f Finding) String() string {
	return fmt.Sprintf("[%s %s] %s: %s", strings.ToUpper(string(f.Severity)), f.ID, f.Host, f.Message)
}

// Fixes returns fix as a one-element list, or nil when it is "": for judges that give one fix.
func Fixes(fix string) []string {
	if fix == "" {
		return nil
	}
	return []string{fix}
}

// Worst returns the worst severity among fs ("" when fs is empty).
func Worst(fs []Finding) Severity {
	var w Severity
	for _, f := range fs {
		if w == "" || f.Severity.Rank() < w.Rank() {
			w = f.Severity
		}
	}
	if w != "" && w != Error && w != Warning {
		w = Info
	}
	return w
}

// Stamp sets Source on every finding of fs that has none, and returns fs.
func Stamp(fs []Finding, src Source) []Finding {
	for i := range fs {
		if fs[i].Source == "" {
			fs[i].Source = src
		}
	}
	return fs
}
