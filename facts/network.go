// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/firewall"
	"github.com/k3strap/k3strap/k3s"
)

// networkScript is network.sh: the network sections of the facts document (interfaces,
// routes, flannel's VXLAN entries, rulesets, firewalld, ufw, NetworkManager, resolver files).
// gather.sh runs it as root; the doctor's node script runs it too (DoctorNodeScript).
//
//go:embed network.sh
var networkScript string

// NetworkScript is network.sh with the host paths it reads (k3s.ShellVars) before it: what
// the facts script and the doctor's node script run with `sh -c` (as root where they can).
func NetworkScript() string { return k3s.ShellVars() + networkScript }

// Network is what network.sh gathered from one host: what the host-network checks of
// preflight and doctor judge (docs/failure-modes.md "Host networks").
type Network struct {
	// Interfaces are the host's network interfaces with their addresses (`ip -j -d addr`).
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Routes are the main table's routes, IPv4 then IPv6 (`ip -j route`).
	Routes []NetRoute `json:"routes,omitempty"`
	// FDB and Neighbors are flannel's VXLAN forwarding and neighbour entries (flannel.1):
	// one FDB entry (VTEP MAC → the peer's public IP) and one neighbour entry per peer node.
	FDB       []FDBEntry `json:"fdb,omitempty"`
	Neighbors []Neighbor `json:"neighbors,omitempty"`
	// Ruleset is the host's packet filter: nftables, iptables-nft, iptables-legacy (nil when
	// none could be read, e.g. without root). RulesetRead lists what was read ("nftables",
	// "iptables-nft ip", ...).
	Ruleset     *firewall.Ruleset `json:"ruleset,omitempty"`
	RulesetRead []string          `json:"rulesetRead,omitempty"`
	// LegacyTables says iptables-legacy-save printed tables (the legacy backend is in use
	// even if its chains hold no rule).
	LegacyTables bool `json:"legacyTables,omitempty"`
	// IptablesVersion is `iptables --version` ("iptables v1.8.9 (nf_tables)").
	IptablesVersion string `json:"iptablesVersion,omitempty"`
	// Firewalld is firewalld's state and zones (nil: no firewall-cmd).
	Firewalld *Firewalld `json:"firewalld,omitempty"`
	// UFW is `ufw status verbose` (nil: no ufw).
	UFW *UFW `json:"ufw,omitempty"`
	// NetworkManager is NetworkManager's and nm-cloud-setup's state.
	NetworkManager NetworkManager `json:"networkManager"`
	// Resolv are the resolver files K3s may use, in the order network.sh read them.
	Resolv []ResolvFile `json:"resolv,omitempty"`
	// ProbeTools are the interpreters found for the path check (perl, python3).
	ProbeTools []string `json:"probeTools,omitempty"`
	// Errors are network sections that could not be read (the rest still counts).
	Errors []string `json:"errors,omitempty"`
}

// Interface is one network interface.
type Interface struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	MTU   int    `json:"mtu"`
	Up    bool   `json:"up"`
	MAC   string `json:"mac,omitempty"`
	// Kind is the link type (veth, vxlan, bridge, wireguard, ...; "" for plain devices).
	Kind  string   `json:"kind,omitempty"`
	Addrs []IfAddr `json:"addrs,omitempty"`
	// VXLAN is set for a VXLAN device (flannel.1): its VNI, local address, port and parent.
	VXLAN *VXLANInfo `json:"vxlan,omitempty"`
}

// IfAddr is an address of an interface with its prefix and scope (global, link, host).
type IfAddr struct {
	Prefix netip.Prefix `json:"prefix"`
	Scope  string       `json:"scope"`
}

// VXLANInfo is a VXLAN device's configuration.
type VXLANInfo struct {
	ID    int    `json:"id"`
	Local string `json:"local,omitempty"`
	Port  int    `json:"port"`
	Link  string `json:"link,omitempty"`
}

