// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/firewall"
	"github.com/k3strap/k3strap/k3s"
)

// Paths judges a path check (NodePaths, PathMTU): one NodePaths error per target host and
// port that some source could not reach, naming the sources, the port's purpose, what each
// probe saw and — when a ruleset on either end explains it — the rule; one NodePaths error
// per host the check could not run on; NodePaths from the rulesets for the UDP ports a
// running K3s holds; one PathMTU error per source whose full-size overlay packets were lost,
// with the largest size that got through and the flannel MTU that fits.
func Paths(c *Cluster, rep *PathReport) []finding.Finding {
	if rep == nil {
		return nil
	}
	var out []finding.Finding
	hosts := make([]string, 0, len(rep.Hosts))
	for h := range rep.Hosts {
		hosts = append(hosts, h)
	}
	sort.Slice(hosts, func(i, j int) bool { return nodeIndex(c, hosts[i]) < nodeIndex(c, hosts[j]) })
	for _, h := range hosts {
		why := rep.Hosts[h]
		out = append(out, finding.Finding{ID: NodePaths, Severity: finding.Error, Host: h,
			Title:    "the path check cannot run on " + h,
			Message:  fmt.Sprintf("k3strap could not test the paths to and from %s: %s.", h, why),
			Evidence: []finding.Evidence{{Text: why, Source: h + ": path probe"}},
			Fixes:    finding.Fixes("install perl (perl-base) or python3 on " + h + " so the path check can run there, or accept the risk with --ignore-preflight-errors=" + NodePaths)})
	}

	type key struct {
		to    string
		proto string
		port  int
	}
	groups := map[key][]PathResult{}
	var order []key
	untestedUDP := map[string]bool{}
	for _, r := range rep.Results {
		k := key{r.To, r.Port.Proto, r.Port.Port}
		switch {
		case r.Status == PathFailed:
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], r)
		case r.Status == PathUntested && rep.Hosts[r.From] == "" && rep.Hosts[r.To] == "":
			untestedUDP[fmt.Sprintf("%s %s/%d", r.To, r.Port.Proto, r.Port.Port)] = true
		}
	}
	drops := nodePortDrops(c)
	for _, k := range order {
		rs := groups[k]
		p := rs[0].Port
		var srcs []string
		var ev []finding.Evidence
		for _, r := range rs {
			srcs = append(srcs, r.From)
			ev = append(ev, finding.Evidence{Text: fmt.Sprintf("%s → %s (%s) %s %d: %s", r.From, r.To, r.Addr, strings.ToUpper(p.Proto), p.Port, r.Detail), Source: r.From + ": path probe"})
		}
		res := finding.Finding{ID: NodePaths, Severity: finding.Error, Host: k.to, Peers: srcs,
			Title: fmt.Sprintf("%s %d (%s) on %s is not reachable from %s", strings.ToUpper(p.Proto), p.Port, p.Purpose, k.to, names(srcs)),
			Message: fmt.Sprintf("%s cannot reach %s on %s %d, which K3s needs for the %s (%s → %s): %s.",
				names(srcs), k.to, strings.ToUpper(p.Proto), p.Port, p.Purpose, p.From, p.To, consequence([]k3s.NodePort{p}, k.to, srcs)),
			Evidence: ev,
			Fixes:    finding.Fixes(fmt.Sprintf("open %s %d on %s for %s, in its own firewall and in anything between them (security groups, network firewalls)", strings.ToUpper(p.Proto), p.Port, k.to, names(srcs)))}
		// a ruleset on either end that explains it
		for _, dr := range drops {
			if !slices.ContainsFunc(dr.ports, func(q k3s.NodePort) bool { return q.Proto == p.Proto && q.Port == p.Port }) {
				continue
			}
			if (!dr.out && dr.host == k.to && overlaps(dr.peers, srcs)) || (dr.out && slices.Contains(srcs, dr.host) && slices.Contains(dr.peers, k.to)) {
				n := c.Node(dr.host)
				res.Evidence = append(res.Evidence, ruleEvidence(n, dr)...)
				fix, cmds := fixFor(c, n, dr)
				res.Message += " " + dr.host + "'s packet filter " + strings.Fields(dropText(dr.d))[0] + " it: " + dr.d.By.String() + "."
				res.Fixes = finding.Fixes(fix)
				res.Commands = append(res.Commands, cmds...)
			}
		}
		out = append(out, res)
	}
	if len(untestedUDP) > 0 {
		out = append(out, FirewallPaths(c, untestedUDP)...)
	}
	out = append(out, pathMTU(c, rep)...)
	return out
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func nodeIndex(c *Cluster, name string) int {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return i
		}
	}
	return len(c.Nodes)
}

