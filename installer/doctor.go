// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/installer/remote"
)

// `k3strap doctor` (docs/doctor.md): diagnose a K3s cluster that already runs,
// whoever installed it. Steps: connect → cluster-view → evidence → discover → findings → fix →
// bundle (Steps("doctor")). Read-only unless --fix, which applies only the safe, reversible
// repairs (lost taints and labels, read-modify-write as apply --reconcile-taints).

// doctorState is the doctor command's state on the session.
type doctorState struct {
	mu  sync.Mutex
	req DoctorRequest
	// view is the cluster view; viewHost the host it was read through (nil when none
	// answered); viewErr why not.
	view     facts.ClusterView
	viewHost *hostState
	viewErr  string
	// nodes is what the evidence step gathered, by host name.
	nodes map[string]*diagnose.NodeEvidence
	// nodeOf maps host name → node name.
	nodeOf   map[string]string
	findings []finding.Finding
	report   DoctorReport
}

// doctorGather runs the node script on hs (one SSH command) and records its evidence.
func (s *session) doctorGather(ctx context.Context, hs *hostState) {
	ds := s.doctor
	em := s.in.emitter(events.PhaseEvidence)
	ne := &diagnose.NodeEvidence{Host: hs.host.Name, Address: hs.host.Address}
	defer func() {
		ds.mu.Lock()
		ds.nodes[hs.host.Name] = ne
		ds.mu.Unlock()
	}()
	if hs.c() == nil || hs.connErr != nil {
		ne.Err = errText(hs.connErr)
		return
	}
	sent := time.Now()
	res, err := hs.c().Run(ctx, remote.Script("gather doctor evidence", facts.DoctorNodeScript, facts.DoctorNodeArgs()...).AsRoot())
	received := time.Now()
	if err == nil && res.ExitCode != 0 && len(res.Stdout) == 0 {
		err = &remote.CommandError{Host: hs.host.Name, Command: "doctor evidence", ExitCode: res.ExitCode, Stderr: strings.TrimSpace(string(res.Stderr))}
	}
	if err != nil {
		ne.Err = err.Error()
		hs.setResult(events.StatusFailed, "evidence: "+err.Error())
		em.Step(hs.host.Name, "evidence", events.StatusFailed, err.Error())
		return
	}
	f := facts.ParseDoctorNode(res.Stdout)
	ne.Facts = &f
	f.SetClockSkew(sent, received) // preflight's rule (facts.Host)
	ne.ClockSkew = f.ClockSkew
	k := "no K3s"
	if f.K3s.BinaryVersion != "" {
		k = "K3s " + f.K3s.BinaryVersion
	}
	if f.Unit != "" {
		k += fmt.Sprintf(" (%s %s, %d restarts)", f.Unit, f.ActiveState, f.Restarts)
	}
	em.Step(hs.host.Name, "evidence", events.StatusOK, fmt.Sprintf("%s: %s, %d journal lines, %d certificates", f.Hostname, k, len(f.Journal), len(f.Certs)))
}

// matchNode returns the node of the cluster view that host hs is: the same name, an address
// of the node equal to the host's address or one of its addresses, or its hostname.
func (ds *doctorState) matchNode(hs *hostState, f *facts.DoctorNode) string {
	addrs := map[string]bool{hs.host.Address: true}
	if c := hs.c(); c != nil {
		if h, _, ok := strings.Cut(c.Address(), ":"); ok && !strings.HasPrefix(c.Address(), "[") {
			addrs[h] = true
		}
	}
	if f != nil {
		for _, a := range f.Addresses {
			addrs[a] = true
		}
	}
	for _, n := range ds.view.Nodes {
		if n.Name == hs.host.Name {
			return n.Name
		}
	}
	for _, n := range ds.view.Nodes {
		for _, a := range n.Status.Addresses {
			if addrs[a.Address] || (f != nil && a.Address == f.Hostname) {
				return n.Name
			}
		}
		if f != nil && f.Hostname != "" && n.Name == f.Hostname {
			return n.Name
		}
	}
	return ""
}
