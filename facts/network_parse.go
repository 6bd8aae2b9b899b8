// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/firewall"
)

// Parsing network.sh's sections of the facts document (and of doctor's node script)
// into Network.

// netParser collects what the network sections contribute before Network can be completed:
// the nftables document is read last, without the tables iptables-nft-save printed.
type netParser struct {
	nft      []byte
	nftSeen  bool
	ipt      []*firewall.Chain
	iptSkip  map[string]bool
	rulesets bool
}

func (p *parser) net(h *Host) *Network {
	if h.Network == nil {
		h.Network = &Network{}
	}
	return h.Network
}

func sectionText(s *section) string {
	var b strings.Builder
	for _, l := range s.body {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

func (n *Network) fail(section string, err error) {
	n.Errors = append(n.Errors, fmt.Sprintf("%s: %v", section, err))
}

// decode unmarshals the JSON of section s into v; false when the section is empty (the tool
// printed nothing) or not JSON (recorded as an error of what).
func (n *Network) decode(s *section, what string, v any) bool {
	text := strings.TrimSpace(sectionText(s))
	if text == "" {
		return false
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		n.fail(what, err)
		return false
	}
	return true
}

func parseNetAddr(p *parser, h *Host, s *section) error {
	n := p.net(h)
	switch s.arg {
	case "ip-j":
		var links []struct {
			Ifindex   int      `json:"ifindex"`
			Ifname    string   `json:"ifname"`
			Flags     []string `json:"flags"`
			MTU       int      `json:"mtu"`
			Operstate string   `json:"operstate"`
			Address   string   `json:"address"`
			Linkinfo  *struct {
				InfoKind string          `json:"info_kind"`
				InfoData json.RawMessage `json:"info_data"`
			} `json:"linkinfo"`
			AddrInfo []struct {
				Family    string `json:"family"`
				Local     string `json:"local"`
				Prefixlen int    `json:"prefixlen"`
				Scope     string `json:"scope"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal([]byte(sectionText(s)), &links); err != nil {
			n.fail("ip -j addr", err)
			return nil
		}
		for _, l := range links {
			ifc := Interface{Name: l.Ifname, Index: l.Ifindex, MTU: l.MTU, MAC: l.Address, Up: slices.Contains(l.Flags, "UP")}
			if l.Linkinfo != nil {
				ifc.Kind = l.Linkinfo.InfoKind
				if ifc.Kind == "vxlan" {
					var v VXLANInfo
					if json.Unmarshal(l.Linkinfo.InfoData, &v) == nil {
						ifc.VXLAN = &v
					}
				}
			}
			// Sized once: a host may hold hundreds of addresses, and the facts are kept for the
			// whole run (docs/preflight.md "Cost at scale").
			if len(l.AddrInfo) > 0 {
				ifc.Addrs = make([]IfAddr, 0, len(l.AddrInfo))
			}
			for _, a := range l.AddrInfo {
				ad, err := netip.ParseAddr(a.Local)
				if err != nil {
					continue
				}
				ifc.Addrs = append(ifc.Addrs, IfAddr{Prefix: netip.PrefixFrom(ad, a.Prefixlen), Scope: a.Scope})
			}
			n.Interfaces = append(n.Interfaces, ifc)
		}
	case "ip-o":
		parseIPOneline(n, s)
	}
	return nil
}

// parseIPOneline reads `ip -o addr show` and `ip -o link show` (iproute2 or BusyBox):
//
//	2: eth0    inet 10.0.0.2/24 brd 10.0.0.255 scope global eth0\ ...
//	2: eth0@if51: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc ... link/ether aa:bb:...
func parseIPOneline(n *Network, s *section) {
	get := func(name string) *Interface {
		if i := n.Interface(name); i != nil {
			return i
		}
		n.Interfaces = append(n.Interfaces, Interface{Name: name})
		return &n.Interfaces[len(n.Interfaces)-1]
	}
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 3 {
			continue
		}
		idx, _ := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		name := strings.TrimSuffix(f[1], ":")
		if at := strings.IndexByte(name, '@'); at > 0 {
			name = name[:at]
		}
		ifc := get(name)
		ifc.Index = idx
		if f[2] == "inet" || f[2] == "inet6" {
			if len(f) < 4 {
				continue
			}
			pf, err := netip.ParsePrefix(f[3])
			if err != nil {
				continue
			}
			scope := ""
			for i := 4; i+1 < len(f); i++ {
				if f[i] == "scope" {
					scope = f[i+1]
					break
				}
			}
			ifc.Addrs = append(ifc.Addrs, IfAddr{Prefix: pf, Scope: scope})
			continue
		}
		if strings.HasPrefix(f[2], "<") {
			ifc.Up = slices.Contains(strings.Split(strings.Trim(f[2], "<>"), ","), "UP")
			for i := 3; i+1 < len(f); i++ {
				switch f[i] {
				case "mtu":
					ifc.MTU, _ = strconv.Atoi(f[i+1])
				case "link/ether":
					ifc.MAC = f[i+1]
				}
			}
		}
	}
}

func parseNetRoute(p *parser, h *Host, s *section) error {
	n := p.net(h)
	fam := 4
	if s.name == "net-route6" {
		fam = 6
	}
	var rs []struct {
		Dst, Gateway, Dev, Prefsrc string
		Metric                     int
	}
	if !n.decode(s, s.name, &rs) {
		return nil
	}
	for _, r := range rs {
		n.Routes = append(n.Routes, NetRoute{Family: fam, Dst: r.Dst, Gateway: r.Gateway, Dev: r.Dev, Metric: r.Metric, PrefSrc: r.Prefsrc})
	}
	return nil
}

func parseNetFDB(p *parser, h *Host, s *section) error {
	n := p.net(h)
	var es []struct{ Mac, Dst string }
	if !n.decode(s, "bridge fdb", &es) {
		return nil
	}
	for _, e := range es {
		if e.Dst != "" {
			n.FDB = append(n.FDB, FDBEntry{Dev: s.arg, MAC: e.Mac, Dst: e.Dst})
		}
	}
	return nil
}

func parseNetNeigh(p *parser, h *Host, s *section) error {
	n := p.net(h)
	var es []struct {
		Dst    string   `json:"dst"`
		Lladdr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if !n.decode(s, "ip neigh", &es) {
		return nil
	}
	for _, e := range es {
		n.Neighbors = append(n.Neighbors, Neighbor{Dev: s.arg, Dst: e.Dst, MAC: e.Lladdr, State: e.State})
	}
	return nil
}

func parseNetNft(p *parser, h *Host, s *section) error {
	p.net(h)
	p.nn.nft = []byte(sectionText(s))
	p.nn.nftSeen = true
	return nil
}

func parseNetIptables(p *parser, h *Host, s *section) error {
	n := p.net(h)
	backend, fam, _ := strings.Cut(s.arg, " ")
	b := firewall.IptablesNft
	if backend == "legacy" {
		b = firewall.IptablesLegacy
	}
	text := sectionText(s)
	cs, err := firewall.ParseIptablesSave(text, fam, b)
	if err != nil {
		n.fail(string(b)+"-save", err)
		return nil
	}
	p.nn.rulesets = true
	n.RulesetRead = append(n.RulesetRead, string(b)+" "+fam)
	if b == firewall.IptablesLegacy && len(cs) > 0 {
		n.LegacyTables = true
	}
	if b == firewall.IptablesNft {
		if p.nn.iptSkip == nil {
			p.nn.iptSkip = map[string]bool{}
		}
		for _, c := range cs {
			p.nn.iptSkip[fam+" "+c.Table] = true
		}
	}
	p.nn.ipt = append(p.nn.ipt, cs...)
	return nil
}

// finishNetwork reads the nftables document without the iptables-nft tables and assembles
// the ruleset.
func (p *parser) finishNetwork(h *Host) {
	n := h.Network
	if n == nil {
		return
	}
	rs := &firewall.Ruleset{}
	if p.nn.nftSeen {
		cs, err := firewall.ParseNft(p.nn.nft, p.nn.iptSkip)
		if err != nil {
			// nft without root prints "Operation not permitted", not JSON
			n.fail("nft -j list ruleset", fmt.Errorf("%s", strings.TrimSpace(clip(string(p.nn.nft)))))
		} else {
			rs.Add(cs...)
			n.RulesetRead = append([]string{"nftables"}, n.RulesetRead...)
			p.nn.rulesets = true
		}
	}
	rs.Add(p.nn.ipt...)
	if p.nn.rulesets {
		n.Ruleset = rs
	}
}

func parseNetIptablesVersion(p *parser, h *Host, s *section) error {
	p.net(h).IptablesVersion = firstLine(s)
	return nil
}

// parseNetFirewalld reads state= and default-zone= lines, then `firewall-cmd
// --list-all-zones` (firewall-cmd(1); firewalld 0.4 to 2.x print the same shape): a zone
// header ("public (default, active)") followed by indented "key: values" lines.
func parseNetFirewalld(p *parser, h *Host, s *section) error {
	f := &Firewalld{}
	p.net(h).Firewalld = f
	var z *FirewalldZone
	for _, l := range s.body {
		t := l.text
		if k, v, ok := strings.Cut(t, "="); ok && (k == "state" || k == "default-zone") {
			if k == "state" {
				f.State = strings.TrimSpace(v)
			} else {
				f.DefaultZone = strings.TrimSpace(v)
			}
			continue
		}
		if strings.TrimSpace(t) == "" {
			continue
		}
		if t[0] != ' ' && t[0] != '\t' {
			name, rest, _ := strings.Cut(strings.TrimSpace(t), " ")
			f.Zones = append(f.Zones, FirewalldZone{Name: name,
				Default: strings.Contains(rest, "default"), Active: strings.Contains(rest, "active")})
			z = &f.Zones[len(f.Zones)-1]
			if z.Default && f.DefaultZone == "" {
				f.DefaultZone = name
			}
			continue
		}
		if z == nil {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(t), ":")
		if !ok {
			if z.RichRules != nil {
				z.RichRules = append(z.RichRules, strings.TrimSpace(t))
			}
			continue
		}
		vals := strings.Fields(v)
		switch k {
		case "target":
			z.Target = strings.TrimSpace(v)
		case "interfaces":
			z.Interfaces = vals
		case "sources":
			z.Sources = vals
		case "services":
			z.Services = vals
		case "ports":
			z.Ports = vals
		case "protocols":
			z.Protocols = vals
		case "rich rules":
			z.RichRules = []string{}
		default:
			if z.RichRules != nil && strings.HasPrefix(strings.TrimSpace(t), "rule ") {
				z.RichRules = append(z.RichRules, strings.TrimSpace(t))
			}
		}
	}
	if f.DefaultZone != "" {
		if dz := f.Zone(f.DefaultZone); dz != nil {
			dz.Default = true
		}
	}
	return nil
}

// parseNetUFW reads `ufw status verbose` (ufw(8)):
//
//	Status: active
//	Logging: on (low)
//	Default: deny (incoming), allow (outgoing), disabled (routed)
//	New profiles: skip
//
//	To                         Action      From
//	--                         ------      ----
//	22/tcp                     ALLOW IN    Anywhere
func parseNetUFW(p *parser, h *Host, s *section) error {
	u := &UFW{}
	p.net(h).UFW = u
	table := false
	for _, l := range s.body {
		t := strings.TrimSpace(l.text)
		switch {
		case strings.HasPrefix(t, "Status:"):
			u.Status = strings.TrimSpace(strings.TrimPrefix(t, "Status:"))
		case strings.HasPrefix(t, "Default:"):
			for _, part := range strings.Split(strings.TrimPrefix(t, "Default:"), ",") {
				pol, dir, ok := strings.Cut(strings.TrimSpace(part), " ")
				if !ok {
					continue
				}
				switch strings.Trim(dir, "()") {
				case "incoming":
					u.DefaultIncoming = pol
				case "outgoing":
					u.DefaultOutgoing = pol
				case "routed":
					u.DefaultRouted = pol
				}
			}
		case strings.HasPrefix(t, "To ") && strings.Contains(t, "Action"):
			table = true
		case strings.HasPrefix(t, "--"):
		case table && t != "":
			if r, ok := ufwRule(t); ok {
				u.Rules = append(u.Rules, r)
			}
		}
	}
	return nil
}

// ufwRule splits a rule line at its action (ALLOW, DENY, REJECT, LIMIT with IN/OUT/FWD).
func ufwRule(t string) (UFWRule, bool) {
	f := strings.Fields(t)
	for i, w := range f {
		switch w {
		case "ALLOW", "DENY", "REJECT", "LIMIT":
			act := w
			j := i + 1
			if j < len(f) && (f[j] == "IN" || f[j] == "OUT" || f[j] == "FWD") {
				act += " " + f[j]
				j++
			}
			return UFWRule{To: strings.Join(f[:i], " "), Action: act, From: strings.Join(f[j:], " ")}, true
		}
	}
	return UFWRule{}, false
}

func parseNetNM(p *parser, h *Host, s *section) error {
	nm := &p.net(h).NetworkManager
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 2 {
			continue
		}
		val := ""
		if len(f) > 2 {
			val = f[2]
		}
		switch f[0] {
		case "active":
			if nm.Active == nil {
				nm.Active = map[string]string{}
			}
			nm.Active[f[1]] = val
		case "enabled":
			if nm.Enabled == nil {
				nm.Enabled = map[string]string{}
			}
			nm.Enabled[f[1]] = val
		}
	}
	return nil
}

// parseNetNmcli reads nmcli's terse output (nmcli(1) "-t": fields separated by ':', a ':'
// inside a value escaped as '\:').
func parseNetNmcli(p *parser, h *Host, s *section) error {
	nm := &p.net(h).NetworkManager
	for _, l := range s.body {
		f := splitTerse(l.text)
		if len(f) < 3 {
			continue
		}
		nm.Devices = append(nm.Devices, NMDevice{Device: f[0], Type: f[1], State: f[2]})
	}
	return nil
}

func splitTerse(s string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case s[i] == ':':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(out, cur.String())
}

func parseNetNMConf(p *parser, h *Host, s *section) error {
	nm := &p.net(h).NetworkManager
	c := NMConf{Path: s.arg, Text: sectionText(s)}
	// a conf.d file of a later directory hides the same name of an earlier one
	base := c.Path[strings.LastIndexByte(c.Path, '/')+1:]
	if strings.Contains(c.Path, "/conf.d/") {
		nm.Conf = slices.DeleteFunc(nm.Conf, func(o NMConf) bool {
			return strings.Contains(o.Path, "/conf.d/") && strings.HasSuffix(o.Path, "/"+base)
		})
	}
	nm.Conf = append(nm.Conf, c)
	// NetworkManager.conf first, then conf.d files by name
	sort.SliceStable(nm.Conf, func(i, j int) bool {
		ci, cj := strings.Contains(nm.Conf[i].Path, "/conf.d/"), strings.Contains(nm.Conf[j].Path, "/conf.d/")
		if ci != cj {
			return !ci
		}
		if !ci {
			return false
		}
		return baseName(nm.Conf[i].Path) < baseName(nm.Conf[j].Path)
	})
	return nil
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func parseNetResolv(p *parser, h *Host, s *section) error {
	n := p.net(h)
	path, link, _ := strings.Cut(s.arg, " -> ")
	f := ResolvFile{Path: strings.TrimSpace(path), Present: s.name == "net-resolv", Link: strings.TrimSpace(link)}
	if f.Present {
		f.Text = sectionText(s)
	}
	n.Resolv = append(n.Resolv, f)
	return nil
}

func parseNetTools(p *parser, h *Host, s *section) error {
	n := p.net(h)
	for _, l := range s.body {
		if t := strings.TrimSpace(l.text); t != "" {
			n.ProbeTools = append(n.ProbeTools, t)
		}
	}
	return nil
}

// ParseNetwork reads the network sections network.sh printed (as the doctor's node script
// embeds them): the same parser as the facts document's. It never fails: unreadable sections
// are listed in Network.Errors.
func ParseNetwork(text string) *Network {
	h, err := Parse([]byte(magic + " 1\n" + text + "\n@@ end\n"))
	if err != nil || h.Network == nil {
		n := &Network{}
		if err != nil {
			n.Errors = append(n.Errors, err.Error())
		}
		return n
	}
	return h.Network
}
