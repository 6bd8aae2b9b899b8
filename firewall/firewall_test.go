// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firewall

import (
	"net/netip"
	"os"
	"strings"
	"testing"
)

// load builds a host's ruleset the way facts does: nftables without the tables that
// iptables-nft manages, plus the iptables-nft and iptables-legacy texts.
func load(t *testing.T, nftFile string, iptables map[string]Backend) *Ruleset {
	t.Helper()
	rs := &Ruleset{}
	skip := map[string]bool{}
	for file, b := range iptables {
		text := read(t, file)
		fam := "ip"
		if strings.HasPrefix(file, "ip6") {
			fam = "ip6"
		}
		cs, err := ParseIptablesSave(text, fam, b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if b == IptablesNft {
			for _, c := range cs {
				skip[fam+" "+c.Table] = true
			}
		}
		rs.Add(cs...)
	}
	cs, err := ParseNft([]byte(read(t, nftFile)), skip)
	if err != nil {
		t.Fatalf("%s: %v", nftFile, err)
	}
	rs.Add(cs...)
	return rs
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pkt(proto, src, dst string, dport int) Packet {
	return Packet{Family: 4, Proto: proto, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), DPort: dport, Iif: "eth0", Hook: "input"}
}

// TestK3sServerAcceptsNodeTraffic: a real K3s v1.36.3 server's own rules (kube-proxy,
// kube-router, flannel, captured on a throw-away host) let every port K3s needs in from
// another node — without a single undecidable rule in the way.
func TestK3sServerAcceptsNodeTraffic(t *testing.T) {
	rs := load(t, "nft-k3s-server.json", map[string]Backend{
		"iptables-nft-save-k3s-server.txt": IptablesNft,
		"ip6tables-nft-save-k3s-agent.txt": IptablesNft,
	})
	for _, p := range []Packet{
		pkt("udp", "10.129.0.12", "10.129.0.11", 8472),
		pkt("tcp", "10.129.0.12", "10.129.0.11", 6443),
		pkt("tcp", "10.129.0.13", "10.129.0.11", 10250),
		pkt("tcp", "10.42.1.5", "10.129.0.11", 6443),
	} {
		d := rs.Evaluate(p)
		if d.Outcome != Accepted || !d.Certain() {
			t.Errorf("%s: %s by %s, uncertain %v; want accepted for certain", p, d.Outcome, d.By, d.Uncertain)
		}
		if len(d.Path) == 0 {
			t.Errorf("%s: went through no base chain", p)
		}
	}
	// The server's forward chain accepts pod traffic (flannel's FLANNEL-FWD).
	fwd := Packet{Family: 4, Proto: "tcp", Src: netip.MustParseAddr("10.42.1.5"), Dst: netip.MustParseAddr("10.42.0.7"), DPort: 8080, Iif: "flannel.1", Oif: "cni0", Hook: "forward"}
	if d := rs.Evaluate(fwd); d.Outcome != Accepted {
		t.Errorf("pod traffic forwarded: %s by %s", d.Outcome, d.By)
	}
}

// TestBlockedAgent: the same K3s agent with blocking rules in all three backends; each
// packet is dropped by the rule that really drops it (what the kernel did when these rules
// were captured: the first matching drop on the packet's path), named with its location.
func TestBlockedAgent(t *testing.T) {
	rs := load(t, "nft-k3s-agent-blocked.json", map[string]Backend{
		"iptables-nft-save-k3s-agent-blocked.txt": IptablesNft,
		"ip6tables-nft-save-k3s-agent.txt":        IptablesNft,
		"iptables-legacy-save-blocked.txt":        IptablesLegacy,
	})
	cases := []struct {
		p        Packet
		where    string
		text     string
		rejected bool
	}{
		{pkt("udp", "10.129.0.12", "10.129.0.13", 8472), "nftables table inet blk chain input", "ip saddr 10.129.0.12 udp dport { 8472, 51820 } counter packets 0 bytes 0 drop", false},
		{pkt("udp", "10.129.0.11", "10.129.0.13", 8472), "nftables table inet blk chain input", "udp dport 8472 counter packets 0 bytes 0 drop", false},
		{pkt("tcp", "10.129.0.11", "10.129.0.13", 2380), "nftables table inet blk chain input", "tcp dport 2379-2380 ct state new reject with tcp reset", true},
		{pkt("udp", "10.129.0.11", "10.129.0.13", 5001), "nftables table inet blk chain input", `iifname "eth*" udp dport 5001 log drop`, false},
		{pkt("tcp", "10.129.0.12", "10.129.0.13", 10250), "iptables-nft table filter chain INPUT", `-p tcp -m tcp --dport 10250 -m comment --comment "no kubelet" -j DROP`, false},
		{pkt("tcp", "10.129.0.11", "10.129.0.13", 6443), "iptables-legacy table filter chain INPUT", "-s 10.129.0.11/32 -p tcp -m multiport --dports 6443,10250 -j REJECT --reject-with tcp-reset", true},
	}
	for _, c := range cases {
		d := rs.Evaluate(c.p)
		if d.Outcome != Dropped {
			t.Errorf("%s: %s, want dropped by %s", c.p, d.Outcome, c.text)
			continue
		}
		r := d.By.Rule()
		if r == nil || d.By.Chain.Where() != c.where || r.Text != c.text || d.Rejected != c.rejected {
			t.Errorf("%s: dropped by %s (rejected %v), want `%s` in %s (rejected %v)", c.p, d.By, d.Rejected, c.text, c.where, c.rejected)
		}
	}
	// TCP 6443 from a2 is neither in the legacy rule nor dropped elsewhere.
	if d := rs.Evaluate(pkt("tcp", "10.129.0.12", "10.129.0.13", 6443)); d.Outcome != Accepted {
		t.Errorf("6443 from 10.129.0.12: %s by %s", d.Outcome, d.By)
	}
	if n := rs.RuleCount(IptablesLegacy); n != 1 {
		t.Errorf("legacy rules: %d, want 1", n)
	}
}

func TestPolicyDropAndUncertainty(t *testing.T) {
	text := `*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -m set --match-set allowed src -j ACCEPT
-A INPUT -p udp -m udp --dport 8472 -m recent --rcheck -j DROP
COMMIT
`
	cs, err := ParseIptablesSave(text, "ip", IptablesLegacy)
	if err != nil {
		t.Fatal(err)
	}
	rs := &Ruleset{Chains: cs}
	d := rs.Evaluate(pkt("tcp", "10.0.0.2", "10.0.0.1", 6443))
	if d.Outcome != Dropped || d.By.Rule() != nil || !strings.Contains(d.By.String(), "policy drop of iptables-legacy table filter chain INPUT") {
		t.Fatalf("6443: %s by %s", d.Outcome, d.By)
	}
	if len(d.Uncertain) != 1 || !strings.Contains(d.Uncertain[0].String(), "--match-set") {
		t.Errorf("uncertain: %v, want the ipset rule", d.Uncertain)
	}
	if d := rs.Evaluate(pkt("tcp", "10.0.0.2", "10.0.0.1", 22)); d.Outcome != Accepted {
		t.Errorf("22: %s", d.Outcome)
	}
	// UDP 8472: the ipset rule may accept, then the `recent` rule may drop, then the policy
	// drops.
	d = rs.Evaluate(pkt("udp", "10.0.0.2", "10.0.0.1", 8472))
	if d.Outcome != Dropped || d.Certain() {
		t.Errorf("8472: %s certain=%v", d.Outcome, d.Certain())
	}
}

func TestVerdictMapAndNamedSet(t *testing.T) {
	doc := `{"nftables": [
{"table": {"family": "inet", "name": "fw", "handle": 1}},
{"set": {"family": "inet", "table": "fw", "name": "nodes", "type": "ipv4_addr", "flags": ["interval"], "elem": [{"prefix": {"addr": "10.0.0.0", "len": 24}}, {"range": ["192.168.1.10", "192.168.1.20"]}]}},
{"chain": {"family": "inet", "table": "fw", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}},
{"chain": {"family": "inet", "table": "fw", "name": "lan", "handle": 2}},
{"rule": {"family": "inet", "table": "fw", "chain": "input", "handle": 3, "expr": [{"vmap": {"key": {"meta": {"key": "iifname"}}, "data": {"set": [["lo", {"accept": null}], ["eth1", {"jump": {"target": "lan"}}]]}}}]}},
{"rule": {"family": "inet", "table": "fw", "chain": "lan", "handle": 4, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@nodes"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 8472}}, {"accept": null}]}}
]}`
	cs, err := ParseNft([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := &Ruleset{Chains: cs}
	in := pkt("udp", "192.168.1.15", "10.0.0.1", 8472)
	in.Iif = "eth1"
	if d := rs.Evaluate(in); d.Outcome != Accepted {
		t.Errorf("from the set on eth1: %s by %s", d.Outcome, d.By)
	}
	in.Src = netip.MustParseAddr("192.168.1.21")
	if d := rs.Evaluate(in); d.Outcome != Dropped || d.By.Rule() != nil {
		t.Errorf("outside the set: %s by %s, want the policy", d.Outcome, d.By)
	}
	in.Iif = ""
	if d := rs.Evaluate(in); d.Certain() {
		t.Errorf("unknown interface: the vmap cannot be decided, got certain %s", d.Outcome)
	}
	if got := cs[0].Rules[0].Text; got != `iifname vmap { "eth1" : jump lan, "lo" : accept }` {
		t.Errorf("vmap text %q", got)
	}
}

func TestSplitArgs(t *testing.T) {
	got, err := splitArgs(`-A KUBE-NWPLCY-COMMON -m comment --comment "\"rule to drop invalid state for pod\"" -j DROP`)
	if err != nil || len(got) != 8 || got[5] != `"rule to drop invalid state for pod"` {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := splitArgs(`-A X -m comment --comment "open`); err == nil {
		t.Error("unterminated quote accepted")
	}
}

func TestRangePrefixes(t *testing.T) {
	ps := rangePrefixes(netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("192.168.1.20"))
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	if strings.Join(s, " ") != "192.168.1.10/31 192.168.1.12/30 192.168.1.16/30 192.168.1.20/32" {
		t.Errorf("%v", s)
	}
}

// TestNetworkPolicyMarks: K3s's network policy controller (kube-router) gives each pod a
// KUBE-POD-FW chain that sends the packet through its policy chains, which mark what a policy
// allows, and rejects what is left unmarked. With no NetworkPolicy the default chain marks
// every packet, so the reject never applies: a real K3s v1.36.3 cluster with running pods made
// doctor report that reject (rule 6, verbatim below) as a host firewall dropping pod traffic.
// With the mark taken away (a policy that allows nothing) the same reject must be found.
func TestNetworkPolicyMarks(t *testing.T) {
	chain := func(defaultRule string) string {
		return `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-ROUTER-FORWARD - [0:0]
:KUBE-POD-FW-ZSWAXKPSQJ3TVCVR - [0:0]
:KUBE-NWPLCY-DEFAULT - [0:0]
-A FORWARD -m comment --comment "kube-router netpol - TEMCG2JMHZYE7H7T" -j KUBE-ROUTER-FORWARD
-A KUBE-ROUTER-FORWARD -d 10.42.0.3/32 -m comment --comment "rule to jump traffic destined to POD name:coredns-54996dc9b4-qrb86 namespace: kube-system to chain KUBE-POD-FW-ZSWAXKPSQJ3TVCVR" -j KUBE-POD-FW-ZSWAXKPSQJ3TVCVR
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "rule for stateful firewall for pod" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "rule to drop invalid state for pod" -m conntrack --ctstate INVALID -j DROP
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -d 10.42.0.3/32 -m comment --comment "rule to permit the traffic traffic to pods when source is the pod's local node" -m addrtype --src-type LOCAL -j ACCEPT
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "run through default network policy chain" -j KUBE-NWPLCY-DEFAULT
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "rule to log dropped traffic POD name:coredns-54996dc9b4-qrb86 namespace: kube-system" -m mark ! --mark 0x10000/0x10000 -j NFLOG --nflog-group 100
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "rule to REJECT traffic destined for POD name:coredns-54996dc9b4-qrb86 namespace: kube-system" -m mark ! --mark 0x10000/0x10000 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -j MARK --set-xmark 0x0/0x10000
-A KUBE-POD-FW-ZSWAXKPSQJ3TVCVR -m comment --comment "set mark to ACCEPT traffic that comply to network policies" -j MARK --set-xmark 0x20000/0x20000
` + defaultRule + `
COMMIT
`
	}
	dns := Packet{Family: 4, Proto: "udp", Src: netip.MustParseAddr("10.42.1.5"), Dst: netip.MustParseAddr("10.42.0.3"), DPort: 53, Hook: "forward"}
	for _, tc := range []struct {
		name, defaultRule string
		want              Outcome
	}{
		{"no policy: every packet marked", `-A KUBE-NWPLCY-DEFAULT -m comment --comment "rule to mark traffic matching a network policy" -j MARK --set-xmark 0x10000/0x10000`, Accepted},
		{"a policy allowing nothing", ``, Dropped},
		{"--set-mark form", `-A KUBE-NWPLCY-DEFAULT -j MARK --set-mark 0x10000/0x10000`, Accepted},
		{"--or-mark form", `-A KUBE-NWPLCY-DEFAULT -j MARK --or-mark 0x10000`, Accepted},
		{"marked only from one source", `-A KUBE-NWPLCY-DEFAULT -s 10.42.2.0/24 -j MARK --set-xmark 0x10000/0x10000`, Dropped},
	} {
		cs, err := ParseIptablesSave(chain(tc.defaultRule), "ip", IptablesNft)
		if err != nil {
			t.Fatal(err)
		}
		d := (&Ruleset{Chains: cs}).Evaluate(dns)
		if d.Outcome != tc.want || !d.Certain() {
			t.Errorf("%s: %s by %s (certain %v), want %s", tc.name, d.Outcome, d.By, d.Certain(), tc.want)
		}
		if tc.want == Dropped && (!d.Rejected || !strings.Contains(d.By.String(), "rule 6")) {
			t.Errorf("%s: dropped by %s, want kube-router's reject (rule 6)", tc.name, d.By)
		}
	}
	// A MARK rule that may or may not apply leaves the mark unknown: the reject is uncertain.
	cs, err := ParseIptablesSave(chain(`-A KUBE-NWPLCY-DEFAULT -m set --match-set allowed src -j MARK --set-xmark 0x10000/0x10000`), "ip", IptablesNft)
	if err != nil {
		t.Fatal(err)
	}
	if d := (&Ruleset{Chains: cs}).Evaluate(dns); d.Certain() {
		t.Errorf("mark set under an unknown match: %s by %s, certain; want uncertain", d.Outcome, d.By)
	}
}
