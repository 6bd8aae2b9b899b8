// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"
)

// The document that gather.sh prints (format 1):
//
//	@k3strap-facts 1
//	@@ <section> [argument]
//	<body lines>
//	...
//	@@ end
//
// Blank lines are ignored everywhere. The argument names the file a body was read from, or is
// empty when the source did not exist. Unknown sections are skipped (a newer script may add
// some); missing sections leave zero values (older or odd hosts). A document without
// "@@ end" was cut short and is an error.

const magic = "@k3strap-facts"

// ParseError is a malformed facts document: the 1-based line in the document, the section it
// belongs to ("" before the first section) and what is wrong.
type ParseError struct {
	Line    int
	Section string
	Msg     string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "facts document: " + e.Msg
	}
	if e.Section == "" {
		return fmt.Sprintf("facts document line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("facts document line %d (section %s): %s", e.Line, e.Section, e.Msg)
}

type docLine struct {
	n    int
	text string
}

type section struct {
	name, arg string
	line      int
	body      []docLine
}

func (s *section) errf(l docLine, format string, a ...any) error {
	return &ParseError{Line: l.n, Section: s.name, Msg: fmt.Sprintf(format, a...) + fmt.Sprintf(": %q", clip(l.text))}
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// Parse reads the document Script printed, as it is or gzip-compressed (gzip's magic bytes
// first; at most maxDocument bytes once expanded). Errors are *ParseError values naming the line and
// section that was malformed; a document that is empty, has no "@k3strap-facts" header, a
// format newer than FormatVersion, or no final "@@ end" (cut short) is an error too.
// Host.Name and Host.ClockSkew are left for the caller.
func Parse(out []byte) (*Host, error) {
	out, err := gunzip(out)
	if err != nil {
		return nil, err
	}
	raw := strings.Split(string(out), "\n")
	var (
		secs    []*section
		cur     *section
		version int
		ended   bool
	)
	for i, t := range raw {
		n := i + 1
		t = strings.TrimRight(t, "\r")
		if strings.TrimSpace(t) == "" {
			continue
		}
		if version == 0 {
			f := strings.Fields(t)
			if len(f) != 2 || f[0] != magic {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("want %q header, got %q", magic+" <version>", clip(t))}
			}
			v, err := strconv.Atoi(f[1])
			if err != nil || v < 1 {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("bad format version %q", f[1])}
			}
			if v > FormatVersion {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("format version %d is newer than this k3strap reads (%d)", v, FormatVersion)}
			}
			version = v
			continue
		}
		if ended {
			return nil, &ParseError{Line: n, Section: "end", Msg: fmt.Sprintf("text after the end of the document: %q", clip(t))}
		}
		if rest, ok := strings.CutPrefix(t, "@@ "); ok {
			name, arg, _ := strings.Cut(strings.TrimSpace(rest), " ")
			if name == "" {
				return nil, &ParseError{Line: n, Msg: "section header without a name"}
			}
			if name == "end" {
				ended = true
				cur = nil
				continue
			}
			cur = &section{name: name, arg: strings.TrimSpace(arg), line: n}
			secs = append(secs, cur)
			continue
		}
		if cur == nil {
			return nil, &ParseError{Line: n, Msg: fmt.Sprintf("text outside a section: %q", clip(t))}
		}
		cur.body = append(cur.body, docLine{n: n, text: t})
	}
	if version == 0 {
		return nil, &ParseError{Line: 1, Msg: "empty document (no " + magic + " header)"}
	}
	if !ended {
		last := ""
		if len(secs) > 0 {
			last = secs[len(secs)-1].name
		}
		return nil, &ParseError{Line: len(raw), Section: last, Msg: "document cut short (no \"@@ end\")"}
	}

	h := &Host{FormatVersion: version}
	var p parser
	for _, s := range secs {
		fn, ok := sectionParsers[s.name]
		if !ok {
			continue
		}
		if err := fn(&p, h, s); err != nil {
			return nil, err
		}
	}
	p.finish(h)
	compact(h)
	return h, nil
}

