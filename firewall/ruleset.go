// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package firewall reads a host's packet filter — nftables (`nft -j list ruleset`), the
// iptables-nft and iptables-legacy rules (`iptables-save` text) — into one model, and answers
// one question about it: what happens to a given packet (Evaluate). k3strap asks it whether
// the traffic K3s needs between nodes (docs/k3s.md#ports) and from pods is dropped, and by
// which rule, so that preflight and doctor can name the rule and the command that opens it
// (docs/failure-modes.md "Host firewalls"). It never changes a ruleset.
//
// The evaluator knows the matches that firewall rules for ports and addresses are written
// with (protocol, ports, addresses, interface names, conntrack state, marks, address types,
// nftables sets, ranges, prefixes and verdict maps); a rule with any other match is
// "uncertain" and reported as such instead of guessed.
package firewall

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Backend is where a chain lives.
type Backend string

// Backends. iptables-nft rules live in nftables too, but are read from iptables-nft-save,
// whose text keeps the matches that `nft -j` shows only as opaque "xt" expressions.
const (
	Nftables       Backend = "nftables"
	IptablesNft    Backend = "iptables-nft"
	IptablesLegacy Backend = "iptables-legacy"
)

// Ruleset is every filter chain of one host.
type Ruleset struct {
	Chains []*Chain
}

// Add appends chains.
func (rs *Ruleset) Add(cs ...*Chain) { rs.Chains = append(rs.Chains, cs...) }

// Empty reports whether the ruleset has no rule and no base chain that drops by policy.
func (rs *Ruleset) Empty() bool {
	for _, c := range rs.Chains {
		if len(c.Rules) > 0 || c.Policy == "drop" {
			return false
		}
	}
	return true
}

// RuleCount counts the rules of one backend.
func (rs *Ruleset) RuleCount(b Backend) int {
	n := 0
	for _, c := range rs.Chains {
		if c.Backend == b {
			n += len(c.Rules)
		}
	}
	return n
}

// Chain is one chain: a base chain (Hook set) or a regular chain that rules jump to.
type Chain struct {
	Backend Backend
	// Family is the nftables family (ip, ip6, inet, ...); for iptables ip or ip6.
	Family string
	Table  string
	Name   string
	// Hook is input, output, forward, prerouting or postrouting for a base chain, "" for a
	// regular chain.
	Hook string
	// Type is the nftables chain type (filter, nat, route); iptables' filter table is filter.
	Type     string
	Priority int
	// Policy is accept or drop for a base chain.
	Policy string
	Rules  []Rule
}

// Where names the chain for messages: "nftables table inet k3s chain input" or
// "iptables-legacy table filter chain INPUT".
func (c *Chain) Where() string {
	if c.Backend == Nftables {
		return fmt.Sprintf("nftables table %s %s chain %s", c.Family, c.Table, c.Name)
	}
	tool := c.tool()
	return fmt.Sprintf("%s table %s chain %s", tool, c.Table, c.Name)
}

// tool is the command that edits the chain.
func (c *Chain) tool() string {
	six := c.Family == "ip6"
	switch c.Backend {
	case IptablesLegacy:
		if six {
			return "ip6tables-legacy"
		}
		return "iptables-legacy"
	case IptablesNft:
		if six {
			return "ip6tables-nft"
		}
		return "iptables-nft"
	}
	return "nft"
}

// family reports whether the chain sees packets of IP family v (4 or 6).
func (c *Chain) family(v int) bool {
	switch c.Family {
	case "inet":
		return true
	case "ip":
		return v == 4
	case "ip6":
		return v == 6
	}
	return false
}

// Rule is one rule of a chain.
type Rule struct {
	// Handle is the nftables rule handle; for iptables the rule's 1-based position in its
	// chain.
	Handle int
	// Text is the rule as its tool prints it: nftables syntax, or the iptables-save line
	// without "-A CHAIN".
	Text    string
	Matches []Match
	Verdict Verdict
	// Target is the chain of a jump or goto.
	Target string
	// VerdictMap is an nftables verdict map (`iifname vmap { ... }`): the verdict depends on
	// Key; nil otherwise.
	VerdictMap *VerdictMap
	// Counter is the rule's counter, when it has one.
	Counter *Counter
	// SetMark is what an iptables MARK target does to the packet mark; nil for other rules.
	SetMark *MarkSet
}

// MarkSet changes a packet's mark as iptables' MARK target does (iptables-save prints every
// form as `--set-xmark Value/Mask`): the new mark is (mark AND NOT Mask) XOR Value. K3s's
// network policy controller (kube-router) marks the packets a policy allows, then rejects
// unmarked ones in each pod's KUBE-POD-FW chain, so marks decide whether those rules apply.
type MarkSet struct {
	Value, Mask uint32
}

// apply returns mark changed by s.
func (s MarkSet) apply(mark uint32) uint32 { return (mark &^ s.Mask) ^ s.Value }

