// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// What a host's firewalld and ufw allow (the semantics the host-network checks ask;
// netcheck.HostFirewalls): zones, services, ports and sources. network_parse.go reads them.

// Firewalld is firewalld's state (`firewall-cmd --state`) and zones (`--list-all-zones`).
type Firewalld struct {
	// State is what --state printed ("running", "not running").
	State       string          `json:"state"`
	DefaultZone string          `json:"defaultZone,omitempty"`
	Zones       []FirewalldZone `json:"zones,omitempty"`
}

// Running reports whether firewalld runs.
func (f *Firewalld) Running() bool { return f != nil && f.State == "running" }

// Zone returns the zone called name (nil when absent).
func (f *Firewalld) Zone(name string) *FirewalldZone {
	for i := range f.Zones {
		if f.Zones[i].Name == name {
			return &f.Zones[i]
		}
	}
	return nil
}

// ZoneOf returns the zone that handles traffic from source address src arriving on
// interface iface, by firewalld's rule: a zone bound to a source prefix containing src wins,
// then the zone bound to the interface, then the default zone.
func (f *Firewalld) ZoneOf(src netip.Addr, iface string) *FirewalldZone {
	if f == nil {
		return nil
	}
	for i := range f.Zones {
		for _, s := range f.Zones[i].Sources {
			if p, err := netip.ParsePrefix(s); err == nil && src.IsValid() && p.Contains(src) {
				return &f.Zones[i]
			}
			if a, err := netip.ParseAddr(s); err == nil && a == src {
				return &f.Zones[i]
			}
		}
	}
	for i := range f.Zones {
		if slices.Contains(f.Zones[i].Interfaces, iface) {
			return &f.Zones[i]
		}
	}
	return f.Zone(f.DefaultZone)
}

// FirewalldZone is one zone of `firewall-cmd --list-all-zones`.
type FirewalldZone struct {
	Name       string   `json:"name"`
	Default    bool     `json:"default,omitempty"`
	Active     bool     `json:"active,omitempty"`
	Target     string   `json:"target,omitempty"`
	Interfaces []string `json:"interfaces,omitempty"`
	Sources    []string `json:"sources,omitempty"`
	Services   []string `json:"services,omitempty"`
	Ports      []string `json:"ports,omitempty"`
	Protocols  []string `json:"protocols,omitempty"`
	RichRules  []string `json:"richRules,omitempty"`
}

// Allows reports whether the zone lets proto/port in by its target (ACCEPT, trusted), its
// ports or protocols, or one of the services firewalld ships for K3s's ports
// (firewalld's services/*.xml); rich rules are not read (the ruleset decides then).
func (z *FirewalldZone) Allows(proto string, port int) bool {
	if z.Target == "ACCEPT" {
		return true
	}
	if slices.Contains(z.Protocols, proto) {
		return true
	}
	for _, p := range z.Ports {
		rng, pr, ok := strings.Cut(p, "/")
		if !ok || pr != proto {
			continue
		}
		lo, hi, _ := strings.Cut(rng, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		if hi != "" {
			b, _ = strconv.Atoi(hi)
		}
		if err1 == nil && a <= port && port <= b {
			return true
		}
	}
	for _, s := range z.Services {
		for _, sp := range firewalldServices[s] {
			if sp.proto == proto && sp.port == port {
				return true
			}
		}
	}
	return false
}

type protoPort struct {
	proto string
	port  int
}

// firewalldServices are the services firewalld ships that open ports K3s uses
// (firewalld/config/services: kube-apiserver.xml, kubelet.xml, etcd-client.xml,
// etcd-server.xml, http.xml, https.xml).
var firewalldServices = map[string][]protoPort{
	"kube-apiserver": {{"tcp", 6443}},
	"kubelet":        {{"tcp", 10250}},
	"etcd-client":    {{"tcp", 2379}},
	"etcd-server":    {{"tcp", 2380}},
	"http":           {{"tcp", 80}},
	"https":          {{"tcp", 443}},
	"ssh":            {{"tcp", 22}},
}

// UFW is `ufw status verbose` (ufw(8)).
type UFW struct {
	// Status is "active" or "inactive".
	Status string `json:"status"`
	// Default policies: "deny", "allow", "reject" or "disabled" (routed).
	DefaultIncoming string    `json:"defaultIncoming,omitempty"`
	DefaultOutgoing string    `json:"defaultOutgoing,omitempty"`
	DefaultRouted   string    `json:"defaultRouted,omitempty"`
	Rules           []UFWRule `json:"rules,omitempty"`
}

// Active reports whether ufw is on.
func (u *UFW) Active() bool { return u != nil && u.Status == "active" }

// UFWRule is one rule line: To, Action (ALLOW IN, DENY IN, ...), From.
type UFWRule struct {
	To     string `json:"to"`
	Action string `json:"action"`
	From   string `json:"from"`
}
