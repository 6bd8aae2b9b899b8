// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firewall

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// ParseNft reads `nft -j list ruleset` (libnftables' JSON schema 1, as nftables 0.9.3 and
// later print it; https://manpages.debian.org/nft/libnftables-json.5) into chains. Tables in
// skip ("family name", e.g. "ip filter") are left out: the caller reads those from
// iptables-nft-save instead. Rules keep their handle; Text is the rule in nft syntax as far as
// the evaluator understands it. An empty document is an empty ruleset.
func ParseNft(doc []byte, skip map[string]bool) ([]*Chain, error) {
	if strings.TrimSpace(string(doc)) == "" {
		return nil, nil
	}
	var top struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("nft -j list ruleset: %w", err)
	}
	type key struct{ family, table, name string }
	chains := map[key]*Chain{}
	var order []*Chain
	sets := map[key]json.RawMessage{}
	var rules []nftRule
	for _, obj := range top.Nftables {
		switch {
		case obj["chain"] != nil:
			var c struct {
				Family, Table, Name, Type, Hook, Policy string
				Prio                                    json.RawMessage
			}
			if err := json.Unmarshal(obj["chain"], &c); err != nil {
				return nil, fmt.Errorf("nft chain: %w", err)
			}
			if skip[c.Family+" "+c.Table] {
				continue
			}
			ch := &Chain{Backend: Nftables, Family: c.Family, Table: c.Table, Name: c.Name, Type: c.Type, Hook: c.Hook, Policy: c.Policy}
			ch.Priority = nftPriority(c.Prio)
			chains[key{c.Family, c.Table, c.Name}] = ch
			order = append(order, ch)
		case obj["rule"] != nil:
			var r nftRule
			if err := json.Unmarshal(obj["rule"], &r); err != nil {
				return nil, fmt.Errorf("nft rule: %w", err)
			}
			if skip[r.Family+" "+r.Table] {
				continue
			}
			rules = append(rules, r)
		case obj["set"] != nil, obj["map"] != nil:
			raw := obj["set"]
			if raw == nil {
				raw = obj["map"]
			}
			var s struct{ Family, Table, Name string }
			if err := json.Unmarshal(raw, &s); err == nil {
				sets[key{s.Family, s.Table, s.Name}] = raw
			}
		}
	}
	for _, r := range rules {
		ch := chains[key{r.Family, r.Table, r.Chain}]
		if ch == nil {
			continue
		}
		named := func(name string) json.RawMessage { return sets[key{r.Family, r.Table, name}] }
		ch.Rules = append(ch.Rules, r.parse(named))
	}
	return order, nil
}

// nftPriority reads a chain priority: a number, or (older nft) a name.
func nftPriority(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "raw":
			return -300
		case "mangle":
			return -150
		case "dstnat":
			return -100
		case "filter":
			return 0
		case "security":
			return 50
		case "srcnat":
			return 100
		}
	}
	return 0
}

type nftRule struct {
	Family, Table, Chain string
	Handle               int
	Comment              string
	Expr                 []map[string]json.RawMessage
}

