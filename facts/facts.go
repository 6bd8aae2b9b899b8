// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package facts is what k3strap knows about one host: the structured document that one remote
// command prints (Script), and its parsed form (Host). The installer runs the script over SSH
// and preflight judges the parsed facts. Doctor's node script (DoctorNodeScript) prints the
// facts both judge with the same scripts (host.sh, network.sh) and ParseDoctorNode reads them
// with the same parsers into the same types (DoctorNode embeds Host), so a judgement preflight
// and doctor share reads one fact gathered and parsed one way. Nothing here opens a
// connection.
package facts

import (
	"strings"
	"time"

	"github.com/k3strap/k3strap/k3s"
)

// Host is everything gathered from one host by one run of Script.
type Host struct {
	// Name is the inventory host name (set by the caller, not by the remote side).
	Name string `json:"name"`
	// FormatVersion is the document format version printed by Script.
	FormatVersion int `json:"formatVersion"`

	OS OSRelease `json:"os"`
	// Machine is `uname -m` (x86_64, aarch64, armv7l, ...).
	Machine string `json:"machine"`
	// Arch is the Go / K3s architecture name for Machine (amd64, arm64, arm), "" if unknown.
	Arch string `json:"arch"`
	// KernelRelease is `uname -r`.
	KernelRelease string `json:"kernelRelease"`
	// InitSystem is "systemd", "openrc" or "none".
	InitSystem string `json:"initSystem"`

	Sudo Sudo `json:"sudo"`

	Kernel Kernel `json:"kernel"`

	Cgroup Cgroup `json:"cgroup"`

	// MemTotalKiB, MemAvailableKiB and SwapTotalKiB come from /proc/meminfo.
	MemTotalKiB     int64 `json:"memTotalKiB"`
	MemAvailableKiB int64 `json:"memAvailableKiB,omitempty"`
	SwapTotalKiB    int64 `json:"swapTotalKiB"`
	// DiskFreeKiB is the free space of the filesystem holding /var/lib/rancher (or its nearest
	// existing parent, DiskPath), available to unprivileged users as df reports it. DiskPath is
	// "" when df failed (free space unknown).
	DiskFreeKiB int64  `json:"diskFreeKiB"`
	DiskPath    string `json:"diskPath"`
	// DiskTotalKiB and DiskUsedPercent are the same filesystem's size and df's use% (doctor's
	// disk-pressure; preflight judges DiskFreeKiB).
	DiskTotalKiB    int64 `json:"diskTotalKiB,omitempty"`
	DiskUsedPercent int   `json:"diskUsedPercent,omitempty"`
	// Space is the free space of every directory k3strap writes to (the gather script's
	// list); empty when df printed nothing.
	Space []DirSpace `json:"space,omitempty"`

	// Listening are the TCP and UDP ports something listens on, from /proc/net/{tcp,udp}{,6}.
	Listening []Port `json:"listening"`
	// DefaultRoute is the IPv4 default route; nil when the host has none (K3s needs one).
	DefaultRoute *Route `json:"defaultRoute,omitempty"`
	// DefaultRoute6 is the IPv6 default route (from /proc/net/ipv6_route); nil when none.
	DefaultRoute6 *Route `json:"defaultRoute6,omitempty"`
	// Addresses are the host's global IP addresses (from `ip -o addr`), without prefix length.
	Addresses []string `json:"addresses"`

	Hostname  string `json:"hostname"`
	MachineID string `json:"machineID"`
	// RemoteClock is the host's clock when the script ran; ClockSkew is its offset from the
	// workstation's clock, corrected for the round trip (set by the caller with
	// SetClockSkew; positive means the host is ahead).
	RemoteClock time.Time     `json:"remoteClock"`
	ClockSkew   time.Duration `json:"clockSkewNanos"`

	// KeysRootMaxKeys is /proc/sys/kernel/keys/root_maxkeys (K3s wants > 10000), 0 if unreadable.
	KeysRootMaxKeys int64 `json:"keysRootMaxKeys"`

	K3s K3sInstall `json:"k3s"`

	// SELinux is the host's SELinux mode and whether the k3s-selinux policy is installed.
	SELinux SELinux `json:"selinux"`

	// Network is what the host-network checks judge: interfaces, routes, rulesets,
	// firewalld, ufw, NetworkManager, resolver files (network.go); nil when the script
	// printed no network section (an older script).
	Network *Network `json:"network,omitempty"`
}