// Counter is an nftables or iptables counter.
type Counter struct {
	Packets, Bytes uint64
}

// VerdictMap is an nftables vmap: the verdict for the packet's Key value.
type VerdictMap struct {
	Key     Match // the key's kind and protocol; values unused
	Entries []VerdictEntry
}

// VerdictEntry is one element of a verdict map.
type VerdictEntry struct {
	Key     Match // a match of the map's kind with one value
	Verdict Verdict
	Target  string
}

// Verdict is what a rule does with a packet it matches.
type Verdict string

// Verdicts. Continue is a rule without a verdict (counter, log, mark); Unknown a terminal
// target the evaluator does not know (NFQUEUE, ...).
const (
	Accept   Verdict = "accept"
	Drop     Verdict = "drop"
	Reject   Verdict = "reject"
	Jump     Verdict = "jump"
	Goto     Verdict = "goto"
	Return   Verdict = "return"
	Continue Verdict = "continue"
	Unknown  Verdict = "unknown"
)

// RuleRef points at one rule of a ruleset.
type RuleRef struct {
	Chain *Chain
	// Index is the rule's index in Chain.Rules; -1 for the chain's policy.
	Index int
}

// Rule returns the rule (nil for a policy).
func (r RuleRef) Rule() *Rule {
	if r.Chain == nil || r.Index < 0 || r.Index >= len(r.Chain.Rules) {
		return nil
	}
	return &r.Chain.Rules[r.Index]
}

// String describes the rule and where it is: "`udp dport 8472 drop` (nftables table inet
// f chain input, handle 3)", or "policy drop of iptables-legacy table filter chain INPUT".
func (r RuleRef) String() string {
	if r.Chain == nil {
		return "?"
	}
	rule := r.Rule()
	if rule == nil {
		return fmt.Sprintf("policy %s of %s", r.Chain.Policy, r.Chain.Where())
	}
	if r.Chain.Backend == Nftables {
		return fmt.Sprintf("`%s` (%s, handle %d)", rule.Text, r.Chain.Where(), rule.Handle)
	}
	return fmt.Sprintf("`-A %s %s` (%s, rule %d)", r.Chain.Name, rule.Text, r.Chain.Where(), rule.Handle)
}

// Packet is the first packet of a flow, as a host's filter sees it.
type Packet struct {
	// Family is 4 or 6.
	Family int
	// Proto is tcp or udp.
	Proto string
	// Src and Dst are the addresses; an invalid Addr is unknown.
	Src, Dst netip.Addr
	// DPort is the destination port; SPortMin..SPortMax the range the source port is taken
	// from (0, 0: Linux's ephemeral range 32768..60999).
	DPort              int
	SPortMin, SPortMax int
	// Iif and Oif are the interfaces it comes in on and leaves by ("" unknown).
	Iif, Oif string
	// Hook is input (to this host), output (from this host) or forward (through it).
	Hook string
	// Mark is the packet mark (fwmark): 0 when the packet enters the first chain; the
	// evaluator changes it as MARK rules do. markUnknown: a MARK rule that may or may not have
	// applied changed it.
	Mark        uint32
	markUnknown bool
}

func (p Packet) sports() (int, int) {
	if p.SPortMin == 0 && p.SPortMax == 0 {
		return 32768, 60999
	}
	return p.SPortMin, p.SPortMax
}

// String describes the packet: "UDP 10.0.0.1 → 10.0.0.2:8472 (input)".
func (p Packet) String() string {
	return fmt.Sprintf("%s %s → %s (%s)", strings.ToUpper(p.Proto), addrOr(p.Src), netip.AddrPortFrom(p.Dst, uint16(p.DPort)), p.Hook)
}

func addrOr(a netip.Addr) string {
	if !a.IsValid() {
		return "?"
	}
	return a.String()
}

// Outcome is what the filter does with a packet.
type Outcome string

// Outcomes.
const (
	// Accepted: every chain that sees the packet lets it through.
	Accepted Outcome = "accepted"
	// Dropped: a rule or a chain policy drops or rejects it.
	Dropped Outcome = "dropped"
)

// Decision is Evaluate's answer.
type Decision struct {
	Outcome Outcome
	// By is the rule or policy that dropped the packet (Chain nil when accepted).
	By RuleRef
	// Rejected says By rejects (the sender hears at once) rather than drops.
	Rejected bool
	// Uncertain are rules the evaluator could not decide that might change the outcome: a
	// rule that may accept before the drop, or that may drop an accepted packet.
	Uncertain []RuleRef
	// Path are the base chains the packet went through, in order.
	Path []*Chain
}

// Certain reports whether no undecidable rule could change the outcome.
func (d Decision) Certain() bool { return len(d.Uncertain) == 0 }

// hooksOf returns the hooks a packet of hook h traverses, in order.
func hooksOf(h string) []string {
	switch h {
	case "input":
		return []string{"prerouting", "input"}
	case "output":
		return []string{"output", "postrouting"}
	case "forward":
		return []string{"prerouting", "forward", "postrouting"}
	}
	return []string{h}
}