// parser holds what sections contribute before Host can be completed.
type parser struct {
	clocks                   []time.Time
	cgroupMounts             bool
	cgroupV2                 bool
	v2Controllers, v1Enabled []string
	defaultMetric            int64
	tcpListen                map[Port]bool
	nn                       netParser
}

func (p *parser) finish(h *Host) {
	switch {
	case p.cgroupV2:
		h.Cgroup.Version = 2
		h.Cgroup.Controllers = p.v2Controllers
	case p.cgroupMounts || len(p.v1Enabled) > 0:
		h.Cgroup.Version = 1
		h.Cgroup.Controllers = p.v1Enabled
	}
	if len(p.clocks) > 0 {
		var sum time.Duration
		for _, c := range p.clocks[1:] {
			sum += c.Sub(p.clocks[0])
		}
		h.RemoteClock = p.clocks[0].Add(sum / time.Duration(len(p.clocks)))
	}
	p.finishNetwork(h)
}

type sectionParser func(p *parser, h *Host, s *section) error

var sectionParsers = map[string]sectionParser{
	"clock":              parseClock,
	"uname":              parseUname,
	"os-release":         parseOSRelease,
	"init":               parseInit,
	"sudo":               parseSudo,
	"kernel-config":      parseKernelConfig,
	"modules":            parseModules,
	"sys-module":         parseSysModule,
	"modules-builtin":    parseModulesBuiltin,
	"modules-dep":        parseModulesDep,
	"namespaces":         parseNamespaces,
	"root-maxkeys":       parseRootMaxKeys,
	"cgroup-mounts":      parseCgroupMounts,
	"cgroup-controllers": parseCgroupControllers,
	"proc-cgroups":       parseProcCgroups,
	"meminfo":            parseMeminfo,
	"df":                 parseDf,
	"space":              parseSpace,
	"net":                parseNet,
	"route":              parseRoute,
	"route6":             parseRoute6,
	"addr":               parseAddr,
	"hostname":           parseHostname,
	"machine-id":         parseMachineID,
	"k3s-version":        parseK3sVersion,
	"k3s-units":          parseK3sUnits,
	"k3s-files":          parseK3sFiles,
	"privileged":         parsePrivileged,
	"selinux":            parseSELinux,
	// network.sh (network.go)
	"net-addr":             parseNetAddr,
	"net-route":            parseNetRoute,
	"net-route6":           parseNetRoute,
	"net-fdb":              parseNetFDB,
	"net-neigh":            parseNetNeigh,
	"net-nft":              parseNetNft,
	"net-iptables":         parseNetIptables,
	"net-iptables-version": parseNetIptablesVersion,
	"net-firewalld":        parseNetFirewalld,
	"net-ufw":              parseNetUFW,
	"net-nm":               parseNetNM,
	"net-nmcli":            parseNetNmcli,
	"net-nm-conf":          parseNetNMConf,
	"net-resolv":           parseNetResolv,
	"net-resolv-absent":    parseNetResolv,
	"net-tools":            parseNetTools,
}

// keyValues parses key=value lines, calling set for each.
func keyValues(s *section, set func(k, v string) error) error {
	for _, l := range s.body {
		k, v, ok := strings.Cut(l.text, "=")
		if !ok || k == "" {
			return s.errf(l, "want key=value")
		}
		if err := set(k, v); err != nil {
			return s.errf(l, "%v", err)
		}
	}
	return nil
}

func firstLine(s *section) string {
	for _, l := range s.body {
		if t := strings.TrimSpace(l.text); t != "" {
			return t
		}
	}
	return ""
}

func words(s *section) []string {
	var out []string
	for _, l := range s.body {
		out = append(out, strings.Fields(l.text)...)
	}
	return out
}