// DirSpace is the filesystem of one directory k3strap writes to (of its nearest existing
// parent when it does not exist yet), as `df -Pk` and /proc/self/mounts show it.
type DirSpace struct {
	// Dir is the directory; Mount the mount point of its filesystem.
	Dir   string `json:"dir"`
	Mount string `json:"mount"`
	// FreeKiB is the space available to unprivileged users, in KiB.
	FreeKiB int64 `json:"freeKiB"`
	// ReadOnly is true when the filesystem is mounted read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// SpaceOf returns the filesystem holding path: the entry of h.Space whose Dir is path or its
// nearest parent; nil when none is.
func (h *Host) SpaceOf(path string) *DirSpace {
	var best *DirSpace
	for i := range h.Space {
		d := &h.Space[i]
		if (path == d.Dir || strings.HasPrefix(path, strings.TrimSuffix(d.Dir, "/")+"/")) && (best == nil || len(d.Dir) > len(best.Dir)) {
			best = d
		}
	}
	return best
}

// OSRelease is the subset of /etc/os-release k3strap uses.
type OSRelease struct {
	ID         string `json:"id"`
	IDLike     string `json:"idLike,omitempty"`
	VersionID  string `json:"versionID"`
	PrettyName string `json:"prettyName"`
}

// Sudo says whether the login user can become root.
type Sudo struct {
	// User is the login user (`id -un`).
	User string `json:"user"`
	// Root is true when the login user is root (no sudo needed).
	Root bool `json:"root"`
	// OK is true when root or `sudo -n true` (or sudo with the supplied password) succeeded.
	OK bool `json:"ok"`
	// NeedsPassword is true when sudo refused for lack of a password.
	NeedsPassword bool `json:"needsPassword"`
	// Message is sudo's own complaint when not OK.
	Message string `json:"message,omitempty"`
	// Mode is how the script became root: "root", "nopasswd" (sudo -n), "password" (sudo -S
	// with the password from stdin), or why it could not: "needs-password" (none was given),
	// "bad-password" (sudo rejected the given one), "denied", "unavailable" (no sudo).
	Mode string `json:"mode,omitempty"`
}

// Kernel holds where kernel features can be found (docs/k3s.md#kernel-requirements).
type Kernel struct {
	// Config maps CONFIG_* names to their value ("y", "m", a number, or a string without its
	// quotes) from ConfigSource; options that are not set are absent.
	Config map[string]string `json:"config,omitempty"`
	// ConfigSource is /proc/config.gz or /boot/config-<release>, "" when neither was readable.
	ConfigSource string `json:"configSource,omitempty"`
	// ModuleSupport is false when /proc/modules does not exist (a kernel without loadable
	// modules: everything it has is built in).
	ModuleSupport bool `json:"moduleSupport"`
	// Loaded are the names in /proc/modules.
	Loaded []string `json:"loaded,omitempty"`
	// SysModule are the names under /sys/module (loaded modules and built-ins with parameters).
	SysModule []string `json:"sysModule,omitempty"`
	// Builtin are module names from /lib/modules/<release>/modules.builtin.
	Builtin []string `json:"builtin,omitempty"`
	// Loadable are module names from /lib/modules/<release>/modules.dep.
	Loadable []string `json:"loadable,omitempty"`

	// SysModuleRead is true when /sys/module could be listed (SysModule is then meaningful even
	// when empty).
	SysModuleRead bool `json:"sysModuleRead"`
	// BuiltinSource and DepSource are the modules.builtin and modules.dep files read, "" when
	// absent or unreadable.
	BuiltinSource string `json:"builtinSource,omitempty"`
	DepSource     string `json:"depSource,omitempty"`
	// Namespaces are the namespace types in /proc/self/ns (net, pid, ipc, uts, mnt, ...):
	// evidence for the namespace options when the kernel config is unreadable.
	Namespaces []string `json:"namespaces,omitempty"`
}

// Cgroup describes the cgroup hierarchy.
type Cgroup struct {
	// Version is 1 or 2 (2 when /sys/fs/cgroup is a cgroup2 mount; hybrid counts as 1).
	Version int `json:"version"`
	// Controllers are the enabled controllers (v2: cgroup.controllers; v1: /proc/cgroups with
	// enabled=1).
	Controllers []string `json:"controllers"`
}

// Port is one listening socket.
type Port struct {
	// Proto is "tcp" or "udp".
	Proto string `json:"proto"`
	Port  int    `json:"port"`
	// Addr is the local address it is bound to ("0.0.0.0", "::", "127.0.0.1", ...).
	Addr string `json:"addr"`
}

// Route is a default route.
type Route struct {
	Interface string `json:"interface"`
	Gateway   string `json:"gateway"`
}

// K3sInstall is what an existing K3s left on the host.
type K3sInstall struct {
	// BinaryVersion is the version from `k3s --version` (e.g. "v1.36.3+k3s1"), "" if absent.
	BinaryVersion string `json:"binaryVersion,omitempty"`
	// BinaryLabel is the rest of the first line of `k3s --version` (the commit in parentheses;
	// the simulator says "simulator" there), without the parentheses. When the first line does
	// not read "k3s version vX ...", BinaryVersion is "" and BinaryLabel holds that line.
	BinaryLabel string `json:"binaryLabel,omitempty"`
	// BinaryPath is where the k3s binary was found ("" when absent).
	BinaryPath string `json:"binaryPath,omitempty"`
	// Service is "k3s" or "k3s-agent" when a unit exists, else "" (k3s when both exist).
	Service string `json:"service,omitempty"`
	// Services lists every K3s unit found (k3s, k3s-agent), normally zero or one.
	Services []string `json:"services,omitempty"`
	// ServiceActive is `systemctl is-active` of Service ("active", "activating", "failed", ...).
	ServiceActive string `json:"serviceActive,omitempty"`
	// ServiceEnabled is `systemctl is-enabled` of Service.
	ServiceEnabled string `json:"serviceEnabled,omitempty"`
	// Files maps managed paths to their sha256 hex ("" when the path is missing). Which paths
	// are listed is decided by the caller (ScriptInput.Files).
	Files map[string]string `json:"files,omitempty"`
	// UnreadableFiles are the requested paths that exist but could not be hashed.
	UnreadableFiles []string `json:"unreadableFiles,omitempty"`
	// PrivilegedRead is true when the privileged reads (Files, TokenPresent) ran to the end;
	// when false (no root, sudo refused) those fields are unknown, not absent.
	PrivilegedRead bool `json:"privilegedRead"`
	// TokenPresent is true when /var/lib/rancher/k3s/server/token exists (a privileged read).
	TokenPresent bool `json:"tokenPresent"`
	// SubnetEnvPresent is true when /run/flannel/subnet.env exists.
	SubnetEnvPresent bool `json:"subnetEnvPresent"`
}

// ManagedMarker is k3strap's own copy of its install script on a host (k3s.PathInstallScript);
// it exists when k3strap installed the K3s found there.
const ManagedMarker = k3s.PathInstallScript

// ManagedByK3strap reports whether k3strap installed this K3s (its install script's checksum
// was gathered, so the caller listed ManagedMarker and it exists).
func (k K3sInstall) ManagedByK3strap() bool { return k.Files[ManagedMarker] != "" }

// Installed reports whether a K3s binary or unit is present.
func (k K3sInstall) Installed() bool { return k.BinaryVersion != "" || k.Service != "" }

// VersionLine is the first line of `k3s --version` as the binary printed it ("k3s version
// v1.36.3+k3s1 (5aed4d7b)"); "" when no binary was found.
func (k K3sInstall) VersionLine() string {
	if k.BinaryVersion == "" {
		return k.BinaryLabel
	}
	l := "k3s version " + k.BinaryVersion
	if k.BinaryLabel != "" {
		l += " (" + k.BinaryLabel + ")"
	}
	return l
}
