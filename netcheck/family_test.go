// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"net/netip"
	"testing"

	"github.com/k3strap/k3strap/facts"
)

// TestNodeAddrFamily: without node-ip the node address is the default route's interface's
// address of the cluster's primary family (K3s's choice, docs/ipv6.md), whatever the
// inventory address's family; with Family unknown, the inventory address's family.
func TestNodeAddrFamily(t *testing.T) {
	dual := func() *facts.Network {
		n := &facts.Network{Interfaces: []facts.Interface{{Name: "eth0", Index: 2, MTU: 1500, Up: true, Addrs: []facts.IfAddr{
			{Prefix: netip.MustParsePrefix("10.0.0.5/24"), Scope: "global"},
			{Prefix: netip.MustParsePrefix("fd00::5/64"), Scope: "global"},
		}}}}
		n.Routes = []facts.NetRoute{
			{Family: 4, Dst: "default", Gateway: "10.0.0.1", Dev: "eth0"},
			{Family: 6, Dst: "default", Gateway: "fd00::1", Dev: "eth0"},
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		address string
		family  int
		nodeIP  []string
		want    string
	}{
		{"ipv6-only cluster, ipv4 inventory address", "10.0.0.5", 6, nil, "fd00::5"},
		{"ipv4-primary dual-stack, ipv6 inventory address", "fd00::5", 4, nil, "10.0.0.5"},
		{"family unknown (doctor): the inventory address's", "fd00::5", 0, nil, "fd00::5"},
		{"node-ip wins", "10.0.0.5", 6, []string{"10.0.0.5,fd00::5"}, "10.0.0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{Name: "n1", Address: netip.MustParseAddr(tc.address), Net: dual(), Family: tc.family, NodeIP: tc.nodeIP}
			if got, how := n.NodeAddr(); got.String() != tc.want {
				t.Errorf("NodeAddr = %s (%s), want %s", got, how, tc.want)
			}
			if tc.nodeIP == nil {
				if got, _, _ := n.FlannelAddr(); got.String() != tc.want {
					t.Errorf("FlannelAddr = %s, want %s", got, tc.want)
				}
			}
		})
	}
}
