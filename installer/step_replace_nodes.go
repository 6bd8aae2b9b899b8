// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
)

// replaceNodesStep makes replacing a machine one apply: a host of the run without K3s whose name is
// already a node of the cluster at another address is a new machine for that node. The old
// node is deleted first (K3s removes a server's etcd member with it, and the node password
// secret that would refuse the new machine goes too), with the same live-majority refusal as
// remove-node; then the join steps join the new machine under the same name.
//
// Reads: fresh hosts' facts and plans; the cluster's nodes. Writes: deletes replaced nodes in the
// cluster.
type replaceNodesStep struct{}

func (replaceNodesStep) Phase() events.Phase { return events.PhaseReplaceNodes }

func (replaceNodesStep) Summary() string {
	return "a host without K3s whose node exists at another address replaces it: delete the old node (and etcd member) before the join"
}

func (st replaceNodesStep) Run(ctx context.Context, s *session) error {
	for _, name := range s.replacements(ctx) {
		s.in.emitter(events.PhaseReplaceNodes).Info(name, "new machine for node "+name+": removing the old node first")
		if err := s.removeNode(ctx, name, false); err != nil {
			return err
		}
	}
	return nil
}

// Preview names the nodes that would be replaced.
func (replaceNodesStep) Preview(ctx context.Context, s *session) error {
	for _, name := range s.replacements(ctx) {
		if _, err := s.removalTarget(ctx, name); err != nil {
			return err
		}
		s.in.emitter(events.PhaseReplaceNodes).Info(name, "would delete the old node "+name+" (and its etcd member) and join the new machine")
	}
	return nil
}

// replacements are the hosts of the run (not the first server) with no K3s installed whose
// node exists in the cluster at another InternalIP.
func (s *session) replacements(ctx context.Context) []string {
	if s.first == nil || s.first.c() == nil || s.first.facts == nil || !s.first.facts.K3s.Installed() {
		return nil
	}
	var candidates []*hostState
	for _, hs := range s.hosts {
		if hs != s.first && hs.plan != nil && hs.facts != nil && hs.fresh {
			candidates = append(candidates, hs)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	var nodes []corev1.Node
	err := s.first.withAPI(ctx, func(a *kube.API) (err error) {
		nodes, err = a.ListNodes(ctx)
		return err
	})
	if err != nil {
		return nil
	}
	var out []string
	for _, hs := range candidates {
		for i := range nodes {
			if nodes[i].Name == hs.host.Name && nodeIP(&nodes[i]) != "" && nodeIP(&nodes[i]) != hs.host.Address {
				out = append(out, hs.host.Name)
			}
		}
	}
	return out
}
