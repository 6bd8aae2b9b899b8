// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"bufio"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// HostInterface is a host's interface as K3s's address choice sees it: its name and its
// global unicast addresses in the kernel's order.
type HostInterface struct {
	Name  string
	Addrs []netip.Addr
}

// DefaultNodeIP is the address K3s registers a node with when node-ip is not set: the first
// global unicast address (IPv4 unless v6) of the interface that holds the default route
// (k3s-io/k3s pkg/util GetHostnameAndIPs → k8s.io/apimachinery/pkg/util/net
// ChooseHostInterface; docs/failure-modes.md "The wrong node address"). false when the
// default route's interface has no such address.
func DefaultNodeIP(ifaces []HostInterface, defaultIface string, v6 bool) (netip.Addr, bool) {
	for _, i := range ifaces {
		if i.Name != defaultIface {
			continue
		}
		for _, a := range i.Addrs {
			if a.Is4() != v6 {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// FlannelAddress is the address flannel announces as the node's public-ip (where the other
// nodes send VXLAN or WireGuard traffic) and its interface: the first address of the
// flannel-iface interface when set, else of the default route's interface — flannel does not
// follow node-ip (k3s-io/k3s pkg/agent/flannel/flannel.go LookupExtInterface; K3s only sets
// the interface from flannel-iface). false when that interface has no address of the family.
func FlannelAddress(ifaces []HostInterface, defaultIface, flannelIface string, v6 bool) (netip.Addr, string, bool) {
	name := flannelIface
	if name == "" {
		name = defaultIface
	}
	a, ok := DefaultNodeIP(ifaces, name, v6)
	return a, name, ok
}

// ResolvConfCandidates are the resolver files K3s's agent tries, in order, when resolv-conf
// is not set (k3s-io/k3s pkg/agent/config locateOrGenerateResolvConf; docs/k3s.md#dns).
var ResolvConfCandidates = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// ResolvConfFallback is the nameserver K3s writes into a resolver file of its own
// (DATA_DIR/agent/etc/resolv.conf, by default /var/lib/rancher/k3s/agent/etc/resolv.conf) when
// no candidate is usable; the kubelet then gives it to every pod with dnsPolicy Default,
// CoreDNS among them, so cluster DNS forwards everything to it.
const (
	ResolvConfFallback     = "8.8.8.8"
	ResolvConfFallbackFile = "/var/lib/rancher/k3s/agent/etc/resolv.conf"
)

var nameserverLine = regexp.MustCompile(`^nameserver\s+([^\s]*)`)

// UsableResolvConf applies K3s's rule to a resolver file's text: usable when it has at least
// one nameserver line and every nameserver is a global unicast IP address (not loopback —
// systemd-resolved's 127.0.0.53, dnsmasq's 127.0.0.1 —, not link-local, not multicast, not
// unspecified). It returns the nameservers and, when unusable, why.
func UsableResolvConf(text string) (nameservers []string, why string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	bad := ""
	for sc.Scan() {
		m := nameserverLine.FindStringSubmatch(sc.Text())
		if len(m) != 2 {
			continue
		}
		nameservers = append(nameservers, m[1])
		ip := net.ParseIP(m[1])
		if (ip == nil || !ip.IsGlobalUnicast()) && bad == "" {
			bad = m[1]
		}
	}
	switch {
	case len(nameservers) == 0:
		return nil, "no nameserver line", false
	case bad != "":
		return nameservers, "nameserver " + bad + " is not a global unicast address", false
	}
	return nameservers, "", true
}