// pathMTU reports the sources whose full-size overlay packets did not arrive.
func pathMTU(c *Cluster, rep *PathReport) []finding.Finding {
	_, overhead := c.Overlay()
	bySrc := map[string][]MTUResult{}
	var srcs []string
	for _, m := range rep.MTU {
		if m.Fits() {
			continue
		}
		if _, ok := bySrc[m.From]; !ok {
			srcs = append(srcs, m.From)
		}
		bySrc[m.From] = append(bySrc[m.From], m)
	}
	var out []finding.Finding
	for _, s := range srcs {
		ms := bySrc[s]
		var targets []string
		var ev []finding.Evidence
		best := 0
		mtu := ms[0].IfaceMTU
		for _, m := range ms {
			targets = append(targets, m.To)
			txt := fmt.Sprintf("%s → %s (%s) UDP %d: %d-byte packets with don't-fragment lost", m.From, m.To, m.Addr, m.Port, m.Tried)
			switch {
			case m.Step > 0 && m.Largest > 0:
				txt += fmt.Sprintf("; the largest that arrived: %d bytes", m.Largest)
			case m.Step > 0:
				txt += fmt.Sprintf("; none of %d down to %d bytes arrived", m.Tried-ladderStep, ladderFloor)
			}
			if m.LocalPMTU > 0 {
				txt += fmt.Sprintf("; %s's kernel knows the path MTU as %d", m.From, m.LocalPMTU)
			}
			ev = append(ev, finding.Evidence{Text: txt, Source: m.From + ": path probe"})
			if m.Step > 0 && m.Largest > 0 && (best == 0 || m.Largest < best) {
				best = m.Largest
			}
		}
		iface := ""
		if n := c.Node(s); n != nil && n.Net != nil {
			if r := n.Net.RouteTo(ms[0].Addr); r != nil {
				iface = r.Dev
			}
		}
		if iface == "" {
			iface = "the node interface"
		}
		r := finding.Finding{ID: PathMTU, Severity: finding.Error, Host: s, Peers: targets,
			Title:    fmt.Sprintf("the path from %s to %s carries less than %s's MTU %d", s, names(targets), iface, mtu),
			Evidence: ev}
		if best > 0 {
			r.Message = fmt.Sprintf("Packets of %d bytes (the MTU of %s on %s) do not get from %s to %s; at most %d do. Flannel sends pod packets of up to the interface MTU once encapsulated (the overlay adds %d bytes; pods get MTU %d), so large pod packets between these nodes are silently lost: connections open and then hang. The flannel MTU that fits is %d.",
				mtu, iface, s, s, names(targets), best, overhead, mtu-overhead, best-overhead)
			r.Fixes = finding.Fixes(fmt.Sprintf("set the MTU of %s to %d on every node (and make it permanent in the host's network configuration), so flannel gives pods %d; or raise the MTU of the link in between to %d", iface, best, best-overhead, mtu))
			r.Commands = []string{fmt.Sprintf("ip link set dev %s mtu %d", iface, best)}
		} else {
			r.Message = fmt.Sprintf("Packets of %d bytes (the MTU of %s on %s) do not get from %s to %s. Flannel sends encapsulated pod packets of that size (the overlay adds %d bytes), so large pod packets between these nodes are lost.",
				mtu, iface, s, s, names(targets), overhead)
			r.Fixes = finding.Fixes(fmt.Sprintf("find the link with the smaller MTU between %s and %s and lower %s's MTU to it on every node, or raise that link's", s, names(targets), iface))
		}
		out = append(out, r)
	}
	return out
}

