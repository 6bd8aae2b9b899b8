// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firewall

import (
	"net/netip"
	"slices"
	"strings"
)

// Kind is what a match looks at.
type Kind string

// Match kinds.
const (
	// KindProto: the layer-4 protocol (Strings: tcp, udp, icmp, ...; "all" matches any).
	KindProto Kind = "proto"
	// KindDPort and KindSPort: ports (Ports), for protocol Proto (tcp, udp, or "" for
	// nftables' transport header `th`, which any TCP or UDP packet has).
	KindDPort Kind = "dport"
	KindSPort Kind = "sport"
	// KindSAddr and KindDAddr: addresses (Prefixes).
	KindSAddr Kind = "saddr"
	KindDAddr Kind = "daddr"
	// KindIif and KindOif: interface names (Strings; a trailing * or + is a prefix match).
	KindIif Kind = "iif"
	KindOif Kind = "oif"
	// KindCtState: conntrack states (Strings: new, established, related, invalid, untracked,
	// dnat, snat).
	KindCtState Kind = "ctstate"
	// KindFamily: the IP family (Strings: ipv4, ipv6).
	KindFamily Kind = "family"
	// KindMark: the packet mark masked (Mark & Mask == Value in Ports[0][0]); packets k3strap
	// asks about enter with mark 0, and MARK rules on their way change it (Rule.SetMark).
	KindMark Kind = "mark"
	// KindAddrType: address type of the destination (Strings[0] "dst") or source ("src"),
	// Strings[1] the type (LOCAL, ...).
	KindAddrType Kind = "addrtype"
	// KindTrue always matches (a comment).
	KindTrue Kind = "true"
	// KindUnknown is a match the evaluator cannot decide (Desc says which).
	KindUnknown Kind = "unknown"
)

// Match is one condition of a rule.
type Match struct {
	Kind Kind
	// Neg inverts it (`!=`, iptables `!`).
	Neg      bool
	Proto    string
	Strings  []string
	Ports    [][2]int
	Prefixes []netip.Prefix
	Mark     uint32
	Mask     uint32
	// Desc describes an unknown match.
	Desc string
}

// tri is a three-valued truth.
type tri int

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

// matchAll is the conjunction of ms: false when any is false, unknown when any is unknown.
func matchAll(ms []Match, p Packet) tri {
	res := triTrue
	for _, m := range ms {
		switch m.eval(p) {
		case triFalse:
			return triFalse
		case triUnknown:
			res = triUnknown
		}
	}
	return res
}

func (m Match) eval(p Packet) tri {
	switch m.Kind {
	case KindDPort, KindSPort:
		// A port match implies its protocol (nftables adds the dependency; iptables needs -p),
		// negated or not.
		if !protoHasPorts(p.Proto) || (m.Proto != "" && m.Proto != p.Proto) {
			return triFalse
		}
	case KindSAddr, KindDAddr:
		// `ip saddr` in an inet table implies IPv4.
		for _, pf := range m.Prefixes {
			if pf.Addr().Is4() != (p.Family == 4) {
				return triFalse
			}
			break
		}
	}
	t := m.evalPlain(p)
	if m.Neg {
		return t.not()
	}
	return t
}

func protoHasPorts(proto string) bool { return proto == "tcp" || proto == "udp" }

func (m Match) evalPlain(p Packet) tri {
	switch m.Kind {
	case KindTrue:
		return triTrue
	case KindProto:
		for _, s := range m.Strings {
			if s == "all" || s == p.Proto {
				return triTrue
			}
		}
		return triFalse
	case KindDPort:
		return triOf(inPorts(m.Ports, p.DPort))
	case KindSPort:
		// The source port is one of a range (ephemeral): decided only when the match covers
		// all of it or none.
		lo, hi := p.sports()
		some := false
		for _, pr := range m.Ports {
			if pr[0] <= lo && hi <= pr[1] {
				return triTrue
			}
			if pr[1] >= lo && pr[0] <= hi {
				some = true
			}
		}
		if some {
			return triUnknown
		}
		return triFalse
	case KindSAddr:
		return inPrefixes(m.Prefixes, p.Src)
	case KindDAddr:
		return inPrefixes(m.Prefixes, p.Dst)
	case KindIif:
		return ifMatch(m.Strings, p.Iif)
	case KindOif:
		return ifMatch(m.Strings, p.Oif)
	case KindCtState:
		// The packets asked about open a flow: their state is new.
		return triOf(slices.Contains(m.Strings, "new"))
	case KindFamily:
		want := "ipv4"
		if p.Family == 6 {
			want = "ipv6"
		}
		return triOf(slices.Contains(m.Strings, want))
	case KindMark:
		want := uint32(0)
		if len(m.Ports) > 0 {
			want = uint32(m.Ports[0][0])
		}
		if p.markUnknown {
			return triUnknown
		}
		return triOf(p.Mark&m.Mask == want)
	case KindAddrType:
		if len(m.Strings) < 2 || !strings.EqualFold(m.Strings[1], "LOCAL") {
			return triUnknown
		}
		switch {
		case m.Strings[0] == "dst" && p.Hook == "input", m.Strings[0] == "src" && p.Hook == "output":
			return triTrue
		case m.Strings[0] == "dst" && p.Hook == "output" && p.Dst.IsValid() && !p.Dst.IsLoopback(),
			m.Strings[0] == "src" && p.Hook == "input" && p.Src.IsValid() && !p.Src.IsLoopback(),
			p.Hook == "forward":
			return triFalse
		}
		return triUnknown
	}
	return triUnknown
}

func inPorts(ranges [][2]int, port int) bool {
	for _, r := range ranges {
		if r[0] <= port && port <= r[1] {
			return true
		}
	}
	return false
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) tri {
	if !a.IsValid() {
		return triUnknown
	}
	for _, p := range ps {
		if p.Contains(a) {
			return triTrue
		}
	}
	return triFalse
}

// ifMatch matches interface names; iptables writes a prefix as eth+, nftables as eth*.
func ifMatch(pats []string, name string) tri {
	if name == "" {
		return triUnknown
	}
	for _, p := range pats {
		if base, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, base) {
			return triTrue
		}
		if base, ok := strings.CutSuffix(p, "+"); ok && strings.HasPrefix(name, base) {
			return triTrue
		}
		if p == name {
			return triTrue
		}
	}
	return triFalse
}

// lookup finds the verdict of a verdict map for p: the entry whose key matches; when the
// packet's key is unknown, Unknown (with the tri unknown).
func (vm *VerdictMap) lookup(p Packet) (Verdict, string, tri) {
	unknown := false
	for _, e := range vm.Entries {
		switch e.Key.eval(p) {
		case triTrue:
			return e.Verdict, e.Target, triTrue
		case triUnknown:
			unknown = true
		}
	}
	if unknown {
		return Continue, "", triUnknown
	}
	return Continue, "", triTrue
}
