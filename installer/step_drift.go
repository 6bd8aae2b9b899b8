// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/drift"
)

// driftStep is `k3strap check`: it compares every selected node's taints and labels with the
// inventory through the first server and reports drift per node, changing nothing. It fails
// with KindDrift when any node differs. Without gathered facts it cannot tell which hosts
// kernelPolicy exclude keeps out of the CNI, so cni.ExcludedLabel is only judged under strict
// (where it must be absent). See docs/failure-modes.md (F5).
//
// Reads: hostState.selected; the cluster's nodes. Writes: host results.
type driftStep struct{}

func (driftStep) Phase() events.Phase { return events.PhaseDrift }

func (driftStep) Summary() string {
	return "compare every node's taints and labels with the inventory; change nothing"
}

func (driftStep) Run(ctx context.Context, s *session) error {
	c := s.in.cluster
	fs := s.first
	em := s.in.emitter(events.PhaseDrift)
	em.Started(fmt.Sprintf("comparing the taints and labels of %d nodes with %s", len(s.hosts), orFile(c.Source)))
	byName, err := s.nodesByName(ctx)
	if err != nil {
		return s.hostFailure(fs, "check", KindInstall, err)
	}
	var drifted []string
	for _, hs := range s.hosts {
		if !hs.selected {
			hs.setResult(events.StatusSkipped, "not selected")
			continue
		}
		nd := drift.Diff(byName[hs.host.Name], s.desired(hs))
		for _, t := range nd.ForeignTaints {
			em.Info(hs.host.Name, "taint "+t.String()+" is not in the inventory and was not put there by k3strap (left alone)")
		}
		if !nd.Drifted() {
			em.Step(hs.host.Name, "drift", events.StatusOK, "taints and labels match the inventory")
			hs.setResult(events.StatusOK, "no drift")
			continue
		}
		drifted = append(drifted, hs.host.Name)
		msg := "drift: " + strings.Join(nd.Describe(), "; ")
		em.Step(hs.host.Name, "drift", events.StatusFailed, msg)
		hs.setResult(events.StatusFailed, msg)
	}
	if len(drifted) == 0 {
		em.Finished(events.StatusOK, "no drift")
		return nil
	}
	em.Finished(events.StatusFailed, fmt.Sprintf("%d node(s) differ from the inventory", len(drifted)))
	return &Failure{Kind: KindDrift, Phase: events.PhaseDrift, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%d node(s) differ from the inventory: %s", len(drifted), strings.Join(drifted, ", ")),
		Fix:     "run `k3strap apply --reconcile-taints -f " + orFile(c.Source) + "` to repair (read-modify-write; K3s's own node.kubernetes.io/* and node.cloudprovider.kubernetes.io/* taints are never touched)",
		Resume:  "then `k3strap check` again",
	}}
}

func orFile(p string) string {
	if p == "" {
		return "FILE"
	}
	return p
}
