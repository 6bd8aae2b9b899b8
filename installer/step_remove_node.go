// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// removeNodeStep removes the nodes `k3strap remove-node NAME...` names (see removeNode).
//
// Reads: s.day2.remove; the cluster's nodes. Writes: removes the nodes; host results.
type removeNodeStep struct{}

func (removeNodeStep) Phase() events.Phase { return events.PhaseRemoveNode }

func (removeNodeStep) Summary() string {
	return "drain, stop, delete the node (a server's etcd member goes with it) and uninstall K3s; refused without a live etcd majority left"
}

func (removeNodeStep) Run(ctx context.Context, s *session) error {
	for _, name := range s.d2().remove {
		if err := s.removeNode(ctx, name, true); err != nil {
			return err
		}
		if s.in.cluster.Host(name) != nil {
			s.in.emitter(events.PhaseRemoveNode).Warn(name, name+" is still in the inventory: the next `k3strap apply` joins it again — remove it from "+s.in.cluster.Source)
		}
	}
	return nil
}

// Preview says what would be removed, after the same refusals.
func (removeNodeStep) Preview(ctx context.Context, s *session) error {
	for _, name := range s.d2().remove {
		if _, err := s.removalTarget(ctx, name); err != nil {
			return err
		}
		s.in.emitter(events.PhaseRemoveNode).Info(name, "would drain "+name+", stop K3s there, delete its Node (and etcd member) and uninstall K3s")
	}
	return nil
}

// removal is a node about to be removed.
type removal struct {
	node *corev1.Node
	// hs is the node's host (from the inventory, or connected at the node's InternalIP when
	// it is no longer listed); nil when it cannot be reached.
	hs     *hostState
	server bool
}

func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// removalTarget finds the node and checks that removing it is safe.
func (s *session) removalTarget(ctx context.Context, name string) (*removal, error) {
	if s.first == nil || s.first.c() == nil {
		return nil, errNoServer(events.PhaseRemoveNode)
	}
	if name == s.first.host.Name {
		return nil, &Failure{Kind: KindInvalid, Phase: events.PhaseRemoveNode, Host: name, Info: events.ErrorInfo{
			Message: name + " is the inventory's first server: k3strap reads and changes the cluster through it",
			Fix:     "list another server first in the inventory, apply, then remove " + name,
		}}
	}
	var nodes []corev1.Node
	err := s.first.withAPI(ctx, func(a *kube.API) (err error) {
		nodes, err = a.ListNodes(ctx)
		return err
	})
	if err != nil {
		return nil, s.hostFailure(s.first, "nodes", KindInstall, fmt.Errorf("listing nodes: %w", err))
	}
	var r removal
	var members []string
	for i := range nodes {
		n := &nodes[i]
		if n.Name == name {
			r.node = n
		}
		if n.Labels[k3s.LabelEtcd] == "true" {
			members = append(members, n.Name)
		}
	}
	if r.node == nil {
		return nil, &Failure{Kind: KindInvalid, Phase: events.PhaseRemoveNode, Host: name, Info: events.ErrorInfo{
			Message: name + " is not a node of the cluster", Fix: "`k3s kubectl get nodes` on the first server lists them"}}
	}
	r.server = r.node.Labels[k3s.LabelControlPlane] == "true" || r.node.Labels[k3s.LabelEtcd] == "true"
	if hs := s.state(name); hs != nil && hs.host.Address == nodeIP(r.node) {
		r.hs = hs
	}
	if r.node.Labels[k3s.LabelEtcd] != "true" {
		return &r, nil
	}
	// The members left must keep a live majority: a member is live when its host is in this
	// run, reachable, and its K3s service active.
	var left, live, down []string
	for _, m := range members {
		if m == name {
			continue
		}
		left = append(left, m)
		if hs := s.state(m); hs != nil && hs.serviceActive(ctx) {
			live = append(live, m)
		} else {
			down = append(down, m)
		}
	}
	if !liveMajority(len(left), len(live)) {
		return nil, &Failure{Kind: KindInstall, Phase: events.PhaseRemoveNode, Host: name, Info: events.ErrorInfo{
			Message: fmt.Sprintf("removing %s would leave %d etcd members (%s) of which only %d run (%s down): no live majority — etcd would lose quorum",
				name, len(left), strings.Join(left, ", "), len(live), strings.Join(down, ", ")),
			Fix:    "bring the servers that are down back first (or remove them while the others run), then remove " + name,
			Resume: "re-run the same command once the servers run",
		}}
	}
	return &r, nil
}