// NetRoute is one route of the main table.
type NetRoute struct {
	// Family is 4 or 6.
	Family int `json:"family"`
	// Dst is "default" or a prefix.
	Dst     string `json:"dst"`
	Gateway string `json:"gateway,omitempty"`
	Dev     string `json:"dev,omitempty"`
	Metric  int    `json:"metric,omitempty"`
	PrefSrc string `json:"prefsrc,omitempty"`
}

// FDBEntry is a bridge forwarding entry of a VXLAN device: frames for MAC go to Dst.
type FDBEntry struct {
	Dev string `json:"dev"`
	MAC string `json:"mac"`
	Dst string `json:"dst"`
}

// Neighbor is a neighbour (ARP) entry.
type Neighbor struct {
	Dev   string   `json:"dev"`
	Dst   string   `json:"dst"`
	MAC   string   `json:"mac,omitempty"`
	State []string `json:"state,omitempty"`
}

// Firewalld is firewalld's state (`firewall-cmd --state`) and zones (`--list-all-zones`).
type Firewalld struct {
	// State is what --state printed ("running", "not running").
	State       string          `json:"state"`
	DefaultZone string          `json:"defaultZone,omitempty"`
	Zones       []FirewalldZone `json:"zones,omitempty"`
}

// Running reports whether firewalld runs.
func (f *Firewalld) Running() bool { return f != nil && f.State == "running" }

// Zone returns the zone called name (nil when absent).
func (f *Firewalld) Zone(name string) *FirewalldZone {
	for i := range f.Zones {
		if f.Zones[i].Name == name {
			return &f.Zones[i]
		}
	}
	return nil
}

// ZoneOf returns the zone that handles traffic from source address src arriving on
// interface iface, by firewalld's rule: a zone bound to a source prefix containing src wins,
// then the zone bound to the interface, then the default zone.
func (f *Firewalld) ZoneOf(src netip.Addr, iface string) *FirewalldZone {
	if f == nil {
		return nil
	}
	for i := range f.Zones {
		for _, s := range f.Zones[i].Sources {
			if p, err := netip.ParsePrefix(s); err == nil && src.IsValid() && p.Contains(src) {
				return &f.Zones[i]
			}
			if a, err := netip.ParseAddr(s); err == nil && a == src {
				return &f.Zones[i]
			}
		}
	}
	for i := range f.Zones {
		if slices.Contains(f.Zones[i].Interfaces, iface) {
			return &f.Zones[i]
		}
	}
	return f.Zone(f.DefaultZone)
}

// FirewalldZone is one zone of `firewall-cmd --list-all-zones`.
type FirewalldZone struct {
	Name       string   `json:"name"`
	Default    bool     `json:"default,omitempty"`
	Active     bool     `json:"active,omitempty"`
	Target     string   `json:"target,omitempty"`
	Interfaces []string `json:"interfaces,omitempty"`
	Sources    []string `json:"sources,omitempty"`
	Services   []string `json:"services,omitempty"`
	Ports      []string `json:"ports,omitempty"`
	Protocols  []string `json:"protocols,omitempty"`
	RichRules  []string `json:"richRules,omitempty"`
}

