// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package netcheck judges the hosts' networks the way K3s will use them — the failures of
// docs/failure-modes.md "Host networks": paths between nodes on the ports K3s needs, host
// firewalls, NetworkManager and nm-cloud-setup, the node address on multi-homed hosts, path
// MTU below what the overlay needs, DNS the cluster cannot use, iptables in two backends.
//
// Preflight (before anything is installed, from facts and the path probes) and doctor (on a
// running cluster, from its evidence) call the same functions and so speak one vocabulary:
// every finding (finding.Finding, the one model of both) carries one of the check IDs below,
// the evidence it rests on with its source, and a fix that names the exact command or config
// key. The package does no I/O of its own; RunPaths drives the path probes through the
// runners its caller gives it.
package netcheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/k3s"
)

// The check IDs are checkid's host-network IDs (checkid.NodePaths, ...): one vocabulary for
// preflight (--ignore-preflight-errors) and doctor.
const (
	NodePaths        = checkid.NodePaths
	PathMTU          = checkid.PathMTU
	NodeAddress      = checkid.NodeAddress
	HostFirewall     = checkid.HostFirewall
	IptablesBackends = checkid.IptablesBackends
	NMCloudSetup     = checkid.NMCloudSetup
	NetworkManager   = checkid.NetworkManager
	ResolvConf       = checkid.ResolvConf
)

// IDs lists the check IDs in the order preflight runs them.
func IDs() []string {
	return []string{NodePaths, PathMTU, NodeAddress, HostFirewall, IptablesBackends, NMCloudSetup, NetworkManager, ResolvConf}
}

// Node is one host as the checks see it.
type Node struct {
	// Name is the inventory host name (or, in doctor without an inventory, the node name).
	Name string
	// Server is true for a K3s server.
	Server bool
	// Address is the address the inventory (or doctor's SSH target) names; invalid when it is
	// a DNS name.
	Address netip.Addr
	// Net is the host's gathered network facts (nil when not gathered).
	Net *facts.Network
	// NodeIP, FlannelIface and ResolvConfFlag are the node's K3s settings node-ip,
	// flannel-iface and resolv-conf (empty when unset).
	NodeIP         []string
	FlannelIface   string
	ResolvConfFlag string
	// Family is the cluster's primary IP family, 4 or 6: the first cluster-cidr's (K3s picks
	// the node's address of that family when node-ip is unset; docs/ipv6.md). 0 when unknown:
	// the inventory address's family is taken.
	Family int
	// Running is what a running K3s shows (doctor): nil before install.
	Running *Running
}

// primaryV6 reports whether K3s gives the node an IPv6 address first: the cluster's primary
// family, else the inventory address's.
func (n *Node) primaryV6() bool {
	if n.Family != 0 {
		return n.Family == 6
	}
	return n.Address.IsValid() && family(n.Address) == 6
}

// Running is what K3s did on a node that runs.
type Running struct {
	// InternalIP is the Node's InternalIP address.
	InternalIP netip.Addr
	// PublicIP is flannel's flannel.alpha.coreos.com/public-ip annotation (invalid when unset).
	PublicIP netip.Addr
	// VtepMAC is the VTEP MAC of flannel's backend-data annotation.
	VtepMAC string
	// Journal are the K3s unit's journal lines (for K3s's own warnings).
	Journal []string
}

// Cluster is what the checks judge.
type Cluster struct {
	Nodes []Node
	// Ports are the ports the nodes need between each other (k3s.NodePorts).
	Ports []k3s.NodePort
	// FlannelBackend is K3s's flannel-backend ("" vxlan; "none" when another CNI runs).
	FlannelBackend string
	// ClusterCIDRs and ServiceCIDRs are the pod and service ranges (K3s's defaults
	// 10.42.0.0/16 and 10.43.0.0/16 unless the inventory says otherwise).
	ClusterCIDRs, ServiceCIDRs []netip.Prefix
	// Extra are ports beyond K3s's (Rancher), From/To as in k3s.NodePort.
	Extra []k3s.NodePort
}

// Node returns the node called name (nil when absent).
func (c *Cluster) Node(name string) *Node {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i]
		}
	}
	return nil
}

// Overlay returns the first overlay port (k3s.NodePort.Overlay: 8472 VXLAN, 51820
// wireguard-native) and the backend's overhead; 0, 0 without one (host-gw, none).
func (c *Cluster) Overlay() (int, int) {
	for _, p := range c.Ports {
		if p.Overlay {
			return p.Port, k3s.OverlayOverhead(c.FlannelBackend)
		}
	}
	return 0, 0
}

// family returns 4 or 6 for an address.
func family(a netip.Addr) int {
	if a.Is4() || a.Is4In6() {
		return 4
	}
	return 6
}

