// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	_ "embed"
	"net/netip"

	"github.com/k3strap/k3strap/firewall"
	"github.com/k3strap/k3strap/k3s"
)

// networkScript is network.sh: the network sections of the facts document (interfaces,
// routes, flannel's VXLAN entries, rulesets, firewalld, ufw, NetworkManager, resolver files).
// gather.sh runs it as root; the doctor's node script runs it too (DoctorNodeScript).
//
//go:embed network.sh
var networkScript string

// NetworkScript is network.sh with the host paths it reads (k3s.ShellVars) before it: what
// the facts script and the doctor's node script run with `sh -c` (as root where they can).
func NetworkScript() string { return k3s.ShellVars() + networkScript }

// Network is what network.sh gathered from one host: what the host-network checks of
// preflight and doctor judge (docs/failure-modes.md "Host networks").
type Network struct {
	// Interfaces are the host's network interfaces with their addresses (`ip -j -d addr`).
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Routes are the main table's routes, IPv4 then IPv6 (`ip -j route`).
	Routes []NetRoute `json:"routes,omitempty"`
	// FDB and Neighbors are flannel's VXLAN forwarding and neighbour entries (flannel.1):
	// one FDB entry (VTEP MAC → the peer's public IP) and one neighbour entry per peer node.
	FDB       []FDBEntry `json:"fdb,omitempty"`
	Neighbors []Neighbor `json:"neighbors,omitempty"`
	// Ruleset is the host's packet filter: nftables, iptables-nft, iptables-legacy (nil when
	// none could be read, e.g. without root). RulesetRead lists what was read ("nftables",
	// "iptables-nft ip", ...).
	Ruleset     *firewall.Ruleset `json:"ruleset,omitempty"`
	RulesetRead []string          `json:"rulesetRead,omitempty"`
	// LegacyTables says iptables-legacy-save printed tables (the legacy backend is in use
	// even if its chains hold no rule).
	LegacyTables bool `json:"legacyTables,omitempty"`
	// IptablesVersion is `iptables --version` ("iptables v1.8.9 (nf_tables)").
	IptablesVersion string `json:"iptablesVersion,omitempty"`
	// Firewalld is firewalld's state and zones (nil: no firewall-cmd).
	Firewalld *Firewalld `json:"firewalld,omitempty"`
	// UFW is `ufw status verbose` (nil: no ufw).
	UFW *UFW `json:"ufw,omitempty"`
	// NetworkManager is NetworkManager's and nm-cloud-setup's state.
	NetworkManager NetworkManager `json:"networkManager"`
	// Resolv are the resolver files K3s may use, in the order network.sh read them.
	Resolv []ResolvFile `json:"resolv,omitempty"`
	// ProbeTools are the interpreters found for the path check (perl, python3).
	ProbeTools []string `json:"probeTools,omitempty"`
	// Errors are network sections that could not be read (the rest still counts).
	Errors []string `json:"errors,omitempty"`
}

// Interface is one network interface.
type Interface struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	MTU   int    `json:"mtu"`
	Up    bool   `json:"up"`
	MAC   string `json:"mac,omitempty"`
	// Kind is the link type (veth, vxlan, bridge, wireguard, ...; "" for plain devices).
	Kind  string   `json:"kind,omitempty"`
	Addrs []IfAddr `json:"addrs,omitempty"`
	// VXLAN is set for a VXLAN device (flannel.1): its VNI, local address, port and parent.
	VXLAN *VXLANInfo `json:"vxlan,omitempty"`
}

// IfAddr is an address of an interface with its prefix and scope (global, link, host).
type IfAddr struct {
	Prefix netip.Prefix `json:"prefix"`
	Scope  string       `json:"scope"`
}

// VXLANInfo is a VXLAN device's configuration.
type VXLANInfo struct {
	ID    int    `json:"id"`
	Local string `json:"local,omitempty"`
	Port  int    `json:"port"`
	Link  string `json:"link,omitempty"`
}