// removeNode drains name, stops K3s on its host, deletes its Node (K3s removes a server's
// etcd member with it) and the node password secret, and uninstalls K3s there when the host
// is reachable (connect: also when it is no longer in the inventory, at the node's address).
func (s *session) removeNode(ctx context.Context, name string, connect bool) error {
	r, err := s.removalTarget(ctx, name)
	if err != nil {
		return err
	}
	em := s.in.emitter(events.PhaseRemoveNode)
	if r.hs == nil && connect {
		if ip := nodeIP(r.node); ip != "" {
			role := inventory.RoleAgent
			if r.server {
				role = inventory.RoleServer
			}
			hs := &hostState{host: &inventory.Host{Name: name, Address: ip, Role: role}}
			s.connect(ctx, []*hostState{hs})
			if hs.connErr == nil && hs.c() != nil {
				r.hs = hs
				s.onClose(func() { _ = hs.c().Close() })
			}
		}
	}
	kc, err := s.first.api(ctx)
	if err != nil {
		return s.hostFailure(s.first, "delete node", KindInstall, err)
	}
	if err := kc.Drain(ctx, name, 120*time.Second); err != nil {
		em.Warn(name, "drain did not finish ("+firstLine(err)+"); removing anyway")
	} else {
		em.Step(name, "drain", events.StatusChanged, "cordoned and drained")
	}
	if r.hs != nil {
		if _, err := r.hs.systemctl(ctx, "stop"); err != nil {
			em.Warn(name, "could not stop K3s: "+firstLine(err))
		}
	}
	if err := kc.DeleteNode(ctx, name, nodeDeleteTimeout); err != nil {
		why := ""
		if r.server {
			why = " (a server's Node goes only once K3s has removed its etcd member: see `journalctl -u k3s` on " + s.first.host.Name + ")"
		}
		return s.hostFailure(s.first, "delete node", KindInstall, fmt.Errorf("deleting node %s%s: %w", name, why, err))
	}
	_ = kc.DeleteSecret(ctx, "kube-system", name+".node-password.k3s")
	what := "Node deleted"
	if r.server {
		what = "Node and etcd member deleted"
	}
	em.Step(name, "delete", events.StatusChanged, what)
	if r.hs == nil {
		em.Warn(name, "host not reachable: K3s was not uninstalled there — run k3s-uninstall.sh on it before it comes back")
		return nil
	}
	if _, err := r.hs.c().Check(ctx, remoteReset()); err != nil {
		em.Warn(name, "uninstall failed: "+firstLine(err))
		return nil
	}
	r.hs.setResult(events.StatusChanged, "removed from the cluster, K3s uninstalled")
	em.Step(name, "uninstall", events.StatusChanged, "K3s uninstalled")
	return nil
}

// nodeDeleteTimeout bounds the deletion of a Node. A server's Node waits for K3s to remove its
// etcd member first: 47 s for K3s v1.36.3 on the 2-core test machines under load.
const nodeDeleteTimeout = 3 * time.Minute

// orphans returns the cluster's nodes that are not in the inventory, sorted.
func (s *session) orphans(nodes map[string]*corev1.Node) []string {
	var out []string
	for name := range nodes {
		if s.in.cluster.Host(name) == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// reportOrPrune is apply's handling of nodes that are no longer in the inventory: reported
// (nothing changes), or removed with --prune. Only when the run covers every host. nodes is
// the cluster's node list by name (nil when it could not be read: nothing to report).
func (s *session) reportOrPrune(ctx context.Context, nodes map[string]*corev1.Node) error {
	if len(s.in.opts.Hosts) > 0 || s.first == nil || s.first.c() == nil {
		return nil
	}
	names := s.orphans(nodes)
	if len(names) == 0 {
		return nil
	}
	em := s.in.emitter(events.PhaseReconcileNodes)
	for _, n := range names {
		if !s.in.opts.Prune {
			em.Warn(n, fmt.Sprintf("%s is a node of the cluster but not in the inventory: left as it is (`k3strap apply --prune` or `k3strap remove-node %s` removes it)", n, n))
			continue
		}
		if s.in.opts.DryRun {
			if _, err := s.removalTarget(ctx, n); err != nil {
				return err
			}
			em.Info(n, "would remove "+n+" (--prune): drain, delete the node and its etcd member, uninstall K3s")
			continue
		}
		if err := s.removeNode(ctx, n, true); err != nil {
			return err
		}
	}
	return nil
}

// liveMajority reports whether live running members are a majority of the left members etcd
// would have (etcd needs more than half of its members to work; docs.k3s.io "High
// Availability Embedded etcd"). No member left is no majority.
func liveMajority(left, live int) bool { return left > 0 && live > left/2 }