// NodeAddresses judges each node's address (NodeAddress): node-ip and flannel-iface must
// name the host's own address and interface; when the inventory address is on another
// interface than the one K3s picks by itself (the default route's), the node registers with
// an InternalIP (and flannel announces a public-ip) the other nodes do not use — a warning
// with the node-ip / flannel-iface keys that fix it. On a running node the InternalIP and
// public-ip annotation are compared the same way.
func NodeAddresses(c *Cluster, configPath func(host, key string) string) []finding.Finding {
	var out []finding.Finding
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil || len(n.Net.Interfaces) == 0 {
			continue
		}
		src := n.Name + ": ip -j addr, ip -j route"
		var errs []string
		for _, s := range n.NodeIP {
			for _, f := range strings.Split(s, ",") {
				a, err := netip.ParseAddr(strings.TrimSpace(f))
				if err == nil && n.Net.InterfaceOf(a) == nil {
					errs = append(errs, fmt.Sprintf("node-ip %s is not an address of %s (its addresses: %s)", a, n.Name, addrList(n.Net)))
				}
			}
		}
		if n.FlannelIface != "" && n.Running == nil {
			ifc := n.Net.Interface(n.FlannelIface)
			switch {
			case ifc == nil:
				errs = append(errs, fmt.Sprintf("flannel-iface %s does not exist on %s (its interfaces: %s): K3s exits with \"unable to find interface %s\"", n.FlannelIface, n.Name, ifaceList(n.Net), n.FlannelIface))
			case len(ifc.GlobalAddrs(4))+len(ifc.GlobalAddrs(6)) == 0:
				errs = append(errs, fmt.Sprintf("flannel-iface %s has no address on %s", n.FlannelIface, n.Name))
			}
		}
		if len(errs) > 0 {
			out = append(out, finding.Finding{ID: NodeAddress, Severity: finding.Error, Host: n.Name,
				Title: "K3s's address settings do not match " + n.Name + "'s interfaces", Message: strings.Join(errs, "; ") + ".",
				Evidence: []finding.Evidence{{Text: "addresses: " + addrList(n.Net), Source: src}},
				Fixes:    finding.Fixes("set node-ip to an address of the host and flannel-iface to the interface that holds it (" + configPath(n.Name, "node-ip") + ")")})
			continue
		}
		want := n.Address
		if !want.IsValid() || n.Net.InterfaceOf(want) == nil {
			// The inventory names the host by a name, or by an address it does not have
			// (NAT, a bastion): nothing to compare with, except a running node's two
			// addresses.
			if n.Running != nil {
				want, _ = n.NodeAddr()
			} else {
				continue
			}
		}
		wantIf := n.Net.InterfaceOf(want)
		if wantIf == nil {
			continue
		}
		nodeAddr, nodeHow := n.NodeAddr()
		flAddr, flIf, flHow := n.FlannelAddr()
		var msgs, keys []string
		var cmds []string
		if nodeAddr != want {
			msgs = append(msgs, fmt.Sprintf("K3s registers %s with InternalIP %s (%s), not %s on %s", n.Name, nodeAddr, nodeHow, want, wantIf.Name))
			keys = append(keys, "node-ip: "+want.String())
		}
		if c.FlannelBackend != "none" && flAddr.IsValid() && flAddr != want {
			on := ""
			if flIf != "" {
				on = " on " + flIf
			}
			msgs = append(msgs, fmt.Sprintf("flannel announces %s%s as its public-ip (%s), so the other nodes send %s's pod traffic there instead of to %s", flAddr, on, flHow, n.Name, want))
			keys = append(keys, "flannel-iface: "+wantIf.Name)
		}
		if len(msgs) == 0 {
			continue
		}
		if len(keys) == 1 && strings.HasPrefix(keys[0], "node-ip") && n.FlannelIface == "" {
			// node-ip alone does not move flannel (k3s.FlannelAddress): name both keys.
			keys = append(keys, "flannel-iface: "+wantIf.Name)
		}
		what := "the address the inventory gives it"
		if n.Running != nil && n.Address != want {
			what = "its InternalIP"
		}
		ev := []finding.Evidence{{Text: "interfaces: " + addrList(n.Net), Source: src}}
		if r := n.Net.DefaultRoute(family(want)); r != nil {
			ev = append(ev, finding.Evidence{Text: fmt.Sprintf("default route via %s dev %s", r.Gateway, r.Dev), Source: src})
		}
		if n.Running != nil {
			ev = append(ev, finding.Evidence{Text: fmt.Sprintf("InternalIP %s, flannel public-ip %s", n.Running.InternalIP, n.Running.PublicIP), Source: "kubectl get node " + n.Name})
			cmds = append(cmds, "k3s kubectl get node "+n.Name+" -o wide   # after the change and a restart of K3s")
		}
		out = append(out, finding.Finding{ID: NodeAddress, Severity: finding.Warning, Host: n.Name,
			Title: fmt.Sprintf("%s has more than one interface and K3s would not use %s (%s)", n.Name, want, wantIf.Name),
			Message: fmt.Sprintf("%s is %s, but %s. Nodes that cannot reach the other address lose cross-node pod traffic without any error.",
				want, what, strings.Join(msgs, "; ")),
			Evidence: ev,
			Fixes:    finding.Fixes(fmt.Sprintf("set %s for %s (%s)", strings.Join(keys, " and "), n.Name, configPath(n.Name, strings.SplitN(keys[0], ":", 2)[0]))),
			Commands: cmds})
	}
	return out
}

