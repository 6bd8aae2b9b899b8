// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/netcheck"
)

// The host-network checks (docs/failure-modes.md "Host networks"): netcheck judges and its
// findings are preflight's as they are (info left out), under the same IDs doctor uses.

// netChecks returns the host-network checks in netcheck.IDs order.
func netChecks() []Check {
	judge := map[string]func(in *Input, c *netcheck.Cluster) []finding.Finding{
		netcheck.NodePaths: func(in *Input, c *netcheck.Cluster) []finding.Finding {
			if in.Paths == nil {
				// no path check ran: the rulesets alone
				return netcheck.FirewallPaths(c, nil)
			}
			return netcheck.Paths(c, in.Paths)
		},
		netcheck.PathMTU: func(in *Input, c *netcheck.Cluster) []finding.Finding { return netcheck.Paths(c, in.Paths) },
		netcheck.NodeAddress: func(in *Input, c *netcheck.Cluster) []finding.Finding {
			return netcheck.NodeAddresses(c, configPath(in.Cluster))
		},
		netcheck.HostFirewall:     func(_ *Input, c *netcheck.Cluster) []finding.Finding { return netcheck.HostFirewalls(c) },
		netcheck.IptablesBackends: func(_ *Input, c *netcheck.Cluster) []finding.Finding { return netcheck.IptablesBackendsUsed(c) },
		netcheck.NMCloudSetup: func(in *Input, c *netcheck.Cluster) []finding.Finding {
			return netcheck.NetworkManagers(c, cniInterfaces(in.Cluster))
		},
		netcheck.NetworkManager: func(in *Input, c *netcheck.Cluster) []finding.Finding {
			return netcheck.NetworkManagers(c, cniInterfaces(in.Cluster))
		},
		netcheck.ResolvConf: func(in *Input, c *netcheck.Cluster) []finding.Finding {
			return netcheck.ResolvConfs(c, in.Cluster.Spec.K3s.Install == inventory.Airgap, configPath(in.Cluster))
		},
	}
	var out []Check
	for _, id := range netcheck.IDs() {
		fn := judge[id]
		out = append(out, check{id: id, run: func(in *Input) []finding.Finding {
			var fs []finding.Finding
			for _, r := range fn(in, NetCluster(in)) {
				if r.ID != id || r.Severity == finding.Info {
					continue
				}
				fs = append(fs, r)
			}
			return fs
		}})
	}
	return out
}

// configPath names where a host's K3s config key is set: spec.hosts[i].k3s.config.KEY.
func configPath(c *inventory.Cluster) func(host, key string) string {
	return func(host, key string) string {
		for i, h := range c.Spec.Hosts {
			if h.Name == host {
				p := fmt.Sprintf("spec.hosts[%d].k3s.config.%s", i, key)
				if c.Source != "" {
					p += " in " + c.Source
				}
				return p
			}
		}
		return "spec.k3s.config." + key
	}
}

// cniInterfaces are the interfaces the pod network creates on every node, which
// NetworkManager must leave alone (docs.rke2.io Known Issues → NetworkManager lists
// Calico's and flannel's).
func cniInterfaces(c *inventory.Cluster) []string {
	t, b := cniChoice(c)
	switch t {
	case inventory.CNIFlannel, inventory.CNIFlannelStandalone:
		if strings.EqualFold(b, "none") {
			return nil
		}
		return []string{"cni0", "flannel*"}
	case inventory.CNICalico:
		return []string{"cali*", "tunl*", "vxlan.calico", "vxlan-v6.calico", "wireguard.cali"}
	}
	return nil
}

// NetCluster is what the host-network checks judge, built from the inventory and the
// gathered facts: every host with facts (the others cannot be judged), K3s's node ports for
// the cluster's settings (k3s.NodePorts), the CNI's, Rancher's, and the pod and service
// ranges. The path check step probes exactly its PlanProbes.
func NetCluster(in *Input) *netcheck.Cluster {
	c := in.Cluster
	t, backend := cniChoice(c)
	opt := k3s.NodePortOptions{FlannelBackend: backend}
	if t != inventory.CNIFlannel && t != inventory.CNIFlannelStandalone {
		opt.FlannelBackend = "none"
	}
	_, opt.IPv6 = clusterFamilies(c)
	var first inventory.K3sConfig
	if fs := c.FirstServer(); fs != nil {
		first = c.HostConfig(fs)
	}
	opt.EmbeddedEtcd = len(c.Servers()) > 1 || inventory.IsTrue(first.ClusterInit)
	opt.EmbeddedRegistry = inventory.IsTrue(first.EmbeddedRegistry)
	nc := &netcheck.Cluster{Ports: k3s.NodePorts(opt), FlannelBackend: opt.FlannelBackend}
	if t == inventory.CNICalico {
		if enc := strings.ToLower(backend); strings.HasPrefix(enc, "vxlan") {
			nc.Extra = append(nc.Extra, k3s.NodePort{Proto: "udp", Port: 4789, Purpose: "Calico VXLAN", From: k3s.AllNodes, To: k3s.AllNodes})
		} else if strings.HasPrefix(enc, "ipip") || enc == "none" {
			nc.Extra = append(nc.Extra, k3s.NodePort{Proto: "tcp", Port: 179, Purpose: "Calico BGP", From: k3s.AllNodes, To: k3s.AllNodes})
		}
	}
	if r := c.Spec.Rancher; r != nil && r.Install != nil {
		// Rancher's UI and API come in through the ingress on every node (ServiceLB), and
		// the nodes' agents reach it there (Rancher docs, port requirements for the Rancher
		// server on K3s).
		nc.Extra = append(nc.Extra, k3s.NodePort{Proto: "tcp", Port: 443, Purpose: "Rancher UI and API (ingress)", From: k3s.AllNodes, To: k3s.AllNodes})
	}
	pods, svcs := c.ClusterCIDRs()
	for _, s := range pods {
		if p, err := netip.ParsePrefix(s); err == nil {
			nc.ClusterCIDRs = append(nc.ClusterCIDRs, p.Masked())
		}
	}
	for _, s := range svcs {
		if p, err := netip.ParsePrefix(s); err == nil {
			nc.ServiceCIDRs = append(nc.ServiceCIDRs, p.Masked())
		}
	}
	family := 4 // K3s's default cluster-cidr is IPv4
	if len(nc.ClusterCIDRs) > 0 && nc.ClusterCIDRs[0].Addr().Is6() {
		family = 6
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		f := in.Facts[h.Name]
		if f == nil {
			continue
		}
		cfg := c.HostConfig(h)
		n := netcheck.Node{Name: h.Name, Server: h.Role == inventory.RoleServer, Net: f.Network,
			NodeIP: cfg.NodeIP, FlannelIface: cfg.FlannelIface, ResolvConfFlag: c.ResolvConf(h), Family: family}
		n.Address, _ = netip.ParseAddr(h.Address)
		nc.Nodes = append(nc.Nodes, n)
	}
	return nc
}