// parse turns the rule's expressions into matches and a verdict; anything unknown becomes a
// KindUnknown match (a match) or Verdict Unknown (a statement that may end the packet).
func (r nftRule) parse(named func(string) json.RawMessage) Rule {
	rule := Rule{Handle: r.Handle, Verdict: Continue}
	var text []string
	for _, e := range r.Expr {
		for op, raw := range e {
			switch op {
			case "match":
				m, t := parseNftMatch(raw, named)
				rule.Matches = append(rule.Matches, m)
				text = append(text, t)
			case "counter":
				var c struct{ Packets, Bytes uint64 }
				_ = json.Unmarshal(raw, &c)
				rule.Counter = &Counter{Packets: c.Packets, Bytes: c.Bytes}
				text = append(text, fmt.Sprintf("counter packets %d bytes %d", c.Packets, c.Bytes))
			case "accept", "drop", "return", "continue":
				rule.Verdict = Verdict(op)
				text = append(text, op)
			case "reject":
				rule.Verdict = Reject
				t := "reject"
				var rj struct{ Type, Expr string }
				if json.Unmarshal(raw, &rj) == nil && rj.Type != "" {
					t += " with " + rj.Type
					if rj.Expr != "" {
						t += " " + rj.Expr
					}
				}
				text = append(text, t)
			case "jump", "goto":
				var j struct{ Target string }
				_ = json.Unmarshal(raw, &j)
				rule.Verdict, rule.Target = Verdict(op), j.Target
				text = append(text, op+" "+j.Target)
			case "vmap":
				vm, t := parseNftVmap(raw, named)
				rule.VerdictMap = vm
				text = append(text, t)
			case "xt":
				var x struct{ Type, Name string }
				_ = json.Unmarshal(raw, &x)
				switch {
				case x.Type == "match" && x.Name == "comment":
					rule.Matches = append(rule.Matches, Match{Kind: KindTrue})
				case x.Type == "match":
					rule.Matches = append(rule.Matches, Match{Kind: KindUnknown, Desc: "iptables match " + x.Name})
				case x.Type == "target" && x.Name == "REJECT":
					rule.Verdict = Reject
				case x.Type == "target":
					rule.Verdict = Unknown
				}
				text = append(text, fmt.Sprintf("xt %s %q", x.Type, x.Name))
			case "log":
				text = append(text, "log")
			case "limit", "quota":
				rule.Matches = append(rule.Matches, Match{Kind: KindUnknown, Desc: op})
				text = append(text, op+" "+compactJSON(raw))
			case "queue":
				rule.Verdict = Unknown
				text = append(text, "queue")
			case "mangle", "notrack", "dnat", "snat", "masquerade", "redirect", "set", "meter", "tproxy", "synproxy", "fwd", "dup":
				text = append(text, op)
			default:
				rule.Matches = append(rule.Matches, Match{Kind: KindUnknown, Desc: op})
				text = append(text, op+" "+compactJSON(raw))
			}
		}
	}
	if r.Comment != "" {
		text = append(text, fmt.Sprintf("comment %q", r.Comment))
	}
	rule.Text = strings.Join(text, " ")
	return rule
}

