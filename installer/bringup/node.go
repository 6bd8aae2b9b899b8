// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// NodeWait judges the wait for one joining (or restarted) node, seen through the first
// server's API: done once the node is Ready by a kubelet of this start, carries its declared
// labels and taints (a node this run created), has its flannel lease (a node this run created
// on a cluster whose embedded flannel runs), runs the wanted version and — a server of an HA
// cluster — is an etcd member. Make it with a Deadline; its zero Why is "not registered yet".
type NodeWait struct {
	// Host is the node's host in the inventory; Service its K3s unit (for the fix).
	Host    *inventory.Host
	Service string
	// WantEtcd requires the etcd member label (a server of an HA cluster); Version, when not
	// "", the kubelet version (an upgrade).
	WantEtcd bool
	Version  string
	// Declared requires the declared labels and taints: they are K3s's to set at registration,
	// so only a node this run created must carry them; drift on an existing node is the
	// reconcile step's (node-taint alone never changes a registered node,
	// docs/failure-modes.md F5).
	Declared bool
	// WantFlannel requires flannel's lease on the node (k3s.AnnotationFlannelKubeSubnetManager):
	// Ready comes before the node's flannel has written its subnet.env, so a node this run
	// created on a cluster whose embedded flannel runs (inventory.Cluster.EmbeddedFlannel) is
	// not done at Ready alone (docs/k3s.md "Join gates"). A node that existed keeps its
	// annotation across restarts, so the requirement is only made of new nodes.
	WantFlannel bool
	// Since is the earliest Ready heartbeat that counts (Since of the unit's (re)start; zero:
	// no restart, any Ready counts).
	Since time.Time
	// Excluded: a host kept out of the CNI (kernelPolicy exclude) on a cluster whose CNI
	// k3strap deploys has no pod network and may stay NotReady: registering is enough.
	Excluded bool
	// Taints are the host's declared taints (inventory.Cluster.HostTaints, their one home).
	Taints []inventory.Taint
	// Deadline bounds the wait (Deadline, from when it began).
	Deadline Deadline

	// why is what the node lacked at the last look it was listed at.
	why string
}

// NodeVerdict is the judgement of one look at the node.
type NodeVerdict struct {
	// Kind is Up, Waiting, Lost or TimedOut.
	Kind Kind
	// Message (Up) is what to say of the node; Why (Waiting) what it still lacks.
	Message, Why string
	// Err (Lost, TimedOut) is the wait's error, naming the node and what it lacked.
	Err error
}

// Why is what the node lacked at the last look it was listed at ("not registered yet" before).
func (nw *NodeWait) Why() string {
	if nw.why == "" {
		return "not registered yet"
	}
	return nw.why
}

// Observe judges one look at the node at now: n is the node as listed (nil: not registered),
// listed whether the list succeeded (a failed list leaves what is known unchanged), lost the
// node's host's connection's cause when it was found dead (nil otherwise).
func (nw *NodeWait) Observe(n *corev1.Node, listed bool, lost error, now time.Time) NodeVerdict {
	if listed && n != nil {
		if nw.Excluded {
			return NodeVerdict{Kind: Up, Message: "node registered (excluded from the CNI: Ready not required)"}
		}
		why := nw.Lacks(n)
		if why == "" {
			msg := "node Ready"
			if nw.Version != "" {
				msg += " on " + nw.Version
			}
			return NodeVerdict{Kind: Up, Message: msg}
		}
		nw.why = why
	}
	if lost != nil {
		return NodeVerdict{Kind: Lost, Why: nw.Why(), Err: fmt.Errorf("node %s not ready: %w (its node: %s)", nw.Host.Name, lost, nw.Why())}
	}
	if nw.Deadline.Passed(now) {
		return NodeVerdict{Kind: TimedOut, Why: nw.Why(), Err: fmt.Errorf("node %s not ready after %s: %s (see `journalctl -u %s` on the host)", nw.Host.Name, nw.Deadline.Timeout, nw.Why(), nw.Service)}
	}
	return NodeVerdict{Kind: Waiting, Why: nw.Why()}
}

// Lacks says what node n still lacks, "" when it is done: Ready by a kubelet whose heartbeat
// is fresh since Since (Fresh; zero accepts any), the kubelet Version when not "", the
// declared labels and Taints (inventory.Cluster.HostTaints) when Declared, flannel's lease
// when WantFlannel, the etcd member label when WantEtcd.
func (nw *NodeWait) Lacks(n *corev1.Node) string {
	ready, stale := false, false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
			stale = !Fresh(c.LastHeartbeatTime.Time, nw.Since)
		}
	}
	if !ready {
		return "not Ready"
	}
	if stale {
		return "Ready only from before the restart (no heartbeat since)"
	}
	if nw.Version != "" && n.Status.NodeInfo.KubeletVersion != nw.Version {
		return fmt.Sprintf("still on %s, not %s", n.Status.NodeInfo.KubeletVersion, nw.Version)
	}
	if nw.Declared {
		for k, v := range nw.Host.Labels {
			if n.Labels[k] != v {
				return fmt.Sprintf("label %s=%s missing", k, v)
			}
		}
		for _, t := range nw.Taints {
			found := false
			for _, nt := range n.Spec.Taints {
				if nt.Key == t.Key && nt.Value == t.Value && nt.Effect == t.Effect {
					found = true
				}
			}
			if !found {
				return "taint " + t.String() + " missing"
			}
		}
	}
	if nw.WantFlannel && n.Annotations[k3s.AnnotationFlannelKubeSubnetManager] != "true" {
		return "flannel has not registered the node yet (no " + k3s.AnnotationFlannelKubeSubnetManager + " annotation: its pod network is not up)"
	}
	if nw.WantEtcd && n.Labels[k3s.LabelEtcd] != "true" {
		return "not an etcd member yet"
	}
	return ""
}