// Allows reports whether the zone lets proto/port in by its target (ACCEPT, trusted), its
// ports or protocols, or one of the services firewalld ships for K3s's ports
// (firewalld's services/*.xml); rich rules are not read (the ruleset decides then).
func (z *FirewalldZone) Allows(proto string, port int) bool {
	if z.Target == "ACCEPT" {
		return true
	}
	if slices.Contains(z.Protocols, proto) {
		return true
	}
	for _, p := range z.Ports {
		rng, pr, ok := strings.Cut(p, "/")
		if !ok || pr != proto {
			continue
		}
		lo, hi, _ := strings.Cut(rng, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		if hi != "" {
			b, _ = strconv.Atoi(hi)
		}
		if err1 == nil && a <= port && port <= b {
			return true
		}
	}
	for _, s := range z.Services {
		for _, sp := range firewalldServices[s] {
			if sp.proto == proto && sp.port == port {
				return true
			}
		}
	}
	return false
}

type protoPort struct {
	proto string
	port  int
}

// firewalldServices are the services firewalld ships that open ports K3s uses
// (firewalld/config/services: kube-apiserver.xml, kubelet.xml, etcd-client.xml,
// etcd-server.xml, http.xml, https.xml).
var firewalldServices = map[string][]protoPort{
	"kube-apiserver": {{"tcp", 6443}},
	"kubelet":        {{"tcp", 10250}},
	"etcd-client":    {{"tcp", 2379}},
	"etcd-server":    {{"tcp", 2380}},
	"http":           {{"tcp", 80}},
	"https":          {{"tcp", 443}},
	"ssh":            {{"tcp", 22}},
}

// UFW is `ufw status verbose` (ufw(8)).
type UFW struct {
	// Status is "active" or "inactive".
	Status string `json:"status"`
	// Default policies: "deny", "allow", "reject" or "disabled" (routed).
	DefaultIncoming string    `json:"defaultIncoming,omitempty"`
	DefaultOutgoing string    `json:"defaultOutgoing,omitempty"`
	DefaultRouted   string    `json:"defaultRouted,omitempty"`
	Rules           []UFWRule `json:"rules,omitempty"`
}

// Active reports whether ufw is on.
func (u *UFW) Active() bool { return u != nil && u.Status == "active" }

// UFWRule is one rule line: To, Action (ALLOW IN, DENY IN, ...), From.
type UFWRule struct {
	To     string `json:"to"`
	Action string `json:"action"`
	From   string `json:"from"`
}

// NetworkManager is NetworkManager's state and configuration on a host.
type NetworkManager struct {
	// Units maps NetworkManager.service, nm-cloud-setup.service and nm-cloud-setup.timer to
	// `systemctl is-active` and `is-enabled` ("active"/"enabled"; "" when the unit does not
	// exist).
	Active  map[string]string `json:"active,omitempty"`
	Enabled map[string]string `json:"enabled,omitempty"`
	// Devices are `nmcli -t -f DEVICE,TYPE,STATE device status`.
	Devices []NMDevice `json:"devices,omitempty"`
	// Conf are NetworkManager's configuration files in the order it reads them.
	Conf []NMConf `json:"conf,omitempty"`
}

// Running reports whether NetworkManager runs.
func (n NetworkManager) Running() bool { return n.Active["NetworkManager.service"] == "active" }

// CloudSetupEnabled returns the nm-cloud-setup units that are enabled.
func (n NetworkManager) CloudSetupEnabled() []string {
	var out []string
	for _, u := range []string{"nm-cloud-setup.service", "nm-cloud-setup.timer"} {
		if n.Enabled[u] == "enabled" || n.Active[u] == "active" {
			out = append(out, u)
		}
	}
	return out
}

// NMDevice is one device as nmcli sees it.
type NMDevice struct {
	Device string `json:"device"`
	Type   string `json:"type"`
	State  string `json:"state"`
}

// NMConf is one NetworkManager configuration file.
type NMConf struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// Unmanaged returns the effective [keyfile] unmanaged-devices specs of the configuration
// (NetworkManager.conf(5): later files override a key; "key+=" appends and "key-=" removes
// list items) and the files that set them.
func (n NetworkManager) Unmanaged() ([]string, []string) {
	var specs, from []string
	for _, c := range n.Conf {
		section := ""
		for _, l := range strings.Split(c.Text, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
				continue
			}
			if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
				section = strings.TrimSpace(l[1 : len(l)-1])
				continue
			}
			if section != "keyfile" {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			k = strings.TrimSpace(k)
			items := splitNMList(v)
			switch k {
			case "unmanaged-devices":
				specs = items
				from = []string{c.Path}
			case "unmanaged-devices+":
				specs = append(specs, items...)
				from = append(from, c.Path)
			case "unmanaged-devices-":
				specs = slices.DeleteFunc(specs, func(s string) bool { return slices.Contains(items, s) })
				from = append(from, c.Path)
			}
		}
	}
	return specs, from
}

