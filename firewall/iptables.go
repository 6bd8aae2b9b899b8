// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firewall

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseIptablesSave reads the text of iptables-save or ip6tables-save (any backend; family
// "ip" or "ip6", backend IptablesNft or IptablesLegacy) into chains: every table's chains,
// with the built-in chains of the filter table as base chains at priority 0 (NF_IP_PRI_FILTER)
// and their policies. Comment lines ("# Warning: ...") are skipped; a malformed line is an
// error naming it.
func ParseIptablesSave(text, family string, backend Backend) ([]*Chain, error) {
	var (
		out   []*Chain
		table string
		byKey = map[string]*Chain{}
	)
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || line == "COMMIT":
			continue
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 || table == "" {
				return nil, fmt.Errorf("%s-save line %d: want \":CHAIN POLICY [p:b]\": %q", backend, n+1, line)
			}
			c := &Chain{Backend: backend, Family: family, Table: table, Name: f[0]}
			if f[1] != "-" {
				c.Policy = strings.ToLower(f[1])
				c.Hook = builtinHook(f[0])
				if table == "filter" && c.Hook != "" {
					c.Type = "filter"
				} else {
					c.Type = table
				}
			}
			byKey[table+" "+f[0]] = c
			out = append(out, c)
		case strings.HasPrefix(line, "-A "):
			args, err := splitArgs(line)
			if err != nil {
				return nil, fmt.Errorf("%s-save line %d: %v: %q", backend, n+1, err, line)
			}
			if len(args) < 2 {
				return nil, fmt.Errorf("%s-save line %d: want \"-A CHAIN ...\": %q", backend, n+1, line)
			}
			c := byKey[table+" "+args[1]]
			if c == nil {
				c = &Chain{Backend: backend, Family: family, Table: table, Name: args[1]}
				byKey[table+" "+args[1]] = c
				out = append(out, c)
			}
			r := parseIptablesRule(args[2:], family)
			r.Handle = len(c.Rules) + 1
			r.Text = strings.TrimSpace(strings.TrimPrefix(line, "-A "+args[1]))
			c.Rules = append(c.Rules, r)
		}
	}
	// A jump to no chain of the table is an extension target the evaluator does not know.
	for _, c := range out {
		for i := range c.Rules {
			r := &c.Rules[i]
			if (r.Verdict == Jump || r.Verdict == Goto) && byKey[c.Table+" "+r.Target] == nil {
				r.Verdict, r.Target = Unknown, ""
			}
		}
	}
	return out, nil
}

func builtinHook(name string) string {
	switch name {
	case "INPUT":
		return "input"
	case "OUTPUT":
		return "output"
	case "FORWARD":
		return "forward"
	case "PREROUTING":
		return "prerouting"
	case "POSTROUTING":
		return "postrouting"
	}
	return ""
}