func parseClock(p *parser, _ *Host, s *section) error {
	for _, l := range s.body {
		t := strings.TrimSpace(l.text)
		secStr, frac, _ := strings.Cut(t, ".")
		sec, err := strconv.ParseInt(secStr, 10, 64)
		if err != nil || sec < 0 {
			return s.errf(l, "want seconds since the epoch")
		}
		var nsec int64
		// date without %N support prints "%N" or "N": keep whole seconds then.
		if frac != "" && isDigits(frac) {
			if len(frac) > 9 {
				frac = frac[:9]
			}
			frac += strings.Repeat("0", 9-len(frac))
			nsec, _ = strconv.ParseInt(frac, 10, 64)
		}
		p.clocks = append(p.clocks, time.Unix(sec, nsec))
		break
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func parseUname(_ *parser, h *Host, s *section) error {
	return keyValues(s, func(k, v string) error {
		switch k {
		case "machine":
			h.Machine = strings.TrimSpace(v)
			h.Arch = ArchFor(h.Machine)
		case "release":
			h.KernelRelease = strings.TrimSpace(v)
		}
		return nil
	})
}

// ArchFor maps `uname -m` to the Go / K3s architecture name: x86_64 -> amd64, aarch64 and
// arm64 -> arm64, armv7* and armhf -> arm; anything else (armv6l, i686, riscv64, ...) -> ""
// because K3s publishes no release for it (docs/k3s.md#airgap).
func ArchFor(machine string) string {
	switch {
	case machine == "x86_64" || machine == "amd64":
		return "amd64"
	case machine == "aarch64" || machine == "arm64":
		return "arm64"
	case strings.HasPrefix(machine, "armv7") || machine == "armhf" || machine == "arm":
		return "arm"
	}
	return ""
}

func parseOSRelease(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		t := strings.TrimSpace(l.text)
		if strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return s.errf(l, "want KEY=VALUE")
		}
		v = unquoteOS(v)
		switch k {
		case "ID":
			h.OS.ID = v
		case "ID_LIKE":
			h.OS.IDLike = v
		case "VERSION_ID":
			h.OS.VersionID = v
		case "PRETTY_NAME":
			h.OS.PrettyName = v
		}
	}
	return nil
}

// unquoteOS undoes os-release(5) shell-style quoting.
func unquoteOS(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return v[1 : len(v)-1]
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
				i++
			}
			b.WriteByte(v[i])
		}
		return b.String()
	}
	return v
}

func parseInit(_ *parser, h *Host, s *section) error {
	if f := strings.Fields(firstLine(s)); len(f) > 0 {
		h.InitSystem = f[0]
	}
	return nil
}

func parseSudo(_ *parser, h *Host, s *section) error {
	var msgs []string
	err := keyValues(s, func(k, v string) error {
		switch k {
		case "user":
			h.Sudo.User = v
		case "mode":
			h.Sudo.Mode = v
			switch v {
			case "root":
				h.Sudo.Root, h.Sudo.OK = true, true
			case "nopasswd", "password":
				h.Sudo.OK = true
			case "needs-password", "bad-password":
				h.Sudo.NeedsPassword = true
			case "denied", "unavailable":
			default:
				return fmt.Errorf("unknown sudo mode %q", v)
			}
		case "message":
			if v = strings.TrimSpace(v); v != "" {
				msgs = append(msgs, v)
			}
		}
		return nil
	})
	h.Sudo.Message = strings.Join(msgs, "; ")
	return err
}

