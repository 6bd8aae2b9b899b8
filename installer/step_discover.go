// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// discoverStep finds the cluster's nodes that no given host is (doctor --ssh) and reaches them
// by their InternalIP with the SSH settings of the first host given (user, port, key, the jump
// host), then gathers their evidence. With an inventory it only names the nodes the inventory
// does not declare.
//
// Reads: s.doctor.view, nodeOf, req. Writes: new hostStates in s.hosts, their evidence.
type discoverStep struct{}

func (discoverStep) Phase() events.Phase { return events.PhaseDiscover }

func (discoverStep) Summary() string {
	return "find the cluster's other nodes (InternalIP) and reach them with the same SSH settings (doctor --ssh)"
}

func (discoverStep) Run(ctx context.Context, s *session) error {
	ds := s.doctor
	em := s.in.emitter(events.PhaseDiscover)
	known := map[string]bool{}
	for _, n := range ds.nodeOf {
		if n != "" {
			known[n] = true
		}
	}
	// Roles of the hosts given, from their nodes.
	for _, hs := range s.hosts {
		if n := ds.nodeOf[hs.host.Name]; n != "" && ds.req.Discover {
			hs.host.Role = roleOfNode(nodeNamed(ds.view.Nodes, n))
		}
	}
	var missing []corev1.Node
	for _, n := range ds.view.Nodes {
		if !known[n.Name] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !ds.req.Discover {
		for _, n := range missing {
			em.Info(n.Name, "node "+n.Name+" is not in the inventory (not gathered)")
		}
		return nil
	}
	em.Started(fmt.Sprintf("reaching %d more nodes found in the cluster", len(missing)))
	tmpl := s.discoverTemplate(ctx)
	var added []*hostState
	for _, n := range missing {
		addr := internalIP(n)
		if addr == "" {
			em.Warn(n.Name, "node "+n.Name+" has no InternalIP: not reached")
			continue
		}
		h := &inventory.Host{Name: n.Name, Address: addr, Role: roleOfNode(&n), SSH: tmpl}
		hs := &hostState{host: h, selected: true}
		s.hosts = append(s.hosts, hs)
		added = append(added, hs)
	}
	s.connect(ctx, added)
	s.doctorEvidence(ctx, added)
	em.Finished(events.StatusOK, "")
	return ctx.Err()
}

// discoverTemplate returns the SSH settings discovered nodes get: those the first given host
// was reached with (user, port, key; its jump host as bastion).
func (s *session) discoverTemplate(ctx context.Context) inventory.SSH {
	var src *hostState
	for _, hs := range s.hosts {
		if hs.c() != nil && hs.connErr == nil {
			src = hs
			break
		}
	}
	if src == nil {
		return inventory.SSH{}
	}
	exp := s.in.cluster.HostSSHExplicit(src.host)
	e, err := s.resolveEndpoint(src.host.Address, exp, 0)
	if err != nil {
		return src.host.SSH
	}
	out := inventory.SSH{User: e.user, Port: e.port, KeyPath: e.keyPath, KnownHosts: e.knownHosts}
	// The jump hosts, first hop first: one is a bastion, several are bastions.
	var hops []inventory.Bastion
	for j := e.jump; j != nil; j = j.jump {
		hops = append([]inventory.Bastion{{Address: j.address, User: j.user, Port: j.port, KeyPath: j.keyPath}}, hops...)
	}
	switch {
	case len(hops) == 1:
		out.Bastion = &hops[0]
	case len(hops) > 1:
		out.Bastions = hops
	}
	return out
}

func nodeNamed(nodes []corev1.Node, name string) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

// roleOfNode is server for a node with the control-plane role label, else agent.
func roleOfNode(n *corev1.Node) inventory.Role {
	if n != nil {
		if _, ok := n.Labels[k3s.LabelControlPlane]; ok {
			return inventory.RoleServer
		}
		if _, ok := n.Labels[k3s.LabelMaster]; ok {
			return inventory.RoleServer
		}
	}
	return inventory.RoleAgent
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address) != nil {
			return a.Address
		}
	}
	return ""
}
