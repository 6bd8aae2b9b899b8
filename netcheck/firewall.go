// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/firewall"
	"github.com/k3strap/k3strap/k3s"
)

// A drop is one rule (or chain policy) of one host that drops traffic K3s needs.
type drop struct {
	// host is the host whose ruleset drops; out says the drop is on the way out of it.
	host string
	out  bool
	d    firewall.Decision
	// ports are the ports it drops ("udp/8472 (flannel VXLAN)"), peers the other nodes whose
	// traffic it drops, pods whether it is pod traffic.
	ports []k3s.NodePort
	peers []string
	pods  string
}

func (d *drop) key() string {
	dir := "in"
	if d.out {
		dir = "out"
	}
	return fmt.Sprintf("%s %s %s %d %s", d.host, dir, d.d.By.Chain.Where(), d.d.By.Index, d.pods)
}

func (d *drop) addPort(p k3s.NodePort) {
	for _, q := range d.ports {
		if q.Proto == p.Proto && q.Port == p.Port {
			return
		}
	}
	d.ports = append(d.ports, p)
}

func (d *drop) addPeer(n string) {
	if n != "" && !slices.Contains(d.peers, n) {
		d.peers = append(d.peers, n)
	}
}

// srcAddr is the address a node's traffic to p leaves with: flannel's address for the
// overlay, the node address otherwise.
func srcAddr(n *Node, p k3s.NodePort) netip.Addr {
	if p.Overlay {
		a, _, _ := n.FlannelAddr()
		return a
	}
	a, _ := n.NodeAddr()
	return a
}

// ifaceFor is the interface of n that holds a, or routes to a ("" unknown).
func ifaceFor(n *Node, a netip.Addr, local bool) string {
	if n.Net == nil || !a.IsValid() {
		return ""
	}
	if local {
		if i := n.Net.InterfaceOf(a); i != nil {
			return i.Name
		}
		return ""
	}
	if r := n.Net.RouteTo(a); r != nil {
		return r.Dev
	}
	return ""
}

// nodePortDrops evaluates every host's ruleset for the traffic of every node port: what
// arrives from each peer (input) and what leaves for each peer (output). Drops are grouped by
// the rule that drops.
func nodePortDrops(c *Cluster) []*drop {
	byKey := map[string]*drop{}
	var out []*drop
	add := func(host string, outDir bool, d firewall.Decision, p k3s.NodePort, peer string) {
		k := (&drop{host: host, out: outDir, d: d}).key()
		dr := byKey[k]
		if dr == nil {
			dr = &drop{host: host, out: outDir, d: d}
			byKey[k] = dr
			out = append(out, dr)
		}
		dr.addPort(p)
		dr.addPeer(peer)
		if !d.Certain() && dr.d.Certain() {
			dr.d.Uncertain = d.Uncertain
		}
	}
	addrs := newPathAddrs(c) // srcAddr and ProbeAddr are the same rule
	c.eachPath(func(p k3s.NodePort, i, j int) {
		from, to := &c.Nodes[i], &c.Nodes[j]
		src, dst := addrs.of(i, p), addrs.of(j, p)
		if !src.IsValid() || !dst.IsValid() {
			return
		}
		pk := firewall.Packet{Family: family(dst), Proto: p.Proto, Src: src, Dst: dst, DPort: p.Port}
		if to.Net != nil && to.Net.Ruleset != nil {
			in := pk
			in.Hook, in.Iif = "input", ifaceFor(to, dst, true)
			if d := to.Net.Ruleset.Evaluate(in); d.Outcome == firewall.Dropped {
				add(to.Name, false, d, p, from.Name)
			}
		}
		if from.Net != nil && from.Net.Ruleset != nil {
			o := pk
			o.Hook, o.Oif = "output", ifaceFor(from, dst, false)
			if d := from.Net.Ruleset.Evaluate(o); d.Outcome == firewall.Dropped {
				add(from.Name, true, d, p, to.Name)
			}
		}
	})
	return out
}