func parseKernelConfig(_ *parser, h *Host, s *section) error {
	if s.arg == "" {
		return nil
	}
	h.Kernel.ConfigSource = s.arg
	cfg, err := sharedKernelConfig(s.body, func() (map[string]string, error) {
		cfg := map[string]string{}
		for _, l := range s.body {
			t := strings.TrimSpace(l.text)
			if !strings.HasPrefix(t, "CONFIG_") {
				continue
			}
			k, v, ok := strings.Cut(t, "=")
			if !ok {
				return nil, s.errf(l, "want CONFIG_NAME=value")
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			cfg[k] = v
		}
		return cfg, nil
	})
	h.Kernel.Config = cfg
	return err
}

func parseModules(_ *parser, h *Host, s *section) error {
	if s.arg == "" {
		h.Kernel.ModuleSupport = false
		return nil
	}
	h.Kernel.ModuleSupport = true
	for _, l := range s.body {
		if f := strings.Fields(l.text); len(f) > 0 {
			h.Kernel.Loaded = append(h.Kernel.Loaded, moduleName(f[0]))
		}
	}
	return nil
}

func parseSysModule(_ *parser, h *Host, s *section) error {
	if s.arg == "" {
		return nil
	}
	h.Kernel.SysModuleRead = true
	for _, w := range words(s) {
		h.Kernel.SysModule = append(h.Kernel.SysModule, moduleName(w))
	}
	return nil
}

func parseModulesBuiltin(_ *parser, h *Host, s *section) error {
	if s.arg == "" {
		return nil
	}
	h.Kernel.BuiltinSource = s.arg
	for _, w := range words(s) {
		h.Kernel.Builtin = append(h.Kernel.Builtin, moduleName(w))
	}
	return nil
}

func parseModulesDep(_ *parser, h *Host, s *section) error {
	if s.arg == "" {
		return nil
	}
	h.Kernel.DepSource = s.arg
	for _, w := range words(s) {
		h.Kernel.Loadable = append(h.Kernel.Loadable, moduleName(w))
	}
	return nil
}

// moduleName normalises a module file or name: base name without .ko[.xz|.zst|.gz], '-' as
// '_' (the kernel treats both the same).
func moduleName(s string) string {
	s = path.Base(strings.TrimSuffix(strings.TrimSpace(s), ":"))
	if i := strings.Index(s, ".ko"); i > 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

func parseNamespaces(_ *parser, h *Host, s *section) error {
	h.Kernel.Namespaces = words(s)
	return nil
}

func parseRootMaxKeys(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		v, err := strconv.ParseInt(strings.TrimSpace(l.text), 10, 64)
		if err != nil {
			return s.errf(l, "want an integer")
		}
		h.KeysRootMaxKeys = v
		break
	}
	return nil
}

func parseCgroupMounts(p *parser, _ *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 3 {
			return s.errf(l, "want a /proc/mounts line")
		}
		switch f[2] {
		case "cgroup2":
			if f[1] == "/sys/fs/cgroup" {
				p.cgroupV2 = true
			}
		case "cgroup":
			p.cgroupMounts = true
		}
	}
	return nil
}

func parseCgroupControllers(p *parser, _ *Host, s *section) error {
	p.v2Controllers = words(s)
	return nil
}

func parseProcCgroups(p *parser, _ *Host, s *section) error {
	for _, l := range s.body {
		t := strings.TrimSpace(l.text)
		if strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 4 {
			return s.errf(l, "want subsys_name hierarchy num_cgroups enabled")
		}
		if f[3] == "1" {
			p.v1Enabled = append(p.v1Enabled, f[0])
		}
	}
	return nil
}

func parseMeminfo(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		k, v, ok := strings.Cut(l.text, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "MemTotal":
			dst = &h.MemTotalKiB
		case "MemAvailable":
			dst = &h.MemAvailableKiB
		case "SwapTotal":
			dst = &h.SwapTotalKiB
		default:
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return s.errf(l, "want %s: <n> kB", k)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return s.errf(l, "want %s: <n> kB", k)
		}
		*dst = n
	}
	return nil
}

// parseDf reads `df -Pk PATH` (or plain `df -k`, whose long device names wrap): the field
// before the use% column is the available space in KiB, the third before it the size. DiskPath stays "" when df printed
// nothing (free space unknown).
func parseDf(_ *parser, h *Host, s *section) error {
	var toks []string
	var last docLine
	for _, l := range s.body {
		if strings.HasPrefix(l.text, "Filesystem") {
			continue
		}
		toks = append(toks, strings.Fields(l.text)...)
		last = l
	}
	if len(toks) == 0 {
		return nil
	}
	for i := 1; i < len(toks); i++ {
		pct, ok := strings.CutSuffix(toks[i], "%")
		if !ok || !isDigits(pct) {
			continue
		}
		n, err := strconv.ParseInt(toks[i-1], 10, 64)
		if err != nil || n < 0 {
			return s.errf(last, "available KiB is not a number")
		}
		h.DiskFreeKiB, h.DiskPath = n, s.arg
		h.DiskUsedPercent, _ = strconv.Atoi(pct)
		if i >= 3 { // size, used, available, use%
			h.DiskTotalKiB, _ = strconv.ParseInt(toks[i-3], 10, 64)
		}
		return nil
	}
	return s.errf(last, "no use%% column")
}

