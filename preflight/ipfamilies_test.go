// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"testing"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
)

func TestIPFamilies(t *testing.T) {
	cidrs := func(pods, svcs string) *inventory.Cluster {
		c := cp1w1()
		c.Spec.K3s.Config.ClusterCIDR = inventory.StringList{pods}
		c.Spec.K3s.Config.ServiceCIDR = inventory.StringList{svcs}
		return c
	}
	dual := func() *inventory.Cluster { return cidrs("10.42.0.0/16,fd00:42::/56", "10.43.0.0/16,fd00:43::/112") }
	v6only := func() *inventory.Cluster { return cidrs("fd00:42::/56", "fd00:43::/112") }
	dualAddrs := func(_ string, f *facts.Host) { f.Addresses = []string{"10.0.0.10", "fd00::10"} }
	v6Addrs := func(_ string, f *facts.Host) { f.Addresses = []string{"fd00::10"} }
	nodeIP := func(c *inventory.Cluster, host string, ips ...string) *inventory.Cluster {
		for i := range c.Spec.Hosts {
			if c.Spec.Hosts[i].Name == host {
				c.Spec.Hosts[i].K3s.Config.NodeIP = inventory.StringList(ips)
			}
		}
		return c
	}
	runCases(t, "IPFamilies", []checkCase{
		{"ipv4 defaults", input(cp1w1(), nil), nil},
		{"dual-stack, hosts with both families", input(dual(), dualAddrs), nil},
		{"ipv6-only, hosts with ipv6", input(v6only(), v6Addrs), nil},
		{"dual-stack node-ip with both", input(nodeIP(dual(), "w1", "10.0.0.11", "fd00::11"), dualAddrs), nil},
		{"dual-stack node-ip comma form", input(nodeIP(dual(), "w1", "10.0.0.11,fd00::11"), dualAddrs), nil},
		{"service-cidr lacks ipv6", input(cidrs("10.42.0.0/16,fd00:42::/56", "10.43.0.0/16"), dualAddrs), []want{
			errW("cp1", "cluster-cidr uses IPv4 + IPv6 but service-cidr uses IPv4").withFix("service-cidr: 10.43.0.0/16,fd00:43::/112", "fd00:43::/112", "first start"),
		}},
		{"service-cidr unset on ipv6-only", input(cidrs("fd00:42::/56", ""), v6Addrs), []want{
			errW("cp1", "cluster-cidr uses IPv6 but service-cidr uses IPv4"),
		}},
		{"primary family differs", input(cidrs("10.42.0.0/16,fd00:42::/56", "fd00:43::/112,10.43.0.0/16"), dualAddrs), []want{
			warnW("cp1", "cluster-cidr lists IPv4 first but service-cidr IPv6", "different primary IP families"),
		}},
		{"node-ip lacks ipv6", input(nodeIP(dual(), "w1", "10.0.0.11"), dualAddrs), []want{
			errW("w1", "node-ip uses IPv4 but the cluster's cluster-cidr uses IPv4 + IPv6", "must share the same IP version").withFix("spec.hosts[1].k3s.config.node-ip", "IPv4 + IPv6"),
		}},
		{"node-ip ipv4 on ipv6-only", input(nodeIP(v6only(), "cp1", "10.0.0.10"), v6Addrs), []want{
			errW("cp1", "node-ip uses IPv4 but the cluster's cluster-cidr uses IPv6"),
		}},
		{"host without ipv6 on dual-stack", input(dual(), func(n string, f *facts.Host) {
			if n == "cp1" {
				dualAddrs(n, f)
			}
		}), []want{
			errW("w1", "the cluster uses IPv4 + IPv6 but the host has no global IPv6 address").withFix("global IPv6 address", "spec.hosts[1].k3s.config.node-ip"),
		}},
		{"ipv4-only host on ipv6-only cluster", input(v6only(), only("cp1", func(f *facts.Host) { v6Addrs("", f) })), []want{
			errW("w1", "no global IPv6 address"),
		}},
	})
}