func compactJSON(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// left is the subject of a match: its kind, protocol and nft text.
type left struct {
	kind  Kind
	proto string
	text  string
	// desc explains an unknown subject.
	desc string
}

func parseNftLeft(raw json.RawMessage) left {
	var l struct {
		Payload *struct{ Protocol, Field string }
		Meta    *struct{ Key string }
		Ct      *struct{ Key string }
	}
	if json.Unmarshal(raw, &l) != nil {
		return left{kind: KindUnknown, desc: compactJSON(raw), text: compactJSON(raw)}
	}
	switch {
	case l.Payload != nil:
		p := *l.Payload
		text := p.Protocol + " " + p.Field
		switch {
		case (p.Protocol == "tcp" || p.Protocol == "udp" || p.Protocol == "th") && (p.Field == "dport" || p.Field == "sport"):
			proto := p.Protocol
			if proto == "th" {
				proto = ""
			}
			k := KindDPort
			if p.Field == "sport" {
				k = KindSPort
			}
			return left{kind: k, proto: proto, text: text}
		case (p.Protocol == "ip" || p.Protocol == "ip6") && (p.Field == "saddr" || p.Field == "daddr"):
			k := KindSAddr
			if p.Field == "daddr" {
				k = KindDAddr
			}
			return left{kind: k, proto: p.Protocol, text: text}
		case (p.Protocol == "ip" && p.Field == "protocol") || (p.Protocol == "ip6" && p.Field == "nexthdr"):
			return left{kind: KindProto, proto: p.Protocol, text: text}
		}
		return left{kind: KindUnknown, desc: text, text: text}
	case l.Meta != nil:
		text := "meta " + l.Meta.Key
		switch l.Meta.Key {
		case "l4proto":
			return left{kind: KindProto, text: text}
		case "iifname", "iif":
			return left{kind: KindIif, text: l.Meta.Key}
		case "oifname", "oif":
			return left{kind: KindOif, text: l.Meta.Key}
		case "nfproto":
			return left{kind: KindFamily, text: text}
		case "mark":
			return left{kind: KindMark, text: text}
		}
		return left{kind: KindUnknown, desc: text, text: text}
	case l.Ct != nil:
		text := "ct " + l.Ct.Key
		if l.Ct.Key == "state" || l.Ct.Key == "status" {
			return left{kind: KindCtState, text: text}
		}
		return left{kind: KindUnknown, desc: text, text: text}
	}
	t := compactJSON(raw)
	return left{kind: KindUnknown, desc: t, text: t}
}

// parseNftMatch reads {"op", "left", "right"} into a Match and its nft text.
func parseNftMatch(raw json.RawMessage, named func(string) json.RawMessage) (Match, string) {
	var m struct {
		Op    string
		Left  json.RawMessage
		Right json.RawMessage
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Match{Kind: KindUnknown, Desc: "match"}, compactJSON(raw)
	}
	l := parseNftLeft(m.Left)
	rightText := nftValueText(m.Right, l.kind == KindIif || l.kind == KindOif)
	text := l.text + " " + rightText
	switch m.Op {
	case "==", "in":
	case "!=":
		text = l.text + " != " + rightText
	default:
		text = l.text + " " + m.Op + " " + rightText
	}
	if l.kind == KindUnknown {
		return Match{Kind: KindUnknown, Desc: text}, text
	}
	vals, ok := nftValues(m.Right, named)
	if !ok {
		return Match{Kind: KindUnknown, Desc: text}, text
	}
	mt := Match{Kind: l.kind, Neg: m.Op == "!="}
	switch l.kind {
	case KindDPort, KindSPort:
		mt.Proto = l.proto
		ports, ok := portRanges(vals, m.Op)
		if !ok {
			return Match{Kind: KindUnknown, Desc: text}, text
		}
		mt.Ports = ports
		if m.Op == "<" || m.Op == ">" || m.Op == "<=" || m.Op == ">=" {
			mt.Neg = false
		}
	case KindSAddr, KindDAddr:
		for _, v := range vals {
			p, ok := v.prefix()
			if !ok {
				return Match{Kind: KindUnknown, Desc: text}, text
			}
			mt.Prefixes = append(mt.Prefixes, p...)
		}
	case KindProto, KindIif, KindOif, KindCtState, KindFamily:
		for _, v := range vals {
			if v.str == "" {
				if v.isNum && l.kind == KindProto {
					v.str = protoName(v.num)
				} else {
					return Match{Kind: KindUnknown, Desc: text}, text
				}
			}
			mt.Strings = append(mt.Strings, v.str)
		}
	case KindMark:
		if len(vals) != 1 || !vals[0].isNum {
			return Match{Kind: KindUnknown, Desc: text}, text
		}
		mt.Mask, mt.Ports = 0xffffffff, [][2]int{{vals[0].num, vals[0].num}}
	}
	if l.kind == KindCtState && m.Op == "!=" {
		mt.Neg = true
	}
	return mt, text
}

// value is one element of an nft value: a number, a string, a range or a prefix.
type value struct {
	isNum  bool
	num    int
	str    string
	lo, hi int
	isRng  bool
	pfx    netip.Prefix
	isPfx  bool
	rngA   netip.Addr
	rngB   netip.Addr
	isArng bool
}

func (v value) prefix() ([]netip.Prefix, bool) {
	switch {
	case v.isPfx:
		return []netip.Prefix{v.pfx}, true
	case v.str != "":
		a, err := netip.ParseAddr(v.str)
		if err != nil {
			return nil, false
		}
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, true
	case v.isArng:
		return rangePrefixes(v.rngA, v.rngB), true
	}
	return nil, false
}

// rangePrefixes covers an address range with prefixes.
func rangePrefixes(a, b netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for a.IsValid() && a.Compare(b) <= 0 {
		bits := a.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(a, bits-1).Masked()
			last := lastAddr(p)
			if p.Addr() != a || last.Compare(b) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(a, bits)
		out = append(out, p)
		l := lastAddr(p)
		if l == b || len(out) > 64 {
			break
		}
		a = l.Next()
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// nftValues reads a right-hand side: a number, string, array (flag list), {"set": [...]},
// {"range": [a, b]}, {"prefix": {...}} or "@named-set".
func nftValues(raw json.RawMessage, named func(string) json.RawMessage) ([]value, bool) {
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return []value{{isNum: true, num: int(n)}}, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if name, ok := strings.CutPrefix(s, "@"); ok {
			set := named(name)
			if set == nil {
				return nil, false
			}
			var body struct{ Elem []json.RawMessage }
			if json.Unmarshal(set, &body) != nil {
				return nil, false
			}
			return nftElems(body.Elem, named)
		}
		return []value{{str: s}}, true
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		return nftElems(arr, named)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	switch {
	case obj["set"] != nil:
		if json.Unmarshal(obj["set"], &arr) != nil {
			// a set of one element
			return nftValues(obj["set"], named)
		}
		return nftElems(arr, named)
	case obj["range"] != nil:
		var r []json.RawMessage
		if json.Unmarshal(obj["range"], &r) != nil || len(r) != 2 {
			return nil, false
		}
		var a, b float64
		if json.Unmarshal(r[0], &a) == nil && json.Unmarshal(r[1], &b) == nil {
			return []value{{isRng: true, lo: int(a), hi: int(b)}}, true
		}
		var as, bs string
		if json.Unmarshal(r[0], &as) == nil && json.Unmarshal(r[1], &bs) == nil {
			aa, e1 := netip.ParseAddr(as)
			bb, e2 := netip.ParseAddr(bs)
			if e1 == nil && e2 == nil {
				return []value{{isArng: true, rngA: aa, rngB: bb}}, true
			}
		}
		return nil, false
	case obj["prefix"] != nil:
		var p struct {
			Addr string
			Len  int
		}
		if json.Unmarshal(obj["prefix"], &p) != nil {
			return nil, false
		}
		a, err := netip.ParseAddr(p.Addr)
		if err != nil {
			return nil, false
		}
		return []value{{isPfx: true, pfx: netip.PrefixFrom(a, p.Len).Masked()}}, true
	case obj["elem"] != nil:
		var e struct{ Val json.RawMessage }
		if json.Unmarshal(obj["elem"], &e) != nil {
			return nil, false
		}
		return nftValues(e.Val, named)
	}
	return nil, false
}

func nftElems(arr []json.RawMessage, named func(string) json.RawMessage) ([]value, bool) {
	var out []value
	for _, e := range arr {
		vs, ok := nftValues(e, named)
		if !ok {
			return nil, false
		}
		out = append(out, vs...)
	}
	return out, true
}

// portRanges turns values and a comparison into port ranges.
func portRanges(vals []value, op string) ([][2]int, bool) {
	var out [][2]int
	for _, v := range vals {
		switch {
		case v.isRng:
			out = append(out, [2]int{v.lo, v.hi})
		case v.isNum:
			out = append(out, [2]int{v.num, v.num})
		case v.str != "":
			p, ok := serviceNames[v.str]
			if !ok {
				return nil, false
			}
			out = append(out, [2]int{p, p})
		default:
			return nil, false
		}
	}
	if op == "<" || op == ">" || op == "<=" || op == ">=" {
		if len(out) != 1 {
			return nil, false
		}
		n := out[0][0]
		switch op {
		case "<":
			return [][2]int{{0, n - 1}}, true
		case "<=":
			return [][2]int{{0, n}}, true
		case ">":
			return [][2]int{{n + 1, 65535}}, true
		case ">=":
			return [][2]int{{n, 65535}}, true
		}
	}
	return out, true
}

// serviceNames are the /etc/services names nft may print for ports k3strap asks about.
var serviceNames = map[string]int{
	"ssh": 22, "http": 80, "https": 443, "domain": 53, "etcd-client": 2379, "etcd-server": 2380,
	"sun-sr-https": 6443, "kubelet": 10250,
}

// protoName names an IP protocol number.
func protoName(n int) string {
	switch n {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "ipv6-icmp"
	}
	return strconv.Itoa(n)
}

// nftValueText renders a right-hand side in nft syntax; quote puts strings in quotes (nft
// quotes interface names).
func nftValueText(raw json.RawMessage, quote bool) string {
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return strconv.Itoa(int(n))
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.HasPrefix(s, "@") || (isWord(s) && !quote) {
			return s
		}
		return strconv.Quote(s)
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		var parts []string
		for _, e := range arr {
			parts = append(parts, nftValueText(e, quote))
		}
		return strings.Join(parts, ",")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		switch {
		case obj["set"] != nil:
			if json.Unmarshal(obj["set"], &arr) == nil {
				var parts []string
				for _, e := range arr {
					parts = append(parts, nftValueText(e, quote))
				}
				return "{ " + strings.Join(parts, ", ") + " }"
			}
			return nftValueText(obj["set"], quote)
		case obj["range"] != nil:
			var r []json.RawMessage
			if json.Unmarshal(obj["range"], &r) == nil && len(r) == 2 {
				return nftValueText(r[0], quote) + "-" + nftValueText(r[1], quote)
			}
		case obj["prefix"] != nil:
			var p struct {
				Addr string
				Len  int
			}
			if json.Unmarshal(obj["prefix"], &p) == nil {
				return fmt.Sprintf("%s/%d", p.Addr, p.Len)
			}
		}
	}
	return compactJSON(raw)
}

// isWord reports whether s can stand unquoted in nft syntax (addresses, names, states).
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == ':' || r == '-' || r == '_' || r == '/' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// parseNftVmap reads {"key": expr, "data": {"set": [[k, verdict], ...]} | "@map"}.
func parseNftVmap(raw json.RawMessage, named func(string) json.RawMessage) (*VerdictMap, string) {
	var v struct {
		Key  json.RawMessage
		Data json.RawMessage
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil, "vmap " + compactJSON(raw)
	}
	l := parseNftLeft(v.Key)
	vm := &VerdictMap{Key: Match{Kind: l.kind, Proto: l.proto}}
	var elems []json.RawMessage
	var s string
	if json.Unmarshal(v.Data, &s) == nil {
		if name, ok := strings.CutPrefix(s, "@"); ok {
			if m := named(name); m != nil {
				var body struct{ Elem []json.RawMessage }
				_ = json.Unmarshal(m, &body)
				elems = body.Elem
			}
		}
	} else {
		var d struct{ Set []json.RawMessage }
		_ = json.Unmarshal(v.Data, &d)
		elems = d.Set
	}
	var parts []string
	for _, e := range elems {
		var pair []json.RawMessage
		if json.Unmarshal(e, &pair) != nil || len(pair) != 2 {
			vm.Key.Kind = KindUnknown
			continue
		}
		var verdict map[string]json.RawMessage
		_ = json.Unmarshal(pair[1], &verdict)
		entry := VerdictEntry{Verdict: Unknown}
		var vname string
		for name, body := range verdict {
			vname = name
			entry.Verdict = Verdict(name)
			if name == "jump" || name == "goto" {
				var j struct{ Target string }
				_ = json.Unmarshal(body, &j)
				entry.Target = j.Target
				vname += " " + j.Target
			}
		}
		em, _ := parseNftMatch(mustJSON(map[string]any{"op": "==", "left": v.Key, "right": pair[0]}), named)
		if l.kind == KindUnknown {
			em = Match{Kind: KindUnknown, Desc: l.desc}
		}
		entry.Key = em
		vm.Entries = append(vm.Entries, entry)
		parts = append(parts, nftValueText(pair[0], l.kind == KindIif || l.kind == KindOif)+" : "+vname)
	}
	sort.Strings(parts)
	return vm, l.text + " vmap { " + strings.Join(parts, ", ") + " }"
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