func splitNMList(v string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// NMUnmanagedMatches reports whether an unmanaged-devices spec list covers interface name
// (NetworkManager.conf(5) "Device List Format": interface-name:NAME with * and ? globs,
// "except:" entries ignored here, mac: and type: specs not matched by name).
func NMUnmanagedMatches(specs []string, name string) bool {
	for _, s := range specs {
		v, ok := strings.CutPrefix(s, "interface-name:")
		if !ok {
			continue
		}
		v = strings.TrimPrefix(strings.TrimPrefix(v, "="), "~")
		if globMatch(v, name) {
			return true
		}
	}
	return false
}

// globMatch matches * and ? wildcards.
func globMatch(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(pat[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(pat[1:], s[1:])
	}
	return s != "" && pat[0] == s[0] && globMatch(pat[1:], s[1:])
}

// ResolvFile is a resolver file K3s may use.
type ResolvFile struct {
	Path    string `json:"path"`
	Present bool   `json:"present"`
	// Link is the symlink target when Path is a symlink.
	Link string `json:"link,omitempty"`
	Text string `json:"text,omitempty"`
}

// Resolv returns the file at path (nil when not gathered).
func (n *Network) ResolvFile(path string) *ResolvFile {
	for i := range n.Resolv {
		if n.Resolv[i].Path == path {
			return &n.Resolv[i]
		}
	}
	return nil
}

// Interface returns the interface called name (nil when absent).
func (n *Network) Interface(name string) *Interface {
	for i := range n.Interfaces {
		if n.Interfaces[i].Name == name {
			return &n.Interfaces[i]
		}
	}
	return nil
}

// InterfaceOf returns the interface that holds address a (nil when no interface does).
func (n *Network) InterfaceOf(a netip.Addr) *Interface {
	for i := range n.Interfaces {
		for _, ad := range n.Interfaces[i].Addrs {
			if ad.Prefix.Addr() == a {
				return &n.Interfaces[i]
			}
		}
	}
	return nil
}

// DefaultRoute returns the default route of family 4 or 6 with the lowest metric (nil when
// the host has none).
func (n *Network) DefaultRoute(family int) *NetRoute {
	var best *NetRoute
	for i := range n.Routes {
		r := &n.Routes[i]
		if r.Family != family || r.Dst != "default" || r.Dev == "" {
			continue
		}
		if best == nil || r.Metric < best.Metric {
			best = r
		}
	}
	return best
}

// GlobalAddrs returns the interface's global unicast addresses of family 4 or 6, in the
// order the kernel lists them.
func (i *Interface) GlobalAddrs(family int) []netip.Addr {
	var out []netip.Addr
	for _, a := range i.Addrs {
		ad := a.Prefix.Addr()
		if (family == 4) != ad.Is4() || !ad.IsGlobalUnicast() || a.Scope == "host" || a.Scope == "link" {
			continue
		}
		out = append(out, ad)
	}
	return out
}

// RouteTo returns the route the host's main table uses for a: the longest matching prefix,
// a default route last (nil when none matches).
func (n *Network) RouteTo(a netip.Addr) *NetRoute {
	fam := 4
	if a.Is6() && !a.Is4In6() {
		fam = 6
	}
	var best *NetRoute
	bestBits := -1
	for i := range n.Routes {
		r := &n.Routes[i]
		if r.Family != fam {
			continue
		}
		bits := 0
		if r.Dst != "default" {
			p, err := netip.ParsePrefix(r.Dst)
			if err != nil {
				if ad, err2 := netip.ParseAddr(r.Dst); err2 == nil {
					p = netip.PrefixFrom(ad, ad.BitLen())
				} else {
					continue
				}
			}
			if !p.Contains(a) {
				continue
			}
			bits = p.Bits()
		}
		if bits > bestBits || (bits == bestBits && best != nil && r.Metric < best.Metric) {
			best, bestBits = r, bits
		}
	}
	return best
}

// --- parsing (sections of the facts document; see network.sh)

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