// splitArgs splits an iptables-save line into arguments, honouring double quotes (comments).
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted = !quoted
			in = true
		case !quoted && (c == ' ' || c == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// parseIptablesRule reads the match and target options of one rule. Unknown matches become
// KindUnknown; unknown targets Verdict Unknown when they may end the packet's way.
func parseIptablesRule(args []string, family string) Rule {
	r := Rule{Verdict: Continue}
	neg := false
	proto := ""
	module := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		add := func(m Match) {
			m.Neg = neg
			r.Matches = append(r.Matches, m)
			neg = false
		}
		switch a {
		case "!":
			neg = true
		case "-p", "--protocol":
			proto = strings.ToLower(next())
			if n, err := strconv.Atoi(proto); err == nil {
				proto = protoName(n)
			}
			add(Match{Kind: KindProto, Strings: []string{proto}})
		case "-s", "--source", "-d", "--destination":
			k := KindSAddr
			if a == "-d" || a == "--destination" {
				k = KindDAddr
			}
			ps, ok := parseAddrList(next())
			if !ok {
				add(Match{Kind: KindUnknown, Desc: a + " " + args[i]})
				continue
			}
			add(Match{Kind: k, Prefixes: ps})
		case "-i", "--in-interface":
			add(Match{Kind: KindIif, Strings: []string{next()}})
		case "-o", "--out-interface":
			add(Match{Kind: KindOif, Strings: []string{next()}})
		case "-m", "--match":
			module = next()
			switch module {
			case "comment", "tcp", "udp", "conntrack", "state", "multiport", "mark", "addrtype":
			default:
				r.Matches = append(r.Matches, Match{Kind: KindUnknown, Desc: "-m " + module})
			}
		case "--comment":
			next()
		case "--dport", "--destination-port", "--sport", "--source-port", "--dports", "--destination-ports", "--sports", "--source-ports", "--ports":
			k := KindDPort
			if strings.Contains(a, "sport") || strings.Contains(a, "source") {
				k = KindSPort
			}
			if a == "--ports" {
				k = KindUnknown
			}
			ports, ok := parsePortList(next())
			if !ok || k == KindUnknown {
				add(Match{Kind: KindUnknown, Desc: a + " " + args[i]})
				continue
			}
			add(Match{Kind: k, Proto: proto, Ports: ports})
		case "--ctstate", "--state":
			var st []string
			for _, s := range strings.Split(next(), ",") {
				st = append(st, strings.ToLower(s))
			}
			add(Match{Kind: KindCtState, Strings: st})
		case "--mark":
			v, m, ok := parseMark(next())
			if !ok {
				add(Match{Kind: KindUnknown, Desc: "--mark " + args[i]})
				continue
			}
			add(Match{Kind: KindMark, Mask: m, Ports: [][2]int{{int(v), int(v)}}})
		case "--dst-type", "--src-type":
			side := "dst"
			if a == "--src-type" {
				side = "src"
			}
			add(Match{Kind: KindAddrType, Strings: []string{side, next()}})
		case "-j", "--jump", "-g", "--goto":
			t := next()
			switch t {
			case "ACCEPT":
				r.Verdict = Accept
			case "DROP":
				r.Verdict = Drop
			case "REJECT":
				r.Verdict = Reject
			case "RETURN":
				r.Verdict = Return
			case "MARK":
				r.Verdict = Continue
				r.SetMark = parseMarkTarget(args[i+1:])
				if r.SetMark == nil {
					// a MARK option the evaluator does not read: the mark is unknown after it
					r.SetMark = &MarkSet{Mask: 0xffffffff, Value: 0xffffffff}
					r.Matches = append(r.Matches, Match{Kind: KindUnknown, Desc: "MARK " + strings.Join(args[i+1:], " ")})
				}
			case "LOG", "CONNMARK", "MASQUERADE", "SNAT", "DNAT", "REDIRECT", "NOTRACK", "CT", "TCPMSS", "NFLOG", "AUDIT", "CHECKSUM", "TRACE":
				r.Verdict = Continue
			case "NFQUEUE", "QUEUE", "TPROXY":
				r.Verdict = Unknown
			default:
				// a user chain, or an extension target ParseIptablesSave finds no chain for
				r.Verdict, r.Target = Jump, t
				if a == "-g" || a == "--goto" {
					r.Verdict = Goto
				}
			}
			// target options follow; none of them matches anything
			i = len(args)
		case "-c":
			p, _ := strconv.ParseUint(next(), 10, 64)
			b, _ := strconv.ParseUint(next(), 10, 64)
			r.Counter = &Counter{Packets: p, Bytes: b}
		default:
			if strings.HasPrefix(a, "-") {
				// an option of a match module the evaluator does not read (the module's own
				// match is recorded above when unknown)
				desc := a
				if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					desc += " " + next()
				}
				if !knownModuleOption(module, a) {
					add(Match{Kind: KindUnknown, Desc: desc})
				}
				neg = false
			}
		}
	}
	return r
}

// knownModuleOption reports options that match nothing themselves (nfacct's name is a
// counter; reject-with follows the target).
func knownModuleOption(module, opt string) bool {
	switch opt {
	case "--nfacct-name", "--random-fully", "--reject-with", "--set-xmark", "--to-destination":
		return true
	}
	return false
}

func parseAddrList(s string) ([]netip.Prefix, bool) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, false
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, true
}

// parsePortList reads 8472, 2379:2380, or a multiport list 6443,10250,30000:32767.
func parsePortList(s string) ([][2]int, bool) {
	var out [][2]int
	for _, f := range strings.Split(s, ",") {
		lo, hi, rng := strings.Cut(f, ":")
		a, err := strconv.Atoi(lo)
		if err != nil {
			if p, ok := serviceNames[lo]; ok && !rng {
				out = append(out, [2]int{p, p})
				continue
			}
			return nil, false
		}
		b := a
		if rng {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, false
			}
		}
		out = append(out, [2]int{a, b})
	}
	return out, true
}

// parseMark reads 0x4000/0x4000 or 0x8000.
// parseMarkTarget reads the options of a MARK target (`--set-xmark V/M`, which iptables-save
// prints for every form, or `--set-mark`, `--and-mark`, `--or-mark`, `--xor-mark`); nil when
// they say nothing it knows.
func parseMarkTarget(opts []string) *MarkSet {
	for i := 0; i+1 < len(opts); i++ {
		v, m, ok := parseMark(opts[i+1])
		if !ok {
			return nil
		}
		switch opts[i] {
		case "--set-xmark":
			return &MarkSet{Value: v, Mask: m}
		case "--set-mark":
			// (mark AND NOT m) OR v == (mark AND NOT (m OR v)) XOR v
			return &MarkSet{Value: v, Mask: m | v}
		case "--and-mark":
			return &MarkSet{Mask: ^v}
		case "--or-mark":
			return &MarkSet{Value: v, Mask: v}
		case "--xor-mark":
			return &MarkSet{Value: v}
		}
	}
	return nil
}

func parseMark(s string) (uint32, uint32, bool) {
	v, m, hasMask := strings.Cut(s, "/")
	vv, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, false
	}
	mm := uint64(0xffffffff)
	if hasMask {
		if mm, err = strconv.ParseUint(m, 0, 32); err != nil {
			return 0, 0, false
		}
	}
	return uint32(vv), uint32(mm), true
}
