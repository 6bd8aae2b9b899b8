// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// TestDiscoverNodeHelpers: a node's role comes from its control-plane (or older master) label,
// its address from the first InternalIP that parses; nodes are found by name.
func TestDiscoverNodeHelpers(t *testing.T) {
	node := func(name string, labels map[string]string, addrs ...corev1.NodeAddress) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	nodes := []corev1.Node{
		node("cp1", map[string]string{k3s.LabelControlPlane: "true"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "cp1"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "not-an-ip"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}),
		node("old", map[string]string{k3s.LabelMaster: "true"}),
		node("w1", map[string]string{"tier": "one"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.7"}),
	}
	for name, want := range map[string]inventory.Role{"cp1": inventory.RoleServer, "old": inventory.RoleServer, "w1": inventory.RoleAgent, "gone": inventory.RoleAgent} {
		if got := roleOfNode(nodeNamed(nodes, name)); got != want {
			t.Errorf("%s: role %s, want %s", name, got, want)
		}
	}
	if n := nodeNamed(nodes, "w1"); n == nil || n != &nodes[2] {
		t.Errorf("nodeNamed(w1) = %v, want the list's own element", n)
	}
	for name, want := range map[string]string{"cp1": "10.0.0.1", "old": "", "w1": ""} {
		if got := internalIP(*nodeNamed(nodes, name)); got != want {
			t.Errorf("%s: internal IP %q, want %q", name, got, want)
		}
	}
}
