// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/firewall"
	"github.com/k3strap/k3strap/k3s"
)

// hostNet is a host with interfaces (name=address/len, the first listed is eth0...) and a
// default route on defIf.
func hostNet(defIf string, ifaces ...string) *facts.Network {
	n := &facts.Network{}
	for i, s := range ifaces {
		name, addr, _ := strings.Cut(s, "=")
		ifc := facts.Interface{Name: name, Index: i + 2, MTU: 1500, Up: true}
		if addr != "" {
			p := netip.MustParsePrefix(addr)
			ifc.Addrs = []facts.IfAddr{{Prefix: p, Scope: "global"}}
			n.Routes = append(n.Routes, facts.NetRoute{Family: 4, Dst: p.Masked().String(), Dev: name})
			if name == defIf {
				gw := p.Masked().Addr().Next()
				n.Routes = append(n.Routes, facts.NetRoute{Family: 4, Dst: "default", Gateway: gw.String(), Dev: name})
			}
		}
		n.Interfaces = append(n.Interfaces, ifc)
	}
	return n
}

func withRules(t *testing.T, n *facts.Network, legacy, nft string) *facts.Network {
	t.Helper()
	rs := &firewall.Ruleset{}
	if legacy != "" {
		cs, err := firewall.ParseIptablesSave(legacy, "ip", firewall.IptablesLegacy)
		if err != nil {
			t.Fatal(err)
		}
		rs.Add(cs...)
	}
	if nft != "" {
		cs, err := firewall.ParseIptablesSave(nft, "ip", firewall.IptablesNft)
		if err != nil {
			t.Fatal(err)
		}
		rs.Add(cs...)
	}
	n.Ruleset = rs
	return n
}

func configKey(host, key string) string { return "spec.hosts[" + host + "].k3s.config." + key }

func defaultCIDRs(c *Cluster) *Cluster {
	c.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.42.0.0/16")}
	c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.43.0.0/16")}
	return c
}

// threeNodes is cp1, a1, a2 on 10.129.0.11-13 with vxlan.
func threeNodes() *Cluster {
	c := &Cluster{Ports: k3s.NodePorts(k3s.NodePortOptions{}), Nodes: []Node{
		{Name: "cp1", Server: true, Address: netip.MustParseAddr("10.129.0.11"), Net: hostNet("eth0", "eth0=10.129.0.11/24")},
		{Name: "a1", Address: netip.MustParseAddr("10.129.0.12"), Net: hostNet("eth0", "eth0=10.129.0.12/24")},
		{Name: "a2", Address: netip.MustParseAddr("10.129.0.13"), Net: hostNet("eth0", "eth0=10.129.0.13/24")},
	}}
	return defaultCIDRs(c)
}

func TestNodeAddressMultiHomed(t *testing.T) {
	c := threeNodes()
	// a1: the inventory address is on eth0, the default route on wan0
	c.Nodes[1].Net = hostNet("wan0", "eth0=10.129.0.12/24", "wan0=10.143.0.12/24")
	rs := NodeAddresses(c, configKey)
	if len(rs) != 1 || rs[0].ID != NodeAddress || rs[0].Severity != finding.Warning || rs[0].Host != "a1" {
		t.Fatalf("%+v", rs)
	}
	r := rs[0]
	for _, want := range []string{"InternalIP 10.143.0.12", "wan0", "public-ip", "10.129.0.12"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message lacks %q: %s", want, r.Message)
		}
	}
	if r.Fix() != "set node-ip: 10.129.0.12 and flannel-iface: eth0 for a1 (spec.hosts[a1].k3s.config.node-ip)" {
		t.Errorf("fix %q", r.Fix())
	}
	// node-ip alone leaves flannel on wan0
	c.Nodes[1].NodeIP = []string{"10.129.0.12"}
	rs = NodeAddresses(c, configKey)
	if len(rs) != 1 || !strings.Contains(rs[0].Fix(), "flannel-iface: eth0") || strings.Contains(rs[0].Fix(), "node-ip") {
		t.Fatalf("node-ip only: %+v", rs)
	}
	// both keys: nothing to say
	c.Nodes[1].FlannelIface = "eth0"
	if rs := NodeAddresses(c, configKey); len(rs) != 0 {
		t.Fatalf("both keys: %+v", rs)
	}
	// the path probes go where K3s will point the others
	if a, _, _ := c.Nodes[1].FlannelAddr(); a.String() != "10.129.0.12" {
		t.Errorf("flannel address %s", a)
	}
	// keys that name nothing on the host are errors
	c.Nodes[1].NodeIP, c.Nodes[1].FlannelIface = []string{"10.9.9.9"}, "eth9"
	rs = NodeAddresses(c, configKey)
	if len(rs) != 1 || rs[0].Severity != finding.Error || !strings.Contains(rs[0].Message, "node-ip 10.9.9.9 is not an address of a1") || !strings.Contains(rs[0].Message, "flannel-iface eth9 does not exist") {
		t.Fatalf("%+v", rs)
	}
}

