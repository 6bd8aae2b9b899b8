// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/firewall"
)

func readNet(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/network/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseNetworkK3sAgent reads what network.sh printed on a host running a real K3s agent.
func TestParseNetworkK3sAgent(t *testing.T) {
	n := ParseNetwork(readNet(t, "k3s-agent.txt"))
	if len(n.Errors) > 0 {
		t.Fatalf("errors: %v", n.Errors)
	}
	eth0 := n.Interface("eth0")
	if eth0 == nil || eth0.MTU != 1500 || !eth0.Up || eth0.Kind != "veth" {
		t.Fatalf("eth0: %+v", eth0)
	}
	if got := eth0.GlobalAddrs(4); len(got) != 1 || got[0] != netip.MustParseAddr("10.129.0.12") {
		t.Errorf("eth0 addresses %v", got)
	}
	if got := eth0.GlobalAddrs(6); len(got) != 0 {
		t.Errorf("eth0 has only a link-local IPv6 address, got global %v", got)
	}
	fl := n.Interface("flannel.1")
	if fl == nil || fl.MTU != 1450 || fl.VXLAN == nil || fl.VXLAN.Port != 8472 || fl.VXLAN.Local != "10.129.0.12" || fl.VXLAN.Link != "eth0" {
		t.Fatalf("flannel.1: %+v %+v", fl, fl.VXLAN)
	}
	if i := n.InterfaceOf(netip.MustParseAddr("10.129.0.12")); i == nil || i.Name != "eth0" {
		t.Errorf("InterfaceOf: %+v", i)
	}
	if r := n.DefaultRoute(4); r == nil || r.Dev != "eth0" || r.Gateway != "10.129.0.1" {
		t.Errorf("default route %+v", r)
	}
	if r := n.DefaultRoute(6); r != nil {
		t.Errorf("IPv6 default route %+v, the host has none", r)
	}
	if r := n.RouteTo(netip.MustParseAddr("10.42.1.7")); r == nil || r.Dev != "flannel.1" {
		t.Errorf("route to a pod on another node: %+v", r)
	}
	if r := n.RouteTo(netip.MustParseAddr("10.129.0.11")); r == nil || r.Dev != "eth0" || r.Dst != "10.129.0.0/24" {
		t.Errorf("route to a node: %+v", r)
	}
	if len(n.FDB) != 2 || n.FDB[0].Dev != "flannel.1" || !slices.ContainsFunc(n.FDB, func(e FDBEntry) bool { return e.Dst == "10.129.0.11" }) {
		t.Errorf("fdb %+v", n.FDB)
	}
	if len(n.Neighbors) != 2 || n.Neighbors[0].MAC == "" {
		t.Errorf("neighbours %+v", n.Neighbors)
	}
	want := []string{"nftables", "iptables-nft ip", "iptables-legacy ip", "iptables-nft ip6", "iptables-legacy ip6"}
	if !slices.Equal(n.RulesetRead, want) {
		t.Errorf("rulesets read %v, want %v", n.RulesetRead, want)
	}
	if n.LegacyTables || n.Ruleset.RuleCount(firewall.IptablesLegacy) != 0 || n.Ruleset.RuleCount(firewall.IptablesNft) < 30 {
		t.Errorf("legacy tables %v, legacy rules %d, nft rules %d", n.LegacyTables, n.Ruleset.RuleCount(firewall.IptablesLegacy), n.Ruleset.RuleCount(firewall.IptablesNft))
	}
	d := n.Ruleset.Evaluate(firewall.Packet{Family: 4, Proto: "udp", Src: netip.MustParseAddr("10.129.0.11"), Dst: netip.MustParseAddr("10.129.0.12"), DPort: 8472, Iif: "eth0", Hook: "input"})
	if d.Outcome != firewall.Accepted || !d.Certain() {
		t.Errorf("VXLAN from the server: %s %v", d.Outcome, d.Uncertain)
	}
	if n.IptablesVersion != "iptables v1.8.9 (nf_tables)" {
		t.Errorf("iptables version %q", n.IptablesVersion)
	}
	if n.NetworkManager.Running() || len(n.NetworkManager.CloudSetupEnabled()) != 0 {
		t.Errorf("NetworkManager %+v", n.NetworkManager)
	}
	r := n.ResolvFile("/etc/resolv.conf")
	if r == nil || !r.Present || !strings.Contains(r.Text, "nameserver 10.129.0.1") {
		t.Errorf("resolv.conf %+v", r)
	}
	if r := n.ResolvFile("/run/systemd/resolve/resolv.conf"); r == nil || r.Present {
		t.Errorf("systemd-resolved's file %+v", r)
	}
	if !slices.Equal(n.ProbeTools, []string{"/usr/bin/perl"}) {
		t.Errorf("tools %v", n.ProbeTools)
	}
}

func TestParseNetworkIPOneline(t *testing.T) {
	n := ParseNetwork("@@ net-addr ip-o\n" + readNet(t, "ip-o.txt"))
	eth0 := n.Interface("eth0")
	if eth0 == nil || eth0.MTU != 1500 || !eth0.Up || eth0.Index != 2 || eth0.MAC != "ea:92:24:65:83:4a" {
		t.Fatalf("eth0 %+v", eth0)
	}
	if got := eth0.GlobalAddrs(4); len(got) != 1 || got[0].String() != "10.129.0.12" {
		t.Errorf("eth0 addrs %v", got)
	}
	if fl := n.Interface("flannel.1"); fl == nil || fl.MTU != 1450 {
		t.Errorf("flannel.1 %+v", fl)
	}
}

func TestParseFirewalld(t *testing.T) {
	n := ParseNetwork(readNet(t, "firewalld-rhel9.txt"))
	f := n.Firewalld
	if !f.Running() || f.DefaultZone != "public" || len(f.Zones) != 3 {
		t.Fatalf("%+v", f)
	}
	pub := f.Zone("public")
	if !pub.Active || !pub.Default || !slices.Equal(pub.Interfaces, []string{"eth0"}) || !slices.Equal(pub.Services, []string{"cockpit", "dhcpv6-client", "ssh"}) {
		t.Errorf("public %+v", pub)
	}
	if len(pub.RichRules) != 1 || !strings.Contains(pub.RichRules[0], `port="10250"`) {
		t.Errorf("rich rules %q", pub.RichRules)
	}
	if !pub.Allows("tcp", 6443) || !pub.Allows("tcp", 31000) || !pub.Allows("tcp", 22) || pub.Allows("udp", 8472) || pub.Allows("tcp", 10250) {
		t.Errorf("public allows: 6443 %v 31000 %v ssh %v 8472/udp %v 10250 %v", pub.Allows("tcp", 6443), pub.Allows("tcp", 31000), pub.Allows("tcp", 22), pub.Allows("udp", 8472), pub.Allows("tcp", 10250))
	}
	if z := f.ZoneOf(netip.MustParseAddr("10.42.3.4"), "cni0"); z == nil || z.Name != "trusted" || !z.Allows("udp", 53) {
		t.Errorf("pod source zone %+v", z)
	}
	if z := f.ZoneOf(netip.MustParseAddr("10.0.0.9"), "eth0"); z == nil || z.Name != "public" {
		t.Errorf("node source zone %+v", z)
	}
	if z := f.ZoneOf(netip.MustParseAddr("10.0.0.9"), "eth7"); z == nil || z.Name != "public" {
		t.Errorf("an interface in no zone goes to the default zone, got %+v", z)
	}
}

func TestParseUFW(t *testing.T) {
	u := ParseNetwork(readNet(t, "ufw-ubuntu.txt")).UFW
	if !u.Active() || u.DefaultIncoming != "deny" || u.DefaultOutgoing != "allow" || u.DefaultRouted != "deny" {
		t.Fatalf("%+v", u)
	}
	if len(u.Rules) != 5 {
		t.Fatalf("rules %+v", u.Rules)
	}
	if r := u.Rules[1]; r.To != "6443/tcp" || r.Action != "ALLOW IN" || r.From != "Anywhere # apiserver" {
		t.Errorf("rule 2 %+v", r)
	}
	if r := u.Rules[3]; r.To != "8472/udp" || r.Action != "DENY IN" || r.From != "10.0.0.7" {
		t.Errorf("rule 4 %+v", r)
	}
	if r := u.Rules[4]; r.To != "22/tcp (v6)" {
		t.Errorf("rule 5 %+v", r)
	}
}

func TestParseNetworkManager(t *testing.T) {
	nm := ParseNetwork(readNet(t, "networkmanager-rhel9.txt")).NetworkManager
	if !nm.Running() {
		t.Error("NetworkManager not running")
	}
	if got := nm.CloudSetupEnabled(); !slices.Equal(got, []string{"nm-cloud-setup.service", "nm-cloud-setup.timer"}) {
		t.Errorf("nm-cloud-setup %v", got)
	}
	if len(nm.Devices) != 6 || nm.Devices[3] != (NMDevice{Device: "flannel.1", Type: "vxlan", State: "connected (externally)"}) || nm.Devices[4].Device != "veth3a1b2c:x" {
		t.Errorf("devices %+v", nm.Devices)
	}
	var paths []string
	for _, c := range nm.Conf {
		paths = append(paths, c.Path)
	}
	want := []string{"/etc/NetworkManager/NetworkManager.conf", "/usr/lib/NetworkManager/conf.d/00-server.conf", "/etc/NetworkManager/conf.d/90-k3s.conf", "/etc/NetworkManager/conf.d/95-more.conf"}
	if !slices.Equal(paths, want) {
		t.Errorf("read order %v, want %v", paths, want)
	}
	specs, from := nm.Unmanaged()
	if !slices.Equal(specs, []string{"interface-name:veth*", "interface-name:cali*"}) || len(from) != 2 {
		t.Errorf("unmanaged %v from %v", specs, from)
	}
	if NMUnmanagedMatches(specs, "cni0") || !NMUnmanagedMatches(specs, "veth1234") || !NMUnmanagedMatches(specs, "cali5") {
		t.Errorf("matches: cni0 %v veth %v", NMUnmanagedMatches(specs, "cni0"), NMUnmanagedMatches(specs, "veth1234"))
	}
	if !NMUnmanagedMatches([]string{"interface-name:flannel*", "mac:00:11:22:33:44:55"}, "flannel.1") {
		t.Error("flannel* does not match flannel.1")
	}
}

// TestNetworkInFactsDocument: the network sections sit in the facts document and a broken
// one never fails the whole document.
func TestNetworkInFactsDocument(t *testing.T) {
	doc := "@k3strap-facts 1\n@@ uname\nmachine=x86_64\n@@ net-nft\nnetlink: Error: cache initialization failed: Operation not permitted\n@@ net-route ip-j\n{not json\n@@ net-tools\n/usr/bin/python3\n@@ end\n"
	h, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	n := h.Network
	if n == nil || n.Ruleset != nil || len(n.Errors) != 2 || !strings.Contains(n.Errors[1], "Operation not permitted") {
		t.Fatalf("%+v", n)
	}
	if !slices.Equal(n.ProbeTools, []string{"/usr/bin/python3"}) {
		t.Errorf("tools %v", n.ProbeTools)
	}
	if h2, _ := Parse([]byte("@k3strap-facts 1\n@@ uname\nmachine=x86_64\n@@ end\n")); h2.Network != nil {
		t.Error("a document without network sections has a Network")
	}
}

// TestParseDoctorNodeNetwork: the doctor's node script carries network.sh's sections between
// @network and @network-end (captured on a host running a real K3s agent).
func TestParseDoctorNodeNetwork(t *testing.T) {
	b, err := os.ReadFile("testdata/doctor-node-k3s-agent.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := ParseDoctorNode(b)
	if n.Unit != "k3s-agent" || n.DiskPath != "/var/lib/rancher" || n.MemTotalKiB == 0 {
		t.Errorf("the sections around the network part: %+v", n)
	}
	if n.Network == nil || len(n.Network.Errors) > 0 {
		t.Fatalf("network: %+v", n.Network)
	}
	if fl := n.Network.Interface("flannel.1"); fl == nil || fl.VXLAN == nil || fl.VXLAN.Local != "10.129.0.12" {
		t.Errorf("flannel.1 %+v", fl)
	}
	if len(n.Network.FDB) != 2 || n.Network.Ruleset == nil || n.Network.Ruleset.RuleCount(firewall.IptablesNft) < 30 {
		t.Errorf("fdb %v, ruleset %v", n.Network.FDB, n.Network.Ruleset != nil)
	}
}