// NetRoute is one route of the main table.
type NetRoute struct {
	// Family is 4 or 6.
	Family int `json:"family"`
	// Dst is "default" or a prefix.
	Dst     string `json:"dst"`
	Gateway string `json:"gateway,omitempty"`
	Dev     string `json:"dev,omitempty"`
	Metric  int    `json:"metric,omitempty"`
	PrefSrc string `json:"prefsrc,omitempty"`
}

// FDBEntry is a bridge forwarding entry of a VXLAN device: frames for MAC go to Dst.
type FDBEntry struct {
	Dev string `json:"dev"`
	MAC string `json:"mac"`
	Dst string `json:"dst"`
}

// Neighbor is a neighbour (ARP) entry.
type Neighbor struct {
	Dev   string   `json:"dev"`
	Dst   string   `json:"dst"`
	MAC   string   `json:"mac,omitempty"`
	State []string `json:"state,omitempty"`
}

// ResolvFile is a resolver file K3s may use.
type ResolvFile struct {
	Path    string `json:"path"`
	Present bool   `json:"present"`
	// Link is the symlink target when Path is a symlink.
	Link string `json:"link,omitempty"`
	Text string `json:"text,omitempty"`
}

// Resolv returns the file at path (nil when not gathered).
func (n *Network) ResolvFile(path string) *ResolvFile {
	for i := range n.Resolv {
		if n.Resolv[i].Path == path {
			return &n.Resolv[i]
		}
	}
	return nil
}

// Interface returns the interface called name (nil when absent).
func (n *Network) Interface(name string) *Interface {
	for i := range n.Interfaces {
		if n.Interfaces[i].Name == name {
			return &n.Interfaces[i]
		}
	}
	return nil
}

// InterfaceOf returns the interface that holds address a (nil when no interface does).
func (n *Network) InterfaceOf(a netip.Addr) *Interface {
	for i := range n.Interfaces {
		for _, ad := range n.Interfaces[i].Addrs {
			if ad.Prefix.Addr() == a {
				return &n.Interfaces[i]
			}
		}
	}
	return nil
}

// DefaultRoute returns the default route of family 4 or 6 with the lowest metric (nil when
// the host has none).
func (n *Network) DefaultRoute(family int) *NetRoute {
	var best *NetRoute
	for i := range n.Routes {
		r := &n.Routes[i]
		if r.Family != family || r.Dst != "default" || r.Dev == "" {
			continue
		}
		if best == nil || r.Metric < best.Metric {
			best = r
		}
	}
	return best
}

// GlobalAddrs returns the interface's global unicast addresses of family 4 or 6, in the
// order the kernel lists them.
func (i *Interface) GlobalAddrs(family int) []netip.Addr {
	var out []netip.Addr
	for _, a := range i.Addrs {
		ad := a.Prefix.Addr()
		if (family == 4) != ad.Is4() || !ad.IsGlobalUnicast() || a.Scope == "host" || a.Scope == "link" {
			continue
		}
		out = append(out, ad)
	}
	return out
}

// RouteTo returns the route the host's main table uses for a: the longest matching prefix,
// a default route last (nil when none matches).
func (n *Network) RouteTo(a netip.Addr) *NetRoute {
	fam := 4
	if a.Is6() && !a.Is4In6() {
		fam = 6
	}
	var best *NetRoute
	bestBits := -1
	for i := range n.Routes {
		r := &n.Routes[i]
		if r.Family != fam {
			continue
		}
		bits := 0
		if r.Dst != "default" {
			p, err := netip.ParsePrefix(r.Dst)
			if err != nil {
				if ad, err2 := netip.ParseAddr(r.Dst); err2 == nil {
					p = netip.PrefixFrom(ad, ad.BitLen())
				} else {
					continue
				}
			}
			if !p.Contains(a) {
				continue
			}
			bits = p.Bits()
		}
		if bits > bestBits || (bits == bestBits && best != nil && r.Metric < best.Metric) {
			best, bestBits = r, bits
		}
	}
	return best
}