// podDrops evaluates what pods need of each host's filter: pods reaching the node's own
// K3s ports (the kubernetes Service's endpoint is the API server on a server node; the
// metrics server reaches every kubelet), and pod traffic forwarded through the node.
func podDrops(c *Cluster) []*drop {
	if c.FlannelBackend == "none" || len(c.ClusterCIDRs) == 0 {
		return nil
	}
	var out []*drop
	byKey := map[string]*drop{}
	pod := podAddr(c.ClusterCIDRs[0], 5)
	pod2 := podAddr(c.ClusterCIDRs[0], 300)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil || n.Net.Ruleset == nil || !pod.IsValid() {
			continue
		}
		addr, _ := n.NodeAddr()
		var pks []firewall.Packet
		var what []string
		for _, p := range c.Ports {
			if p.Overlay || !p.To.Has(n.Server) || p.Proto != "tcp" || family(addr) != family(pod) {
				continue
			}
			if p.Port != 6443 && p.Port != 10250 {
				continue
			}
			pks = append(pks, firewall.Packet{Family: family(pod), Proto: "tcp", Src: pod, Dst: addr, DPort: p.Port, Iif: "cni0", Hook: "input"})
			what = append(what, fmt.Sprintf("pods to %s's %s (TCP %d)", n.Name, p.Purpose, p.Port))
		}
		pks = append(pks,
			firewall.Packet{Family: family(pod), Proto: "tcp", Src: pod, Dst: pod2, DPort: 8080, Iif: "cni0", Oif: overlayIface(c), Hook: "forward"},
			firewall.Packet{Family: family(pod), Proto: "udp", Src: pod2, Dst: pod, DPort: 53, Iif: overlayIface(c), Oif: "cni0", Hook: "forward"})
		what = append(what, "pod traffic to other nodes, forwarded (TCP from "+c.ClusterCIDRs[0].String()+")", "pod traffic from other nodes, forwarded (DNS to a CoreDNS pod)")
		for k, pk := range pks {
			d := n.Net.Ruleset.Evaluate(pk)
			if d.Outcome != firewall.Dropped {
				continue
			}
			dr := &drop{host: n.Name, d: d, pods: what[k]}
			if old := byKey[dr.key()]; old != nil {
				continue
			}
			byKey[dr.key()] = dr
			out = append(out, dr)
		}
	}
	return out
}

func overlayIface(c *Cluster) string {
	if strings.HasPrefix(strings.ToLower(c.FlannelBackend), "wireguard") {
		return "flannel-wg"
	}
	return "flannel.1"
}

// podAddr is an address in the n-th /24 of the pod range, host 2.
func podAddr(p netip.Prefix, n int) netip.Addr {
	if !p.Addr().Is4() {
		a := p.Masked().Addr().As16()
		a[13], a[15] = byte(n), 2
		return netip.AddrFrom16(a)
	}
	a := p.Masked().Addr().As4()
	a[2] += byte(n % 256)
	a[1] += byte(n / 256)
	a[3] = 2
	ad := netip.AddrFrom4(a)
	if !p.Contains(ad) {
		return p.Masked().Addr().Next().Next()
	}
	return ad
}

// manager says who owns the rule that drops: firewalld (its table inet firewalld), ufw (its
// ufw-* chains, and the INPUT/FORWARD policies its default deny sets), or the host's own rules
// ("").
func manager(n *Node, by firewall.RuleRef) string {
	ch := by.Chain
	ufw := n.Net != nil && n.Net.UFW.Active()
	switch {
	case ch.Backend == firewall.Nftables && ch.Table == "firewalld":
		return "firewalld"
	case strings.HasPrefix(ch.Name, "ufw-"), strings.HasPrefix(ch.Name, "ufw6-"):
		return "ufw"
	case ufw && ch.Backend != firewall.Nftables && ch.Table == "filter" && by.Rule() == nil && (ch.Name == "INPUT" || ch.Name == "FORWARD"):
		return "ufw"
	}
	return ""
}