// parseSpace reads the space section: "DIR AVAILABLE-KiB MOUNT-POINT OPTIONS" per line (the
// mount point may hold spaces; OPTIONS is "-" when unknown).
func parseSpace(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 4 {
			return s.errf(l, "want DIR AVAILABLE-KiB MOUNT OPTIONS")
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 || !strings.HasPrefix(f[0], "/") {
			return s.errf(l, "want DIR AVAILABLE-KiB MOUNT OPTIONS")
		}
		ro := false
		for _, o := range strings.Split(f[len(f)-1], ",") {
			ro = ro || o == "ro"
		}
		h.Space = append(h.Space, DirSpace{Dir: f[0], FreeKiB: n, Mount: strings.Join(f[2:len(f)-1], " "), ReadOnly: ro})
	}
	return nil
}

// parseNet reads /proc/net/{tcp,tcp6,udp,udp6} lines: TCP sockets in state 0A (LISTEN) and
// UDP sockets in state 07 with no remote peer.
func parseNet(p *parser, h *Host, s *section) error {
	proto := strings.TrimSuffix(s.arg, "6")
	if proto != "tcp" && proto != "udp" {
		return &ParseError{Line: s.line, Section: s.name, Msg: fmt.Sprintf("unknown protocol %q", s.arg)}
	}
	if p.tcpListen == nil {
		p.tcpListen = map[Port]bool{}
	}
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) > 0 && f[0] == "sl" {
			continue
		}
		if len(f) < 4 || !strings.HasSuffix(f[0], ":") {
			return s.errf(l, "want a /proc/net/%s line", s.arg)
		}
		want := "0A"
		if proto == "udp" {
			want = "07"
		}
		if f[3] != want {
			continue
		}
		addr, port, err := procNetAddr(f[1])
		if err != nil {
			return s.errf(l, "local address: %v", err)
		}
		if proto == "udp" {
			if _, rport, err := procNetAddr(f[2]); err != nil || rport != 0 {
				continue
			}
		}
		pt := Port{Proto: proto, Port: port, Addr: addr}
		if p.tcpListen[pt] {
			continue
		}
		p.tcpListen[pt] = true
		h.Listening = append(h.Listening, pt)
	}
	return nil
}

// procNetAddr decodes ADDR:PORT from /proc/net/{tcp,udp}{,6}: the address is printed as 32-bit
// words in host byte order (little-endian on every architecture K3s supports), the port in hex.
func procNetAddr(s string) (string, int, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("no ':' in %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return "", 0, fmt.Errorf("bad address %q", a)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip.Unmap().String(), int(port), nil
}

// parseRoute reads /proc/net/route; the default route is Destination and Mask 0 with RTF_UP,
// the lowest metric winning.
func parseRoute(p *parser, h *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) > 0 && f[0] == "Iface" {
			continue
		}
		if len(f) < 8 {
			return s.errf(l, "want a /proc/net/route line")
		}
		if f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil {
			return s.errf(l, "bad flags")
		}
		if flags&0x1 == 0 {
			continue
		}
		metric, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return s.errf(l, "bad metric")
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 4 {
			return s.errf(l, "bad gateway")
		}
		gw := ""
		if g := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}); !g.IsUnspecified() {
			gw = g.String()
		}
		if h.DefaultRoute == nil || metric < p.defaultMetric {
			h.DefaultRoute = &Route{Interface: f[0], Gateway: gw}
			p.defaultMetric = metric
		}
	}
	return nil
}

