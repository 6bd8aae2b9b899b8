// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import "strings"

// Peers names the nodes on one side of a connection between nodes.
type Peers string

// Node sets.
const (
	AllNodes Peers = "all nodes"
	Servers  Peers = "servers"
	Agents   Peers = "agents"
)

// Has reports whether a node of role (server or agent) belongs to p.
func (p Peers) Has(server bool) bool {
	switch p {
	case Servers:
		return server
	case Agents:
		return !server
	}
	return true
}

// NodePort is a port that the nodes of a K3s cluster open to each other: the hosts in From
// connect to (or send datagrams to) the port on the hosts in To.
type NodePort struct {
	// Proto is "tcp" or "udp".
	Proto string
	Port  int
	// Purpose says what uses it, for messages ("flannel VXLAN").
	Purpose  string
	From, To Peers
	// Overlay marks flannel's encapsulation port (VXLAN, WireGuard): the other nodes send it
	// to the node's flannel address, and its packets carry the overlay's overhead.
	Overlay bool
}

// NodePortOptions are the settings that decide which ports a cluster's nodes need between
// each other.
type NodePortOptions struct {
	// FlannelBackend is K3s's flannel-backend: vxlan (also when ""), host-gw,
	// wireguard-native, or none (another CNI, whose ports are not K3s's).
	FlannelBackend string
	// IPv6 says the cluster CIDR has an IPv6 range (wireguard-native then also uses 51821).
	IPv6 bool
	// EmbeddedEtcd says the servers run embedded etcd as a cluster (more than one server,
	// or cluster-init).
	EmbeddedEtcd bool
	// EmbeddedRegistry is the embedded-registry setting (Spegel).
	EmbeddedRegistry bool
}

// NodePorts returns the ports the nodes of a cluster with o need between each other, in the
// order of docs.k3s.io "Requirements → Inbound Rules for K3s Nodes" (docs/k3s.md#ports):
//
//   - TCP 6443 from agents to servers (the supervisor and the Kubernetes API);
//   - TCP 10250 between all nodes (the kubelet: logs, exec, metrics);
//   - UDP 8472 between all nodes with the vxlan backend, UDP 51820 (and 51821 with IPv6)
//     with wireguard-native;
//   - TCP 2379 and 2380 between servers with embedded etcd;
//   - TCP 5001 and TCP 6443 between all nodes with the embedded registry.
//
// host-gw needs no port of its own (it routes, so the nodes must share a layer-2 network).
func NodePorts(o NodePortOptions) []NodePort {
	out := []NodePort{
		{Proto: "tcp", Port: 6443, Purpose: "K3s supervisor and Kubernetes API", From: Agents, To: Servers},
		{Proto: "tcp", Port: 10250, Purpose: "kubelet (logs, exec, metrics)", From: AllNodes, To: AllNodes},
	}
	switch strings.ToLower(o.FlannelBackend) {
	case "", "vxlan":
		out = append(out, NodePort{Proto: "udp", Port: 8472, Purpose: "flannel VXLAN", From: AllNodes, To: AllNodes, Overlay: true})
	case "wireguard-native", "wireguard":
		out = append(out, NodePort{Proto: "udp", Port: 51820, Purpose: "flannel wireguard-native (IPv4)", From: AllNodes, To: AllNodes, Overlay: true})
		if o.IPv6 {
			out = append(out, NodePort{Proto: "udp", Port: 51821, Purpose: "flannel wireguard-native (IPv6)", From: AllNodes, To: AllNodes, Overlay: true})
		}
	}
	if o.EmbeddedEtcd {
		out = append(out,
			NodePort{Proto: "tcp", Port: 2379, Purpose: "embedded etcd (clients)", From: Servers, To: Servers},
			NodePort{Proto: "tcp", Port: 2380, Purpose: "embedded etcd (peers)", From: Servers, To: Servers})
	}
	if o.EmbeddedRegistry {
		out = append(out,
			NodePort{Proto: "tcp", Port: 5001, Purpose: "embedded registry (Spegel)", From: AllNodes, To: AllNodes},
			NodePort{Proto: "tcp", Port: 6443, Purpose: "embedded registry (Spegel) through the supervisor port", From: AllNodes, To: AllNodes})
	}
	return out
}

// OverlayOverhead is how many bytes flannel's encapsulation adds to every pod packet: VXLAN 50
// (outer IPv4, UDP, VXLAN and inner Ethernet headers), wireguard-native 80; 0 for host-gw and
// unknown backends. Flannel sets the pod interfaces' MTU to the MTU of the interface it uses
// minus this (FLANNEL_MTU in /run/flannel/subnet.env: 1450 on a 1500-byte link), so every path
// between nodes must carry packets of the full interface MTU (docs/failure-modes.md).
func OverlayOverhead(backend string) int {
	switch strings.ToLower(backend) {
	case "", "vxlan":
		return 50
	case "wireguard-native", "wireguard":
		return 80
	}
	return 0
}