// baseChains returns the filter base chains a packet traverses, hook by hook, each hook's
// chains by priority.
func (rs *Ruleset) baseChains(p Packet) []*Chain {
	var out []*Chain
	for _, h := range hooksOf(p.Hook) {
		var hs []*Chain
		for _, c := range rs.Chains {
			if c.Hook == h && c.Type == "filter" && c.family(p.Family) {
				hs = append(hs, c)
			}
		}
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Priority < hs[j].Priority })
		out = append(out, hs...)
	}
	return out
}

// chain looks up a regular chain in the table of from.
func (rs *Ruleset) chain(from *Chain, name string) *Chain {
	for _, c := range rs.Chains {
		if c.Backend == from.Backend && c.Family == from.Family && c.Table == from.Table && c.Name == name {
			return c
		}
	}
	return nil
}

// Evaluate says what the ruleset does with p: it walks every base chain on p's path (nftables
// and both iptables backends; a packet must pass all of them), following jumps, gotos and
// verdict maps. A rule whose matches cannot be decided is skipped and recorded in
// Decision.Uncertain when it could have changed the outcome.
func (rs *Ruleset) Evaluate(p Packet) Decision {
	var d Decision
	for _, c := range rs.baseChains(p) {
		d.Path = append(d.Path, c)
		w := walker{rs: rs, p: p}
		res := w.walk(c, 0)
		p = w.p // the mark goes on with the packet
		if res.verdict == Drop || res.verdict == Reject {
			d.Outcome, d.By, d.Rejected = Dropped, res.by, res.verdict == Reject
			d.Uncertain = append(d.Uncertain, w.mayAccept...)
			return d
		}
		d.Uncertain = append(d.Uncertain, w.mayDrop...)
	}
	d.Outcome = Accepted
	return d
}

type walkResult struct {
	// verdict is Accept, Drop, Reject, or Return (fell off a regular chain / returned).
	verdict Verdict
	by      RuleRef
}

type walker struct {
	rs                 *Ruleset
	p                  Packet
	mayAccept, mayDrop []RuleRef
}

const maxDepth = 32

// walk evaluates chain c; for a base chain the end is its policy.
func (w *walker) walk(c *Chain, depth int) walkResult {
	if depth > maxDepth {
		return walkResult{verdict: Return}
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		ref := RuleRef{Chain: c, Index: i}
		m := matchAll(r.Matches, w.p)
		if m == triFalse {
			continue
		}
		verdict, target := r.Verdict, r.Target
		if r.VerdictMap != nil {
			var vm tri
			verdict, target, vm = r.VerdictMap.lookup(w.p)
			if vm == triUnknown || m == triUnknown {
				for _, e := range r.VerdictMap.Entries {
					w.uncertain(c, ref, e.Verdict, e.Target, depth)
				}
				continue
			}
		}
		if r.SetMark != nil {
			if m == triTrue {
				w.p.Mark = r.SetMark.apply(w.p.Mark)
			} else if r.SetMark.apply(w.p.Mark) != w.p.Mark {
				w.p.markUnknown = true
			}
		}
		if m == triUnknown {
			w.uncertain(c, ref, verdict, target, depth)
			continue
		}
		switch verdict {
		case Accept, Drop, Reject:
			return walkResult{verdict: verdict, by: ref}
		case Jump, Goto:
			next := w.rs.chain(c, target)
			if next == nil {
				continue
			}
			res := w.walk(next, depth+1)
			if res.verdict != Return {
				return res
			}
			if verdict == Goto {
				return walkResult{verdict: Return}
			}
		case Return:
			return walkResult{verdict: Return}
		case Unknown:
			w.uncertain(c, ref, Unknown, "", depth)
		}
	}
	if c.Hook != "" {
		pol := Accept
		if c.Policy == "drop" {
			pol = Drop
		}
		return walkResult{verdict: pol, by: RuleRef{Chain: c, Index: -1}}
	}
	return walkResult{verdict: Return}
}

// uncertain records a rule that may or may not apply: its possible verdicts (following a
// jump's target chain to find them).
func (w *walker) uncertain(c *Chain, ref RuleRef, verdict Verdict, target string, depth int) {
	switch verdict {
	case Accept:
		w.mayAccept = append(w.mayAccept, ref)
	case Drop, Reject, Unknown:
		w.mayDrop = append(w.mayDrop, ref)
	case Jump, Goto:
		next := w.rs.chain(c, target)
		if next == nil || depth >= maxDepth {
			return
		}
		for i := range next.Rules {
			r := &next.Rules[i]
			if matchAll(r.Matches, w.p) == triFalse {
				continue
			}
			w.uncertain(next, RuleRef{Chain: next, Index: i}, r.Verdict, r.Target, depth+1)
		}
	}
}
