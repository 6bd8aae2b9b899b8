// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// The IP-family checks of dual-stack and IPv6-only clusters (docs/ipv6.md). K3s refuses to
// start when cluster-cidr, service-cidr and node-ip do not use the same families ("cluster-cidr
// and node-ip must share the same IP version (IPv4, IPv6 or dual-stack)", k3s-io/k3s#11735;
// docs.k3s.io networking/basic-network-options "Dual-stack (IPv4 + IPv6) Networking"); a
// dual-stack cluster cannot be made from one first started IPv4-only.

// ipFamilies is an ordered list of IP families ("IPv4", "IPv6") of a comma-separated setting.
type ipFamilies []string

func (f ipFamilies) String() string {
	if len(f) == 0 {
		return "none"
	}
	return strings.Join(f, " + ")
}

// has reports whether fam is among f.
func (f ipFamilies) has(fam string) bool {
	for _, x := range f {
		if x == fam {
			return true
		}
	}
	return false
}

// sameSet reports whether f and g hold the same families (order aside).
func (f ipFamilies) sameSet(g ipFamilies) bool {
	return f.has("IPv4") == g.has("IPv4") && f.has("IPv6") == g.has("IPv6")
}

// familiesOf returns the families of a K3s list setting's entries (each may be
// comma-separated), prefixes when prefix, addresses otherwise; entries that do not parse are
// left to the inventory's validation.
func familiesOf(l inventory.StringList, prefix bool) ipFamilies {
	var out ipFamilies
	for _, e := range l {
		for _, s := range strings.Split(e, ",") {
			s = strings.TrimSpace(s)
			var a netip.Addr
			if prefix {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					continue
				}
				a = p.Addr()
			} else {
				var err error
				if a, err = netip.ParseAddr(s); err != nil {
					continue
				}
			}
			fam := "IPv4"
			if a.Unmap().Is6() {
				fam = "IPv6"
			}
			if !out.has(fam) {
				out = append(out, fam)
			}
		}
	}
	return out
}

// checkIPFamilies: the pod and service ranges use the same families; every host's node-ip
// (when set) lists one address of each family the cluster uses and no other; a host without
// node-ip has a global address of each family (K3s then picks one per family itself).
func checkIPFamilies(in *Input) []finding.Finding {
	c := in.Cluster
	fs := c.FirstServer()
	if fs == nil {
		return nil
	}
	first := c.HostConfig(fs)
	pods := familiesOf(first.ClusterCIDR, true)
	if len(pods) == 0 {
		pods = ipFamilies{"IPv4"}
	}
	svcs := familiesOf(first.ServiceCIDR, true)
	if len(svcs) == 0 {
		svcs = ipFamilies{"IPv4"}
	}
	where := configPath(c)
	var out []finding.Finding
	fix := fmt.Sprintf("give %s and %s the same families in the same order, e.g. cluster-cidr: 10.42.0.0/16,fd00:42::/56 and service-cidr: 10.43.0.0/16,fd00:43::/112 (dual-stack) — decide before the first start: K3s cannot turn an IPv4-only cluster into a dual-stack one", where(fs.Name, "cluster-cidr"), where(fs.Name, "service-cidr"))
	switch {
	case !pods.sameSet(svcs):
		out = append(out, errorf(fs.Name, fix,
			"cluster-cidr uses %s but service-cidr uses %s: K3s refuses to start with ranges of different IP families", pods, svcs))
	case pods[0] != svcs[0]:
		// Kubernetes takes each list's first family as its primary one; different primaries
		// start, but pods get an address of one family first and Services of the other.
		out = append(out, warnf(fs.Name, fix,
			"cluster-cidr lists %s first but service-cidr %s: pods and Services would have different primary IP families", pods[0], svcs[0]))
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		cfg := c.HostConfig(h)
		if len(cfg.NodeIP) > 0 {
			nip := familiesOf(cfg.NodeIP, false)
			if !nip.sameSet(pods) {
				out = append(out, errorf(h.Name,
					fmt.Sprintf("set %s to one address of each of %s (e.g. node-ip: [10.0.0.5, fd00::5]), or drop it and let K3s pick", where(h.Name, "node-ip"), pods),
					"node-ip uses %s but the cluster's cluster-cidr uses %s: K3s refuses to start (\"cluster-cidr and node-ip must share the same IP version\")", nip, pods))
			}
			continue
		}
		f := in.Facts[h.Name]
		if f == nil {
			continue
		}
		if missing := missingFamilies(f, pods); len(missing) > 0 {
			out = append(out, errorf(h.Name,
				fmt.Sprintf("give the host a global %s address (and a default route of that family), or set %s to the cluster's families", missing, where(h.Name, "node-ip")),
				"the cluster uses %s but the host has no global %s address: K3s cannot give the node an address of each family", pods, missing))
		}
	}
	return out
}

// missingFamilies returns the families of want the host has no global address of.
func missingFamilies(f *facts.Host, want ipFamilies) ipFamilies {
	have := familiesOf(inventory.StringList(f.Addresses), false)
	var out ipFamilies
	for _, fam := range want {
		if !have.has(fam) {
			out = append(out, fam)
		}
	}
	return out
}