func portList(ps []k3s.NodePort) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s %d (%s)", strings.ToUpper(p.Proto), p.Port, p.Purpose))
	}
	return strings.Join(s, ", ")
}

// fixFor returns the fix and exact commands for a drop: firewall-cmd for firewalld, ufw for
// ufw, otherwise removing the rule (or, for a chain's policy, inserting accepts before it).
func fixFor(c *Cluster, n *Node, dr *drop) (string, []string) {
	ch := dr.d.By.Chain
	rule := dr.d.By.Rule()
	peersAddr := func() []string {
		var out []string
		for _, name := range dr.peers {
			if p := c.Node(name); p != nil && len(dr.ports) > 0 {
				a := srcAddr(p, dr.ports[0])
				if dr.out {
					a = p.ProbeAddr(dr.ports[0])
				}
				if a.IsValid() {
					out = append(out, a.String())
				}
			}
		}
		return out
	}
	switch manager(n, dr.d.By) {
	case "firewalld":
		var cmds []string
		if dr.pods != "" {
			for _, cidr := range append(slices.Clone(c.ClusterCIDRs), c.ServiceCIDRs...) {
				cmds = append(cmds, "firewall-cmd --permanent --zone=trusted --add-source="+cidr.String())
			}
		} else {
			zone := ""
			if n.Net != nil && n.Net.Firewalld != nil {
				dst := n.ProbeAddr(dr.ports[0])
				if z := n.Net.Firewalld.ZoneOf(netip.Addr{}, ifaceFor(n, dst, true)); z != nil {
					zone = " --zone=" + z.Name
				}
			}
			for _, p := range dr.ports {
				cmds = append(cmds, fmt.Sprintf("firewall-cmd --permanent%s --add-port=%d/%s", zone, p.Port, p.Proto))
			}
		}
		cmds = append(cmds, "firewall-cmd --reload")
		return "open it in firewalld (K3s's documented rules: docs.k3s.io Requirements → firewalld), or stop firewalld (systemctl disable --now firewalld)", cmds
	case "ufw":
		var cmds []string
		if dr.pods != "" {
			for _, cidr := range append(slices.Clone(c.ClusterCIDRs), c.ServiceCIDRs...) {
				cmds = append(cmds, "ufw allow from "+cidr.String()+" to any")
			}
			if strings.Contains(dr.pods, "forwarded") {
				cmds = append(cmds, "ufw route allow from "+c.ClusterCIDRs[0].String())
			}
		} else {
			for _, p := range dr.ports {
				for _, a := range peersAddr() {
					cmds = append(cmds, fmt.Sprintf("ufw allow proto %s from %s to any port %d", p.Proto, a, p.Port))
				}
			}
		}
		return "allow it in ufw (K3s's documented rules: docs.k3s.io Requirements → ufw), or turn ufw off (ufw disable)", cmds
	}
	if rule != nil {
		return "remove the rule (or narrow it so it leaves K3s's traffic alone), and remove it from the host's saved firewall configuration too", []string{deleteCommand(ch, rule)}
	}
	// a chain policy drops: insert accepts in front of it
	var cmds []string
	if dr.pods != "" {
		for _, cidr := range c.ClusterCIDRs {
			cmds = append(cmds, acceptCommand(ch, "", "", 0, cidr.String(), dr.out))
		}
	} else {
		for _, p := range dr.ports {
			cmds = append(cmds, acceptCommand(ch, strings.Join(peersAddr(), ","), p.Proto, p.Port, "", dr.out))
		}
	}
	return "accept K3s's traffic before the chain's policy drops it, and save that in the host's firewall configuration", cmds
}

// deleteCommand removes one rule.
func deleteCommand(ch *firewall.Chain, r *firewall.Rule) string {
	if ch.Backend == firewall.Nftables {
		return fmt.Sprintf("nft delete rule %s %s %s handle %d", ch.Family, ch.Table, ch.Name, r.Handle)
	}
	return fmt.Sprintf("%s -t %s -D %s %d", toolOf(ch), ch.Table, ch.Name, r.Handle)
}

