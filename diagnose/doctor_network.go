// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"encoding/json"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/netcheck"
)

// Flannel's node annotations (flannel-io/flannel pkg/subnet/kube): the address the other
// nodes send this node's overlay traffic to, and the backend's data (the VTEP MAC for VXLAN).
const (
	annFlannelPublicIP    = "flannel.alpha.coreos.com/public-ip"
	annFlannelBackendData = "flannel.alpha.coreos.com/backend-data"
)

// checkNetwork: the host-network checks preflight runs before an install (package netcheck;
// docs/failure-modes.md "Host networks"), on a running cluster's evidence and under the same
// IDs: node ports a host's ruleset drops, with the nodes it cuts off and flannel's own state
// (NodePaths); pod traffic a host drops (HostFirewall); the node's InternalIP and flannel
// public-ip against its interfaces (NodeAddress); both iptables backends in use;
// nm-cloud-setup and NetworkManager; the resolver file the kubelet got (ResolvConf). Path MTU
// needs probes between the hosts: preflight measures it, doctor does not.
func checkNetwork(in *Input) []finding.Finding {
	c := in.netCluster()
	if c == nil {
		return nil
	}
	var rs []finding.Finding
	rs = append(rs, netcheck.FirewallPaths(c, nil)...)
	rs = append(rs, netcheck.HostFirewalls(c)...)
	rs = append(rs, netcheck.NodeAddresses(c, configKey)...)
	rs = append(rs, netcheck.IptablesBackendsUsed(c)...)
	if c.FlannelBackend != "none" {
		rs = append(rs, netcheck.NetworkManagers(c, []string{"cni0", "flannel*"})...)
	} else {
		rs = append(rs, netcheck.NetworkManagers(c, nil)...)
	}
	rs = append(rs, netcheck.ResolvConfs(c, false, configKey)...)
	return rs
}

// configKey names a K3s config key on a node for fixes.
func configKey(node, key string) string {
	return key + " in " + node + "'s /etc/rancher/k3s/config.yaml (or the inventory's hosts[].k3s.config), then restart K3s there"
}

// netCluster builds what the network checks judge from the evidence: every node of the
// cluster view (its InternalIP and flannel annotations), with the network facts of those
// doctor reached; K3s's node ports for the servers' settings. nil when no node's network
// facts were gathered.
func (in *Input) netCluster() *netcheck.Cluster {
	gathered := false
	for _, ne := range in.Nodes {
		if ne.Facts != nil && ne.Facts.Network != nil {
			gathered = true
		}
	}
	if !gathered || len(in.View.Nodes) == 0 {
		return nil
	}
	c := &netcheck.Cluster{}
	opt := k3s.NodePortOptions{FlannelBackend: k3s.DefaultFlannelBackend}
	etcd := 0
	pods, svcs := []string{k3s.DefaultClusterCIDR}, []string{k3s.DefaultServiceCIDR}
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		if n.Labels[k3s.LabelEtcd] == "true" {
			etcd++
		}
		if !isServer(n) {
			continue
		}
		args := in.nodeArgs(n.Name)
		if v, ok := lastValue(args, "flannel-backend"); ok {
			opt.FlannelBackend = v
		}
		if v, ok := lastValue(args, "embedded-registry"); ok && v != "false" {
			opt.EmbeddedRegistry = true
		}
		if v := splitList(args["cluster-cidr"]); len(v) > 0 {
			pods = v
		}
		if v := splitList(args["service-cidr"]); len(v) > 0 {
			svcs = v
		}
	}
	opt.EmbeddedEtcd = etcd > 1
	for _, s := range pods {
		if p, err := netip.ParsePrefix(s); err == nil {
			c.ClusterCIDRs = append(c.ClusterCIDRs, p.Masked())
			opt.IPv6 = opt.IPv6 || p.Addr().Is6()
		}
	}
	for _, s := range svcs {
		if p, err := netip.ParsePrefix(s); err == nil {
			c.ServiceCIDRs = append(c.ServiceCIDRs, p.Masked())
		}
	}
	c.Ports = k3s.NodePorts(opt)
	c.FlannelBackend = opt.FlannelBackend
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		args := in.nodeArgs(n.Name)
		nd := netcheck.Node{Name: n.Name, Server: isServer(n), NodeIP: splitList(args["node-ip"]), Running: nodeRunning(n)}
		nd.FlannelIface, _ = lastValue(args, "flannel-iface")
		if v, ok := lastValue(args, "resolv-conf"); ok {
			nd.ResolvConfFlag = v
		} else if v, ok := k3s.ArgValue(args["kubelet-arg"], "resolv-conf"); ok {
			nd.ResolvConfFlag = v
		}
		if ne := in.evidenceOf(n.Name); ne != nil {
			nd.Net = ne.Facts.Network
			nd.Running.Journal = ne.Facts.Journal
			nd.Address, _ = netip.ParseAddr(ne.Address)
		}
		c.Nodes = append(c.Nodes, nd)
	}
	return c
}

func isServer(n *corev1.Node) bool {
	_, cp := n.Labels[k3s.LabelControlPlane]
	_, m := n.Labels[k3s.LabelMaster]
	return cp || m
}

// nodeRunning is what the Node object shows of K3s's and flannel's choices.
func nodeRunning(n *corev1.Node) *netcheck.Running {
	r := &netcheck.Running{}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && !r.InternalIP.IsValid() {
				r.InternalIP = ip
			}
		}
	}
	r.PublicIP, _ = netip.ParseAddr(n.Annotations[annFlannelPublicIP])
	var bd struct{ VtepMAC string }
	if json.Unmarshal([]byte(n.Annotations[annFlannelBackendData]), &bd) == nil {
		r.VtepMAC = bd.VtepMAC
	}
	return r
}

func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