func TestNodeAddressRunning(t *testing.T) {
	c := threeNodes()
	c.Nodes[1].Net = hostNet("wan0", "eth0=10.129.0.12/24", "wan0=10.143.0.12/24")
	c.Nodes[1].Running = &Running{InternalIP: netip.MustParseAddr("10.143.0.12"), PublicIP: netip.MustParseAddr("10.143.0.12")}
	rs := NodeAddresses(c, configKey)
	if len(rs) != 1 || !strings.Contains(rs[0].Message, "InternalIP 10.143.0.12 (the node's InternalIP)") || !strings.Contains(rs[0].Evidence[len(rs[0].Evidence)-1].Text, "InternalIP 10.143.0.12, flannel public-ip 10.143.0.12") {
		t.Fatalf("%+v", rs)
	}
}

// TestFirewallPathsVXLANBlocked: a running agent whose input drops UDP 8472 (nftables, as the
// e2e test's rule) is cut off from both other nodes; the finding names the rule, the nodes,
// the command that removes it, and flannel's own state showing the peers send it there.
func TestFirewallPathsVXLANBlocked(t *testing.T) {
	c := threeNodes()
	cs, err := firewall.ParseNft([]byte(`{"nftables":[{"table":{"family":"inet","name":"k3i3block","handle":7}},
{"chain":{"family":"inet","table":"k3i3block","name":"input","handle":1,"type":"filter","hook":"input","prio":-5,"policy":"accept"}},
{"rule":{"family":"inet","table":"k3i3block","chain":"input","handle":2,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"udp","field":"dport"}},"right":8472}},{"counter":{"packets":17,"bytes":2210}},{"drop":null}]}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes[1].Net.Ruleset = &firewall.Ruleset{Chains: cs}
	c.Nodes[1].Running = &Running{InternalIP: netip.MustParseAddr("10.129.0.12"), PublicIP: netip.MustParseAddr("10.129.0.12"), VtepMAC: "9e:d7:98:b6:0d:22"}
	c.Nodes[0].Net.FDB = []facts.FDBEntry{{Dev: "flannel.1", MAC: "9e:d7:98:b6:0d:22", Dst: "10.129.0.12"}}
	rs := FirewallPaths(c, nil)
	if len(rs) != 1 {
		t.Fatalf("%d results: %+v", len(rs), rs)
	}
	r := rs[0]
	if r.ID != NodePaths || r.Severity != finding.Error || r.Host != "a1" || !slices.Equal(r.Peers, []string{"cp1", "a2"}) {
		t.Errorf("%+v", r)
	}
	for _, want := range []string{"UDP 8472 (flannel VXLAN)", "from cp1 and a2 to a1", "`udp dport 8472 counter packets 17 bytes 2210 drop` (nftables table inet k3i3block chain input, handle 2)", "pods on a1 cannot talk to pods on cp1 and a2"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, r.Message)
		}
	}
	if !slices.Equal(r.Commands, []string{"nft delete rule inet k3i3block input handle 2"}) {
		t.Errorf("commands %q", r.Commands)
	}
	var texts []string
	for _, e := range r.Evidence {
		texts = append(texts, e.Source+" | "+e.Text)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"a1: nft -j list ruleset | dropped by", "17 packets", "kubectl get node a1 | flannel.alpha.coreos.com/public-ip: 10.129.0.12", "cp1: bridge fdb show dev flannel.1 | cp1 sends a1's VXLAN traffic to 10.129.0.12"} {
		if !strings.Contains(all, want) {
			t.Errorf("evidence lacks %q:\n%s", want, all)
		}
	}
}

func TestHostFirewallPods(t *testing.T) {
	c := threeNodes()
	c.Nodes[0].Net = withRules(t, c.Nodes[0].Net, "", "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -s 10.42.0.0/16 -p tcp --dport 6443 -j REJECT\nCOMMIT\n")
	rs := HostFirewalls(c)
	if len(rs) != 3 {
		t.Fatalf("%d results: %+v", len(rs), rs)
	}
	if rs[0].Host != "cp1" || !strings.Contains(rs[0].Title, "pods to cp1's K3s supervisor and Kubernetes API (TCP 6443)") || !slices.Equal(rs[0].Commands, []string{"iptables -t filter -D INPUT 1"}) {
		t.Errorf("%+v", rs[0])
	}
	if !strings.Contains(rs[1].Title, "forwarded") || !slices.Equal(rs[1].Commands, []string{"iptables -t filter -I FORWARD -s 10.42.0.0/16 -j ACCEPT"}) {
		t.Errorf("%+v", rs[1])
	}
	// Node-to-node traffic is open: no NodePaths from the rulesets.
	if rs := FirewallPaths(c, nil); len(rs) != 0 {
		t.Errorf("%+v", rs)
	}
}

func TestNetworkManagerFindings(t *testing.T) {
	b, err := os.ReadFile("../facts/testdata/network/networkmanager-rhel9.txt")
	if err != nil {
		t.Fatal(err)
	}
	c := threeNodes()
	c.Nodes[0].Net = facts.ParseNetwork(string(b))
	rs := NetworkManagers(c, []string{"cni0", "flannel*"})
	if len(rs) != 2 || rs[0].ID != NMCloudSetup || rs[0].Severity != finding.Error || rs[1].ID != NetworkManager || rs[1].Severity != finding.Warning {
		t.Fatalf("%+v", rs)
	}
	if !slices.Equal(rs[0].Commands, []string{"systemctl disable nm-cloud-setup.service nm-cloud-setup.timer", "reboot"}) {
		t.Errorf("%q", rs[0].Commands)
	}
	nm := rs[1]
	if !strings.Contains(nm.Message, "cni0, flannel*") || !strings.Contains(nm.Commands[0], `unmanaged-devices=interface-name:cni0;interface-name:flannel*`) {
		t.Errorf("%+v", nm)
	}
	var ev []string
	for _, e := range nm.Evidence {
		ev = append(ev, e.Text)
	}
	if !slices.Contains(ev, "flannel.1 (vxlan) is connected (externally)") || !slices.Contains(ev, "[keyfile] unmanaged-devices=interface-name:veth*;interface-name:cali*") {
		t.Errorf("evidence %q", ev)
	}
}

func resolvNet(files map[string]string) *facts.Network {
	n := &facts.Network{}
	for _, p := range []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf", "/etc/rancher/k3s/resolv.conf"} {
		t, ok := files[p]
		n.Resolv = append(n.Resolv, facts.ResolvFile{Path: p, Present: ok, Text: t})
	}
	return n
}

func TestResolvConf(t *testing.T) {
	c := threeNodes()
	stub := "nameserver 127.0.0.53\noptions edns0 trust-ad\n"
	c.Nodes[0].Net = resolvNet(map[string]string{"/etc/resolv.conf": stub})
	c.Nodes[1].Net = resolvNet(map[string]string{"/etc/resolv.conf": stub, "/run/systemd/resolve/resolv.conf": "nameserver 192.168.1.1\n"})
	c.Nodes[2].Net = resolvNet(map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n", "/etc/rancher/k3s/resolv.conf": "nameserver ::1\n"})
	c.Nodes[2].ResolvConfFlag = "/etc/rancher/k3s/resolv.conf"
	rs := ResolvConfs(c, false, configKey)
	if len(rs) != 2 {
		t.Fatalf("%+v", rs)
	}
	if rs[0].Host != "cp1" || rs[0].Severity != finding.Warning || !strings.Contains(rs[0].Message, "nameserver 8.8.8.8") || !strings.Contains(rs[0].Evidence[0].Text, "nameserver 127.0.0.53 is not a global unicast address") {
		t.Errorf("cp1: %+v", rs[0])
	}
	if rs[1].Host != "a2" || rs[1].Severity != finding.Error || !strings.Contains(rs[1].Message, "(itself)") {
		t.Errorf("a2: %+v", rs[1])
	}
	if rs := ResolvConfs(c, true, configKey); rs[0].Severity != finding.Error || !strings.Contains(rs[0].Message, "airgapped") {
		t.Errorf("airgap: %+v", rs[0])
	}
}

func TestIptablesBackends(t *testing.T) {
	c := threeNodes()
	c.Nodes[2].Net = withRules(t, c.Nodes[2].Net, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 10250 -j DROP\nCOMMIT\n",
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n")
	rs := IptablesBackendsUsed(c)
	if len(rs) != 1 || rs[0].Host != "a2" || !strings.Contains(rs[0].Message, "1 rules in iptables-legacy and 1 in iptables-nft") {
		t.Fatalf("%+v", rs)
	}
	// empty legacy tables with ACCEPT policies are no second backend
	c.Nodes[2].Net = withRules(t, hostNet("eth0", "eth0=10.129.0.13/24"), "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n", "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n")
	if rs := IptablesBackendsUsed(c); len(rs) != 0 {
		t.Errorf("%+v", rs)
	}
}

// TestPathsJudgement: failed probes grouped per target and port with their sources, the
// rule that explains them, untestable hosts, and the MTU finding with the value that fits.
func TestPathsJudgement(t *testing.T) {
	c := threeNodes()
	c.FlannelBackend = "vxlan"
	c.Nodes[0].Net = withRules(t, c.Nodes[0].Net, "", "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p udp -m udp --dport 8472 -j DROP\nCOMMIT\n")
	probes := PlanProbes(c)
	rep := &PathReport{Hosts: map[string]string{}}
	for _, p := range probes {
		r := PathResult{Probe: p, Status: PathOK}
		if p.To == "cp1" && p.Port.Port == 8472 {
			r.Status, r.Detail = PathFailed, "none of the 3 datagrams arrived"
		}
		rep.Results = append(rep.Results, r)
	}
	rep.MTU = []MTUResult{
		{From: "a2", To: "a1", Addr: netip.MustParseAddr("10.129.0.12"), Port: 8472, IfaceMTU: 1500, Tried: 1500, Largest: 1400, Step: 4},
		{From: "a1", To: "a2", Addr: netip.MustParseAddr("10.129.0.13"), Port: 8472, IfaceMTU: 1500, Tried: 1500, Largest: 1500},
	}
	rs := Paths(c, rep)
	if len(rs) != 2 {
		t.Fatalf("%d results: %+v", len(rs), rs)
	}
	np := rs[0]
	if np.ID != NodePaths || np.Host != "cp1" || !slices.Equal(np.Peers, []string{"a1", "a2"}) || !strings.Contains(np.Title, "UDP 8472 (flannel VXLAN) on cp1 is not reachable from a1 and a2") {
		t.Errorf("%+v", np)
	}
	if !strings.Contains(np.Message, "cp1's packet filter dropped it: `-A INPUT -p udp -m udp --dport 8472 -j DROP`") || !slices.Equal(np.Commands, []string{"iptables -t filter -D INPUT 1"}) {
		t.Errorf("%s %q", np.Message, np.Commands)
	}
	mtu := rs[1]
	if mtu.ID != PathMTU || mtu.Host != "a2" || !strings.Contains(mtu.Message, "at most 1400 do") || !strings.Contains(mtu.Message, "The flannel MTU that fits is 1350") || !slices.Equal(mtu.Commands, []string{"ip link set dev eth0 mtu 1400"}) {
		t.Errorf("%+v", mtu)
	}
	// a host without an interpreter
	rep.Hosts["a2"] = "neither perl nor python3 is installed"
	rs = Paths(c, rep)
	if rs[0].Host != "a2" || !strings.Contains(rs[0].Fix(), "--ignore-preflight-errors=NodePaths") {
		t.Errorf("%+v", rs[0])
	}
}