// parseRoute6 reads default lines of /proc/net/ipv6_route (addresses in network byte order);
// reject routes (RTF_REJECT) and routes on lo are not default routes.
func parseRoute6(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 10 {
			return s.errf(l, "want a /proc/net/ipv6_route line")
		}
		if strings.Trim(f[0], "0") != "" || f[1] != "00" {
			continue
		}
		flags, err := strconv.ParseUint(f[8], 16, 32)
		if err != nil {
			return s.errf(l, "bad flags")
		}
		if flags&0x1 == 0 || flags&0x200 != 0 || f[9] == "lo" {
			continue
		}
		b, err := hex.DecodeString(f[4])
		if err != nil || len(b) != 16 {
			return s.errf(l, "bad next hop")
		}
		gw := ""
		if g := netip.AddrFrom16([16]byte(b)); !g.IsUnspecified() {
			gw = g.String()
		}
		if h.DefaultRoute6 == nil {
			h.DefaultRoute6 = &Route{Interface: f[9], Gateway: gw}
		}
	}
	return nil
}

func parseAddr(_ *parser, h *Host, s *section) error {
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) {
		if a.IsLoopback() || a.IsLinkLocalUnicast() || seen[a] {
			return
		}
		seen[a] = true
		h.Addresses = append(h.Addresses, a.String())
	}
	switch s.arg {
	case "ip":
		// 2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\       valid_lft ...
		for _, l := range s.body {
			f := strings.Fields(l.text)
			if len(f) < 4 {
				return s.errf(l, "want an `ip -o addr` line")
			}
			if f[2] != "inet" && f[2] != "inet6" {
				continue
			}
			global := false
			for i := 4; i+1 < len(f); i++ {
				if f[i] == "scope" {
					global = f[i+1] == "global"
					break
				}
			}
			if !global {
				continue
			}
			pfx, err := netip.ParsePrefix(f[3])
			if err != nil {
				a, err2 := netip.ParseAddr(f[3])
				if err2 != nil {
					return s.errf(l, "bad address %q", f[3])
				}
				add(a)
				continue
			}
			add(pfx.Addr())
		}
	case "hostname-I":
		for _, l := range s.body {
			for _, w := range strings.Fields(l.text) {
				a, err := netip.ParseAddr(w)
				if err != nil {
					return s.errf(l, "bad address %q", w)
				}
				add(a)
			}
		}
	case "fib_trie":
		// |-- 192.0.2.2
		//    /32 host LOCAL
		var last netip.Addr
		for _, l := range s.body {
			t := strings.TrimSpace(l.text)
			if rest, ok := strings.CutPrefix(t, "|-- "); ok {
				last, _ = netip.ParseAddr(strings.TrimSpace(rest))
				continue
			}
			if strings.HasPrefix(t, "/32 host LOCAL") && last.IsValid() {
				add(last)
			}
		}
	}
	return nil
}

func parseHostname(_ *parser, h *Host, s *section) error {
	h.Hostname = firstLine(s)
	return nil
}

func parseMachineID(_ *parser, h *Host, s *section) error {
	h.MachineID = firstLine(s)
	return nil
}

func parseK3sVersion(_ *parser, h *Host, s *section) error {
	h.K3s.BinaryPath = s.arg
	first := firstLine(s)
	if first == "" {
		return nil
	}
	f := strings.Fields(first)
	if len(f) >= 3 && f[0] == "k3s" && f[1] == "version" && strings.HasPrefix(f[2], "v") {
		h.K3s.BinaryVersion = f[2]
		label := strings.Join(f[3:], " ")
		if strings.HasPrefix(label, "(") && strings.HasSuffix(label, ")") {
			label = label[1 : len(label)-1]
		}
		h.K3s.BinaryLabel = label
		return nil
	}
	h.K3s.BinaryLabel = clip(first)
	return nil
}