func addrList(n *facts.Network) string {
	var s []string
	for _, i := range n.Interfaces {
		for _, a := range append(i.GlobalAddrs(4), i.GlobalAddrs(6)...) {
			s = append(s, fmt.Sprintf("%s on %s", a, i.Name))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func ifaceList(n *facts.Network) string {
	var s []string
	for _, i := range n.Interfaces {
		if i.Name != "lo" {
			s = append(s, i.Name)
		}
	}
	return strings.Join(s, ", ")
}

// NetworkManagers judges NetworkManager (NMCloudSetup, NetworkManager): nm-cloud-setup
// enabled is an error (docs.k3s.io Requirements → RHEL: it must be disabled, the node
// otherwise comes up without a working pod network); NetworkManager running without an
// unmanaged-devices rule for the CNI's interfaces (ifaces, e.g. cni0, flannel*) is a
// warning (it may take those interfaces over and change their routes).
func NetworkManagers(c *Cluster, ifaces []string) []finding.Finding {
	var out []finding.Finding
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil {
			continue
		}
		nm := n.Net.NetworkManager
		src := n.Name + ": systemctl is-enabled"
		if units := nm.CloudSetupEnabled(); len(units) > 0 {
			var ev []finding.Evidence
			for _, u := range units {
				ev = append(ev, finding.Evidence{Text: fmt.Sprintf("%s is %s (%s)", u, nm.Enabled[u], nm.Active[u]), Source: src})
			}
			out = append(out, finding.Finding{ID: NMCloudSetup, Severity: finding.Error, Host: n.Name,
				Title: "nm-cloud-setup is enabled on " + n.Name,
				Message: fmt.Sprintf("nm-cloud-setup (%s) is enabled on %s. It rewrites the host's routing rules and tables from the cloud's metadata and breaks the routes K3s's pod network needs; K3s requires it disabled (docs.k3s.io Requirements, RHEL).",
					strings.Join(units, ", "), n.Name),
				Evidence: ev,
				Fixes:    finding.Fixes("disable nm-cloud-setup and reboot the node (the reboot clears the rules it made)"),
				Commands: []string{"systemctl disable nm-cloud-setup.service nm-cloud-setup.timer", "reboot"}})
		}
		if !nm.Running() || len(ifaces) == 0 {
			continue
		}
		specs, from := nm.Unmanaged()
		var managed []string
		for _, name := range ifaces {
			probe := strings.ReplaceAll(name, "*", "1")
			if !facts.NMUnmanagedMatches(specs, probe) {
				managed = append(managed, name)
			}
		}
		if len(managed) == 0 {
			continue
		}
		ev := []finding.Evidence{{Text: "NetworkManager.service is active", Source: n.Name + ": systemctl is-active"}}
		if len(specs) > 0 {
			ev = append(ev, finding.Evidence{Text: "[keyfile] unmanaged-devices=" + strings.Join(specs, ";"), Source: n.Name + ": " + strings.Join(from, ", ")})
		} else {
			ev = append(ev, finding.Evidence{Text: "no [keyfile] unmanaged-devices in NetworkManager.conf or conf.d", Source: n.Name + ": /etc/NetworkManager"})
		}
		for _, d := range nm.Devices {
			for _, m := range managed {
				if globName(m, d.Device) && d.State != "unmanaged" {
					ev = append(ev, finding.Evidence{Text: fmt.Sprintf("%s (%s) is %s", d.Device, d.Type, d.State), Source: n.Name + ": nmcli device status"})
				}
			}
		}
		var specList []string
		for _, m := range managed {
			specList = append(specList, "interface-name:"+m)
		}
		conf := "[keyfile]\nunmanaged-devices=" + strings.Join(specList, ";")
		out = append(out, finding.Finding{ID: NetworkManager, Severity: finding.Warning, Host: n.Name,
			Title: "NetworkManager may manage " + strings.Join(managed, ", ") + " on " + n.Name,
			Message: fmt.Sprintf("NetworkManager runs on %s and no unmanaged-devices rule covers %s. It then treats the interfaces K3s's pod network creates as its own and may change their addresses and routes, which breaks pod networking (docs.k3s.io and docs.rke2.io Known Issues → NetworkManager).",
				n.Name, strings.Join(managed, ", ")),
			Evidence: ev,
			Fixes:    finding.Fixes("tell NetworkManager to leave them alone: write /etc/NetworkManager/conf.d/k3s.conf and reload NetworkManager"),
			Commands: []string{fmt.Sprintf("printf '%s\\n' > /etc/NetworkManager/conf.d/k3s.conf", strings.ReplaceAll(conf, "\n", "\\n")), "systemctl reload NetworkManager"}})
	}
	return out
}

func globName(pat, name string) bool {
	if base, ok := strings.CutSuffix(pat, "*"); ok {
		return strings.HasPrefix(name, base)
	}
	return pat == name
}

// ResolvConfs judges the resolver file K3s will give the kubelet (ResolvConf), by K3s's rule
// (k3s.UsableResolvConf over k3s.ResolvConfCandidates; docs/k3s.md#dns): a resolv-conf
// setting wins and must itself be usable (else CoreDNS forwards to the loopback resolver of
// each pod's node — to itself — and loops); without one, when no candidate is usable K3s
// writes its own file with 8.8.8.8 — an error when the cluster is airgapped (no way to
// 8.8.8.8), a warning otherwise.
func ResolvConfs(c *Cluster, airgap bool, configPath func(host, key string) string) []finding.Finding {
	var out []finding.Finding
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil || len(n.Net.Resolv) == 0 {
			continue
		}
		fix := func(extra string) string {
			return "write a resolver file with your upstream DNS servers (e.g. /etc/rancher/k3s/resolv.conf with `nameserver <upstream IP>`) and set resolv-conf to it (" + configPath(n.Name, "resolv-conf") + ")" + extra
		}
		if n.ResolvConfFlag != "" {
			f := n.Net.ResolvFile(n.ResolvConfFlag)
			if f == nil {
				continue
			}
			src := n.Name + ": " + f.Path
			if !f.Present {
				out = append(out, finding.Finding{ID: ResolvConf, Severity: finding.Error, Host: n.Name,
					Title:    "resolv-conf names a file " + n.Name + " does not have",
					Message:  fmt.Sprintf("resolv-conf is %s, which does not exist on %s: the kubelet cannot start pods.", f.Path, n.Name),
					Evidence: []finding.Evidence{{Text: f.Path + " does not exist", Source: src}}, Fixes: finding.Fixes(fix(""))})
				continue
			}
			if ns, why, ok := k3s.UsableResolvConf(f.Text); !ok {
				out = append(out, finding.Finding{ID: ResolvConf, Severity: finding.Error, Host: n.Name,
					Title:    "resolv-conf on " + n.Name + " names no usable nameserver",
					Message:  fmt.Sprintf("resolv-conf is %s on %s, and it has %s. K3s takes it as it is; CoreDNS then forwards to a loopback resolver inside its own pod (itself) and every lookup outside the cluster fails.", f.Path, n.Name, why),
					Evidence: []finding.Evidence{{Text: "nameservers: " + strings.Join(ns, " "), Source: src}}, Fixes: finding.Fixes(fix(""))})
			}
			continue
		}
		var ev []finding.Evidence
		usable := ""
		for _, p := range k3s.ResolvConfCandidates {
			f := n.Net.ResolvFile(p)
			if f == nil {
				continue
			}
			src := n.Name + ": " + p
			if !f.Present {
				ev = append(ev, finding.Evidence{Text: p + " does not exist", Source: src})
				continue
			}
			ns, why, ok := k3s.UsableResolvConf(f.Text)
			if ok {
				usable = p
				break
			}
			t := fmt.Sprintf("%s: %s (nameservers: %s)", p, why, strings.Join(ns, " "))
			if f.Link != "" {
				t += "; it is a link " + f.Link
			}
			ev = append(ev, finding.Evidence{Text: t, Source: src})
		}
		if usable != "" || len(ev) == 0 {
			continue
		}
		if f := n.Net.ResolvFile(k3s.ResolvConfFallbackFile); f != nil && f.Present {
			ev = append(ev, finding.Evidence{Text: "K3s already wrote " + f.Path + ": " + strings.TrimSpace(f.Text), Source: n.Name + ": " + f.Path})
		}
		if n.Running != nil {
			for _, l := range n.Running.Journal {
				if strings.Contains(l, "autogenerated resolv.conf") {
					ev = append(ev, finding.Evidence{Text: strings.TrimSpace(l), Source: n.Name + ": journal"})
					break
				}
			}
		}
		sev := finding.Warning
		reach := "Lookups outside the cluster work only if every node can reach 8.8.8.8."
		if airgap {
			sev = finding.Error
			reach = "The cluster is airgapped, so 8.8.8.8 is out of reach: every lookup outside the cluster fails."
		}
		out = append(out, finding.Finding{ID: ResolvConf, Severity: sev, Host: n.Name,
			Title: "no resolver file on " + n.Name + " that K3s can use",
			Message: fmt.Sprintf("Neither %s has a nameserver K3s accepts (every nameserver must be a global unicast address; loopback resolvers such as systemd-resolved's 127.0.0.53 are not). K3s then writes its own resolv.conf with nameserver %s for the kubelet, and CoreDNS forwards everything there. %s",
				strings.Join(k3s.ResolvConfCandidates, " nor "), k3s.ResolvConfFallback, reach),
			Evidence: ev, Fixes: finding.Fixes(fix(", or make one of the files K3s reads name your upstream resolvers"))})
	}
	return out
}

// IptablesBackendsUsed judges iptables in two backends (IptablesBackends): rules in both the
// legacy and the nf_tables backend. K3s, kube-proxy and flannel write into one backend (K3s's
// iptables detection picks the one with more rules, as kubernetes-sigs/iptables-wrappers
// does), while the kernel applies both: a DROP in the other backend still drops, and the
// counts can flip the choice between reboots.
func IptablesBackendsUsed(c *Cluster) []finding.Finding {
	var out []finding.Finding
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Net == nil || n.Net.Ruleset == nil {
			continue
		}
		rs := n.Net.Ruleset
		legacy := rs.RuleCount(firewall.IptablesLegacy)
		legacyDrop := false
		for _, ch := range rs.Chains {
			if ch.Backend == firewall.IptablesLegacy && ch.Policy == "drop" {
				legacyDrop = true
			}
		}
		nft := rs.RuleCount(firewall.IptablesNft)
		if (legacy == 0 && !legacyDrop) || nft == 0 {
			continue
		}
		src := n.Name + ": iptables-legacy-save, iptables-nft-save"
		ev := []finding.Evidence{{Text: fmt.Sprintf("%d iptables-legacy rules, %d iptables-nft rules", legacy, nft), Source: src}}
		if n.Net.IptablesVersion != "" {
			ev = append(ev, finding.Evidence{Text: "iptables --version: " + n.Net.IptablesVersion, Source: n.Name + ": iptables --version"})
		}
		shown := 0
		for _, ch := range rs.Chains {
			if ch.Backend != firewall.IptablesLegacy {
				continue
			}
			if ch.Policy == "drop" {
				ev = append(ev, finding.Evidence{Text: fmt.Sprintf("legacy %s %s policy DROP", ch.Table, ch.Name), Source: n.Name + ": iptables-legacy-save"})
			}
			for _, r := range ch.Rules {
				if shown < 3 {
					ev = append(ev, finding.Evidence{Text: fmt.Sprintf("legacy -A %s %s", ch.Name, r.Text), Source: n.Name + ": iptables-legacy-save"})
					shown++
				}
			}
		}
		out = append(out, finding.Finding{ID: IptablesBackends, Severity: finding.Warning, Host: n.Name,
			Title: n.Name + " has iptables rules in both backends (legacy and nf_tables)",
			Message: fmt.Sprintf("%s has %d rules in iptables-legacy and %d in iptables-nft. K3s's kube-proxy and flannel write their rules into one backend only, while the kernel applies both: the other backend's rules still drop what K3s accepts, and K3s's choice of backend can flip when the counts change (docs.k3s.io Known Issues → iptables).",
				n.Name, legacy, nft),
			Evidence: ev,
			Fixes:    finding.Fixes("keep one backend: move the legacy rules into nf_tables (iptables-nft) and flush the legacy tables, then make the host's firewall tools use iptables-nft (update-alternatives --set iptables /usr/sbin/iptables-nft on Debian/Ubuntu)"),
			Commands: []string{
				"iptables-legacy-save | iptables-nft-restore --noflush",
				"for t in filter nat mangle raw; do iptables-legacy -t $t -F; iptables-legacy -t $t -X; done",
				"iptables-legacy -P INPUT ACCEPT; iptables-legacy -P FORWARD ACCEPT; iptables-legacy -P OUTPUT ACCEPT",
			}})
	}
	return out
}