// acceptCommand inserts an accept for peers (comma-separated addresses) on proto/port, or for
// a source prefix, at the top of the chain.
func acceptCommand(ch *firewall.Chain, peers, proto string, port int, src string, out bool) string {
	if ch.Backend == firewall.Nftables {
		var m []string
		fam := "ip"
		if ch.Family == "ip6" || strings.Contains(peers+src, ":") {
			fam = "ip6"
		}
		dir := "saddr"
		if out {
			dir = "daddr"
		}
		if peers != "" {
			m = append(m, fmt.Sprintf("%s %s { %s }", fam, dir, strings.ReplaceAll(peers, ",", ", ")))
		}
		if src != "" {
			m = append(m, fmt.Sprintf("%s saddr %s", fam, src))
		}
		if proto != "" {
			m = append(m, fmt.Sprintf("%s dport %d", proto, port))
		}
		return fmt.Sprintf("nft insert rule %s %s %s %s accept", ch.Family, ch.Table, ch.Name, strings.Join(m, " "))
	}
	var m []string
	if peers != "" {
		if out {
			m = append(m, "-d "+peers)
		} else {
			m = append(m, "-s "+peers)
		}
	}
	if src != "" {
		m = append(m, "-s "+src)
	}
	if proto != "" {
		m = append(m, fmt.Sprintf("-p %s --dport %d", proto, port))
	}
	return fmt.Sprintf("%s -t %s -I %s %s -j ACCEPT", toolOf(ch), ch.Table, ch.Name, strings.Join(m, " "))
}

func toolOf(ch *firewall.Chain) string {
	six := ch.Family == "ip6"
	t := "iptables"
	if six {
		t = "ip6tables"
	}
	if ch.Backend == firewall.IptablesLegacy {
		return t + "-legacy"
	}
	return t
}

// ruleEvidence describes the deciding rule and its counter.
func ruleEvidence(n *Node, dr *drop) []finding.Evidence {
	src := n.Name + ": " + rulesetSource(dr.d.By.Chain)
	ev := []finding.Evidence{{Text: dropText(dr.d), Source: src}}
	if r := dr.d.By.Rule(); r != nil && r.Counter != nil {
		ev = append(ev, finding.Evidence{Text: fmt.Sprintf("its counter: %d packets, %d bytes dropped so far", r.Counter.Packets, r.Counter.Bytes), Source: src})
	}
	for _, u := range dr.d.Uncertain {
		ev = append(ev, finding.Evidence{Text: "unless this rule, which k3strap cannot evaluate, lets it through first: " + u.String(), Source: src})
	}
	return ev
}

func dropText(d firewall.Decision) string {
	verb := "dropped"
	if d.Rejected {
		verb = "rejected"
	}
	return verb + " by " + d.By.String()
}

func rulesetSource(ch *firewall.Chain) string {
	switch ch.Backend {
	case firewall.IptablesLegacy:
		return toolOf(ch) + "-save"
	case firewall.IptablesNft:
		return toolOf(ch) + "-nft-save"
	}
	return "nft -j list ruleset"
}

// HostFirewalls judges what each host's filter does to pod traffic (HostFirewall), and, when
// the filter cannot be read, what firewalld and ufw say they allow. Drops of node-to-node
// traffic are NodePaths results (FirewallPaths), so that one cause gives one finding.
func HostFirewalls(c *Cluster) []finding.Finding {
	var out []finding.Finding
	for _, dr := range podDrops(c) {
		n := c.Node(dr.host)
		fix, cmds := fixFor(c, n, dr)
		sev := finding.Error
		if !dr.d.Certain() {
			sev = finding.Warning
		}
		out = append(out, finding.Finding{ID: HostFirewall, Severity: sev, Host: dr.host,
			Title: fmt.Sprintf("%s's firewall drops %s", dr.host, dr.pods),
			Message: fmt.Sprintf("%s's packet filter drops %s (%s). Pods on %s then cannot reach what they need (the API server through the kubernetes Service, CoreDNS, pods on other nodes), although the nodes reach each other.",
				dr.host, dr.pods, dropText(dr.d), dr.host),
			Evidence: ruleEvidence(n, dr), Fixes: finding.Fixes(fix), Commands: cmds})
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil || n.Net.Ruleset != nil {
			continue
		}
		if r, ok := managerOnly(c, n); ok {
			out = append(out, r)
		}
	}
	return out
}