// hostInterfaces turns gathered interfaces into k3s's view of them.
func hostInterfaces(n *facts.Network) []k3s.HostInterface {
	var out []k3s.HostInterface
	for i := range n.Interfaces {
		ifc := &n.Interfaces[i]
		hi := k3s.HostInterface{Name: ifc.Name}
		hi.Addrs = append(hi.Addrs, ifc.GlobalAddrs(4)...)
		hi.Addrs = append(hi.Addrs, ifc.GlobalAddrs(6)...)
		out = append(out, hi)
	}
	return out
}

// NodeAddr returns the address K3s gives the node (its InternalIP) and how it is chosen:
// the node-ip setting; else, from the facts, the address K3s picks itself (k3s.DefaultNodeIP);
// else the inventory address. A running node's InternalIP wins.
func (n *Node) NodeAddr() (netip.Addr, string) {
	if n.Running != nil && n.Running.InternalIP.IsValid() {
		return n.Running.InternalIP, "the node's InternalIP"
	}
	for _, s := range n.NodeIP {
		for _, f := range strings.Split(s, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(f)); err == nil {
				return a, "node-ip"
			}
		}
	}
	if n.Net != nil {
		v6 := n.primaryV6()
		if r := n.Net.DefaultRoute(familyOf(v6)); r != nil {
			if a, ok := k3s.DefaultNodeIP(hostInterfaces(n.Net), r.Dev, v6); ok {
				return a, fmt.Sprintf("the first address of %s, the default route's interface (node-ip unset)", r.Dev)
			}
		}
	}
	return n.Address, "the inventory address"
}

func familyOf(v6 bool) int {
	if v6 {
		return 6
	}
	return 4
}

// FlannelAddr returns the address other nodes send this node's VXLAN/WireGuard traffic to,
// the interface it is on, and how it is chosen: flannel's public-ip annotation on a running
// node; else flannel-iface's first address; else the default route's interface's
// (k3s.FlannelAddress).
func (n *Node) FlannelAddr() (netip.Addr, string, string) {
	if n.Running != nil && n.Running.PublicIP.IsValid() {
		iface := ""
		if n.Net != nil {
			if i := n.Net.InterfaceOf(n.Running.PublicIP); i != nil {
				iface = i.Name
			}
		}
		return n.Running.PublicIP, iface, "flannel's public-ip annotation"
	}
	if n.Net == nil {
		a, _ := n.NodeAddr()
		return a, "", "the node address"
	}
	v6 := n.primaryV6()
	def := ""
	if r := n.Net.DefaultRoute(familyOf(v6)); r != nil {
		def = r.Dev
	}
	a, iface, ok := k3s.FlannelAddress(hostInterfaces(n.Net), def, n.FlannelIface, v6)
	if !ok {
		na, _ := n.NodeAddr()
		return na, "", "the node address"
	}
	if n.FlannelIface != "" {
		return a, iface, "flannel-iface " + n.FlannelIface
	}
	return a, iface, fmt.Sprintf("the first address of %s, the default route's interface (flannel-iface unset)", iface)
}

// ProbeAddr is the address the other nodes reach n at on port p: flannel's address for the
// overlay's UDP port, the node address for everything else.
func (n *Node) ProbeAddr(p k3s.NodePort) netip.Addr {
	if p.Overlay {
		a, _, _ := n.FlannelAddr()
		return a
	}
	a, _ := n.NodeAddr()
	return a
}

// pathAddrs remembers, per node index and kind of port, the address a node's traffic on a
// port leaves with and other nodes reach it at (ProbeAddr; srcAddr is the same rule): working
// one out walks the host's interfaces and their addresses, and the loops over every path ask
// for each node once per peer and port. Not safe for concurrent use; one per loop.
type pathAddrs struct {
	c *Cluster
	m map[pathAddrKey]netip.Addr
	// idx maps a node's name to its index in c.Nodes (ofName).
	idx map[string]int
}

type pathAddrKey struct {
	node    int
	overlay bool
}

func newPathAddrs(c *Cluster) *pathAddrs {
	pa := &pathAddrs{c: c, m: map[pathAddrKey]netip.Addr{}, idx: make(map[string]int, len(c.Nodes))}
	for i := range c.Nodes {
		pa.idx[c.Nodes[i].Name] = i
	}
	return pa
}

// ofName is of for the node named name (the zero Addr for a name not in the cluster).
func (pa *pathAddrs) ofName(name string, p k3s.NodePort) netip.Addr {
	i, ok := pa.idx[name]
	if !ok {
		return netip.Addr{}
	}
	return pa.of(i, p)
}

// of returns c.Nodes[i].ProbeAddr(p), worked out once per node and kind of port.
func (pa *pathAddrs) of(i int, p k3s.NodePort) netip.Addr {
	k := pathAddrKey{i, p.Overlay}
	a, ok := pa.m[k]
	if !ok {
		a = pa.c.Nodes[i].ProbeAddr(p)
		pa.m[k] = a
	}
	return a
}

// names joins host names for messages.
func names(ns []string) string {
	ns = slices.Clone(ns)
	switch len(ns) {
	case 0:
		return ""
	case 1:
		return ns[0]
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}