func parseK3sUnits(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) < 3 {
			return s.errf(l, "want `unit|active|enabled NAME VALUE`")
		}
		name, val := f[1], strings.Join(f[2:], " ")
		switch f[0] {
		case "unit":
			h.K3s.Services = append(h.K3s.Services, name)
			if h.K3s.Service == "" || name == "k3s" {
				h.K3s.Service = name
			}
		case "active":
			if name == h.K3s.Service {
				h.K3s.ServiceActive = val
			}
		case "enabled":
			if name == h.K3s.Service {
				h.K3s.ServiceEnabled = val
			}
		default:
			return s.errf(l, "want `unit|active|enabled NAME VALUE`")
		}
	}
	return nil
}

func parseK3sFiles(_ *parser, h *Host, s *section) error {
	for _, l := range s.body {
		f := strings.Fields(l.text)
		if len(f) != 2 || (f[1] != "present" && f[1] != "absent") {
			return s.errf(l, "want `NAME present|absent`")
		}
		if f[0] == "subnet-env" {
			h.K3s.SubnetEnvPresent = f[1] == "present"
		}
	}
	return nil
}

func parsePrivileged(_ *parser, h *Host, s *section) error {
	if s.arg == "skipped" || s.arg == "" {
		return nil
	}
	h.K3s.Files = map[string]string{}
	for _, l := range s.body {
		kind, rest, _ := strings.Cut(l.text, " ")
		switch kind {
		case "sha":
			sum, file, ok := strings.Cut(rest, " ")
			if !ok || file == "" || len(sum) != 64 || !isHex(sum) {
				return s.errf(l, "want `sha HEX PATH`")
			}
			h.K3s.Files[file] = sum
		case "missing":
			if rest == "" {
				return s.errf(l, "want `missing PATH`")
			}
			h.K3s.Files[rest] = ""
		case "error":
			if rest == "" {
				return s.errf(l, "want `error PATH`")
			}
			h.K3s.UnreadableFiles = append(h.K3s.UnreadableFiles, rest)
		case "token":
			h.K3s.TokenPresent = rest == "present"
		case "done":
			h.K3s.PrivilegedRead = true
		default:
			return s.errf(l, "unknown privileged result")
		}
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// SetClockSkew sets ClockSkew from when the caller started the facts command (sent) and when
// its output arrived (received): skew = RemoteClock - midpoint(sent, received). The script
// reads the clock at its start and end and Parse averages both, so the midpoint is the right
// reference. Positive means the host's clock is ahead. No-op when RemoteClock is unknown.
func (h *Host) SetClockSkew(sent, received time.Time) {
	if h.RemoteClock.IsZero() {
		return
	}
	mid := sent.Add(received.Sub(sent) / 2)
	h.ClockSkew = h.RemoteClock.Sub(mid)
}

// ParseHostSections reads the sections host.sh prints (clock, meminfo, df, addr, hostname,
// k3s-version) with Parse's section parsers: the doctor's node script carries them between
// @host-facts and @host-facts-end. It never fails: a section that does not parse is left out
// (Parse's error is dropped; doctor works with what there is).
func ParseHostSections(text string) *Host {
	h, err := Parse([]byte(magic + " 1\n" + text + "\n@@ end\n"))
	if err != nil {
		return &Host{}
	}
	return h
}

// maxDocument bounds a facts document once gunzipped (bytes): real ones are tens of kB.
const maxDocument = 64 << 20

// gunzip returns out expanded when it is a gzip stream, else out itself. Errors are a
// *ParseError: a damaged stream, or one that expands beyond maxDocument.
func gunzip(out []byte) ([]byte, error) {
	if len(out) < 2 || out[0] != 0x1f || out[1] != 0x8b {
		return out, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(out))
	if err != nil {
		return nil, &ParseError{Msg: "the compressed facts document is damaged: " + err.Error()}
	}
	doc, err := io.ReadAll(io.LimitReader(zr, maxDocument+1))
	if err != nil {
		return nil, &ParseError{Msg: "the compressed facts document is damaged: " + err.Error()}
	}
	if len(doc) > maxDocument {
		return nil, &ParseError{Msg: fmt.Sprintf("the facts document is larger than %d MiB once expanded", maxDocument>>20)}
	}
	return doc, nil
}