// managerOnly judges firewalld's zones or ufw's status when the ruleset itself was not read.
func managerOnly(c *Cluster, n *Node) (finding.Finding, bool) {
	var missing []k3s.NodePort
	if f := n.Net.Firewalld; f.Running() {
		for _, p := range append(slices.Clone(c.Ports), c.Extra...) {
			if !p.To.Has(n.Server) {
				continue
			}
			z := f.ZoneOf(netip.Addr{}, ifaceFor(n, n.ProbeAddr(p), true))
			if z != nil && !z.Allows(p.Proto, p.Port) {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return finding.Finding{}, false
		}
		var cmds []string
		for _, p := range missing {
			cmds = append(cmds, fmt.Sprintf("firewall-cmd --permanent --add-port=%d/%s", p.Port, p.Proto))
		}
		for _, cidr := range append(slices.Clone(c.ClusterCIDRs), c.ServiceCIDRs...) {
			cmds = append(cmds, "firewall-cmd --permanent --zone=trusted --add-source="+cidr.String())
		}
		cmds = append(cmds, "firewall-cmd --reload")
		return finding.Finding{ID: HostFirewall, Severity: finding.Warning, Host: n.Name,
			Title:    "firewalld runs on " + n.Name + " and its zone does not allow " + portList(missing),
			Message:  fmt.Sprintf("firewalld is running on %s and the zone of its K3s interface does not list %s (its ruleset could not be read to see more).", n.Name, portList(missing)),
			Evidence: []finding.Evidence{{Text: "firewall-cmd --state: running; default zone " + f.DefaultZone, Source: n.Name + ": firewall-cmd"}},
			Fixes:    finding.Fixes("open K3s's ports and trust the pod and service ranges (docs.k3s.io Requirements → firewalld), or stop firewalld"),
			Commands: cmds}, true
	}
	if u := n.Net.UFW; u.Active() && u.DefaultIncoming != "allow" {
		return finding.Finding{ID: HostFirewall, Severity: finding.Warning, Host: n.Name,
			Title:    "ufw is active on " + n.Name + " with incoming " + u.DefaultIncoming,
			Message:  fmt.Sprintf("ufw is active on %s (default incoming %s, routed %s) and its rules could not be read to see whether K3s's ports are open.", n.Name, u.DefaultIncoming, u.DefaultRouted),
			Evidence: []finding.Evidence{{Text: "ufw status: active", Source: n.Name + ": ufw status verbose"}},
			Fixes:    finding.Fixes("allow K3s's ports and the pod and service ranges (docs.k3s.io Requirements → ufw), or ufw disable"),
			Commands: []string{"ufw allow 6443/tcp", "ufw allow from " + cidrOr(c.ClusterCIDRs, "10.42.0.0/16") + " to any", "ufw allow from " + cidrOr(c.ServiceCIDRs, "10.43.0.0/16") + " to any"}}, true
	}
	return finding.Finding{}, false
}

func cidrOr(ps []netip.Prefix, def string) string {
	if len(ps) > 0 {
		return ps[0].String()
	}
	return def
}

// FirewallPaths is NodePaths from the hosts' rulesets: every rule that drops a node port
// between two nodes, with the nodes it cuts off and the flannel state that shows the traffic
// is being sent (doctor; and preflight for the ports it could not probe). only, when not
// nil, limits it to drops of those target hosts and ports ("host proto/port").
func FirewallPaths(c *Cluster, only map[string]bool) []finding.Finding {
	var out []finding.Finding
	drops := nodePortDrops(c)
	sort.SliceStable(drops, func(i, j int) bool { return drops[i].host < drops[j].host })
	for _, dr := range drops {
		if only != nil {
			keep := false
			for _, p := range dr.ports {
				if only[fmt.Sprintf("%s %s/%d", dr.host, p.Proto, p.Port)] {
					keep = true
				}
			}
			if !keep {
				continue
			}
		}
		n := c.Node(dr.host)
		fix, cmds := fixFor(c, n, dr)
		sev := finding.Error
		if !dr.d.Certain() {
			sev = finding.Warning
		}
		dir := fmt.Sprintf("from %s to %s", names(dr.peers), dr.host)
		if dr.out {
			dir = fmt.Sprintf("from %s to %s", dr.host, names(dr.peers))
		}
		r := finding.Finding{ID: NodePaths, Severity: sev, Host: dr.host, Peers: dr.peers,
			Title: fmt.Sprintf("%s's firewall cuts %s off from %s on %s", dr.host, dr.host, names(dr.peers), portList(dr.ports)),
			Message: fmt.Sprintf("%s's packet filter %s %s traffic %s: %s.%s",
				dr.host, strings.Fields(dropText(dr.d))[0], portList(dr.ports), dir, consequence(dr.ports, dr.host, dr.peers), dropDetail(dr.d)),
			Evidence: ruleEvidence(n, dr), Fixes: finding.Fixes(fix), Commands: cmds}
		r.Evidence = append(r.Evidence, flannelEvidence(c, dr)...)
		out = append(out, r)
	}
	return out
}

func dropDetail(d firewall.Decision) string {
	return " The rule: " + d.By.String() + "."
}

// consequence says what a blocked port does to the cluster.
func consequence(ps []k3s.NodePort, host string, peers []string) string {
	var c []string
	for _, p := range ps {
		switch {
		case p.Overlay:
			c = append(c, fmt.Sprintf("pods on %s cannot talk to pods on %s (the overlay carries both directions' traffic to the node's VXLAN/WireGuard port)", host, names(peers)))
		case p.Port == 6443:
			c = append(c, "agents cannot join or reach the API server")
		case p.Port == 10250:
			c = append(c, "kubectl logs/exec and metrics fail for pods on "+host)
		case p.Port == 2379 || p.Port == 2380:
			c = append(c, "etcd members cannot replicate (quorum at risk)")
		case p.Port == 5001:
			c = append(c, "the embedded registry cannot share images")
		default:
			c = append(c, p.Purpose+" fails")
		}
	}
	return strings.Join(dedupe(c), "; ")
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// flannelEvidence shows, for an overlay drop on a running cluster, that the peers do send
// the node's overlay traffic there: the node's public-ip annotation and the peers' FDB
// entries for its VTEP MAC.
func flannelEvidence(c *Cluster, dr *drop) []finding.Evidence {
	overlay := false
	for _, p := range dr.ports {
		overlay = overlay || p.Overlay
	}
	n := c.Node(dr.host)
	if !overlay || n == nil || n.Running == nil || dr.out {
		return nil
	}
	var ev []finding.Evidence
	if n.Running.PublicIP.IsValid() {
		ev = append(ev, finding.Evidence{Text: fmt.Sprintf("flannel.alpha.coreos.com/public-ip: %s (VtepMAC %s)", n.Running.PublicIP, n.Running.VtepMAC), Source: "kubectl get node " + n.Name})
	}
	for _, name := range dr.peers {
		p := c.Node(name)
		if p == nil || p.Net == nil {
			continue
		}
		for _, e := range p.Net.FDB {
			if e.Dst == n.Running.PublicIP.String() || (n.Running.VtepMAC != "" && strings.EqualFold(e.MAC, n.Running.VtepMAC)) {
				ev = append(ev, finding.Evidence{Text: fmt.Sprintf("%s sends %s's VXLAN traffic to %s (FDB %s dst %s)", name, n.Name, e.Dst, e.MAC, e.Dst), Source: name + ": bridge fdb show dev " + e.Dev})
			}
		}
	}
	return ev
}
