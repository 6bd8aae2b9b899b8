// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// checkSSH: hosts k3strap could not reach or gather facts from.
func checkSSH(in *Input) []finding.Finding {
	var out []finding.Finding
	c := in.Cluster
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if in.NotInRun[h.Name] {
			continue
		}
		s := c.HostSSH(h)
		key := "the ssh-agent"
		if s.KeyPath != "" {
			key = s.KeyPath
		}
		if err := in.Unreachable[h.Name]; err != nil {
			fix := fmt.Sprintf("check that %s is up and accepts SSH on port %d, that user %s exists there with the public key of %s in ~/.ssh/authorized_keys, and that its host key matches %s (spec.hosts[%d].address / ssh)",
				h.Address, s.Port, s.User, key, knownHosts(s), i)
			var de *remote.DeadlineError
			var ce *remote.ConnectError
			switch {
			case errors.As(err, &de):
				// Logged in, but a command hung: keys and known_hosts are fine.
				out = append(out, errorf(h.Name,
					fmt.Sprintf("log in to %s and look for what hangs there: a mount that does not answer (df), a locked package manager, an overloaded host (uptime); then re-run", h.Address),
					"SSH to %s@%s:%d works, but %v", s.User, h.Address, s.Port, err))
				continue
			case errors.As(err, &ce) && ce.Step == remote.StepAgent:
				fix = "check the ssh-agent at $SSH_AUTH_SOCK (`ssh-add -l` must answer at once; an agent waiting for a confirmation or forwarded over a dead session does not), or set ssh.keyPath"
			case errors.As(err, &ce) && ce.Step == remote.StepHostKey:
				fix = fmt.Sprintf("check known_hosts %s: it must be readable, and record the key %s really has (or, for a host certificate, hold an @cert-authority line with the CA that signed it; docs/ssh.md)", knownHosts(s), h.Address)
			case errors.As(err, &ce) && ce.Step == remote.StepAuth:
				fix = fmt.Sprintf("check that user %s exists on %s with the public key of %s in ~/.ssh/authorized_keys, or that its certificate's CA is in the host's TrustedUserCAKeys (a key file must be readable here; an encrypted one needs ssh.keyPassphraseEnv, ssh.keyPassphraseFile, a terminal or the ssh-agent; docs/ssh.md)", s.User, h.Address, key)
			}
			out = append(out, errorf(h.Name, fix, "SSH to %s@%s:%d failed: %v", s.User, h.Address, s.Port, err))
			continue
		}
		if in.Facts[h.Name] == nil {
			out = append(out, errorf(h.Name,
				fmt.Sprintf("make sure user %s has a POSIX /bin/sh on %s, then re-run with --verbose to see the facts command's output", s.User, h.Address),
				"connected to %s@%s:%d but gathered no facts", s.User, h.Address, s.Port))
		}
	}
	return out
}

func knownHosts(s inventory.SSH) string {
	if s.KnownHosts != "" {
		return s.KnownHosts
	}
	return "~/.ssh/known_hosts"
}

// checkSudo: the login user must be root or able to sudo.
func checkSudo(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		s := f.Sudo
		if s.OK {
			return nil
		}
		user := s.User
		if user == "" {
			user = in.Cluster.HostSSH(h).User
		}
		msg := ""
		if s.Message != "" {
			msg = fmt.Sprintf(" (sudo said: %s)", s.Message)
		}
		switch s.Mode {
		case "needs-password":
			return []finding.Finding{errorf(h.Name,
				fmt.Sprintf("give the sudo password with spec.ssh.sudoPasswordEnv or spec.ssh.sudoPasswordFile (or interactively), or allow passwordless sudo: echo '%s ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/k3strap", user),
				"user %s is not root and sudo needs a password, but none was given%s", user, msg)}
		case "bad-password":
			return []finding.Finding{errorf(h.Name,
				"check the password in spec.ssh.sudoPasswordEnv / sudoPasswordFile for this host",
				"sudo rejected the password given for user %s%s", user, msg)}
		case "unavailable":
			return []finding.Finding{errorf(h.Name,
				"log in as root (ssh.user: root) or install sudo and allow the login user to use it",
				"user %s is not root and sudo is not installed", user)}
		default:
			return []finding.Finding{errorf(h.Name,
				fmt.Sprintf("allow %s to run commands as root: add it to /etc/sudoers.d/ (e.g. '%s ALL=(ALL) ALL') or log in as root", user, user),
				"user %s cannot become root with sudo%s", user, msg)}
		}
	})
}

// knownDistro reports whether K3s is known to run on an os-release ID or ID_LIKE family
// (docs.k3s.io/installation/requirements: "K3s is expected to work on most modern Linux
// systems"; the ones below are the distributions it is tested or commonly run on).
func knownDistro(id string) bool {
	switch id {
	case "debian", "ubuntu", "raspbian", "linuxmint", "pop",
		"rhel", "centos", "rocky", "almalinux", "ol", "fedora", "amzn",
		"sles", "sle-micro", "suse", "opensuse", "opensuse-leap", "opensuse-tumbleweed", "opensuse-microos",
		"alpine", "arch", "photon", "flatcar":
		return true
	}
	return false
}

// checkOS: warn about distributions k3strap does not know.
func checkOS(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if f.OS.ID == "" {
			return []finding.Finding{warnf(h.Name, "make sure the host runs a Linux distribution K3s supports (docs.k3s.io/installation/requirements)",
				"no /etc/os-release: the Linux distribution is unknown")}
		}
		if knownDistro(f.OS.ID) {
			return nil
		}
		for _, like := range strings.Fields(f.OS.IDLike) {
			if knownDistro(like) {
				return nil
			}
		}
		name := f.OS.PrettyName
		if name == "" {
			name = f.OS.ID
		}
		return []finding.Finding{warnf(h.Name, "use a distribution K3s supports (docs.k3s.io/installation/requirements); the install may still work if it has systemd or OpenRC and the kernel features K3s needs",
			"%s (ID=%s, ID_LIKE=%q) is not a distribution k3strap knows K3s to run on", name, f.OS.ID, f.OS.IDLike)}
	})
}

// checkArch: K3s ships amd64, arm64 and arm (armhf); airgap needs artifacts for each.
func checkArch(in *Input) []finding.Finding {
	c := in.Cluster
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if f.Arch == "" {
			return []finding.Finding{errorf(h.Name, "use an x86_64 (amd64), aarch64 (arm64) or armv7 (arm) host",
				"architecture %q (uname -m) has no K3s release: K3s ships amd64, arm64 and arm (armv7)", f.Machine)}
		}
		if c.Spec.K3s.Install != inventory.Airgap {
			return nil
		}
		a, ok := c.Spec.K3s.Airgap[f.Arch]
		if ok && a.Binary != "" {
			return nil
		}
		bin := map[string]string{"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}[f.Arch]
		if b := c.Bundle; b != nil {
			return []finding.Finding{errorf(h.Name,
				fmt.Sprintf("write the bundle again with `k3strap bundle` from an inventory that also has spec.k3s.airgap.%s (the %s binary, images and checksums of K3s %s)", f.Arch, bin, c.Spec.K3s.Version),
				"the airgap bundle %s has no artifacts for %s, the architecture of this host (uname -m %s); it holds %s", b.Path, f.Arch, f.Machine, strings.Join(b.Manifest.Architectures(), ", "))}
		}
		return []finding.Finding{errorf(h.Name,
			fmt.Sprintf("add spec.k3s.airgap.%s with binary: <path to %s> and images: <path to k3s-airgap-images-%s.tar.zst> from the K3s release %s", f.Arch, bin, f.Arch, c.Spec.K3s.Version),
			"airgap install, but spec.k3s.airgap has no binary for %s, the architecture of this host (uname -m %s)", f.Arch, f.Machine)}
	})
}

// checkInitSystem: install.sh needs systemd or OpenRC (docs/k3s.md).
func checkInitSystem(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		switch f.InitSystem {
		case "systemd", "openrc":
			return nil
		}
		return []finding.Finding{errorf(h.Name, "use a host booted with systemd or OpenRC; K3s's install.sh creates a systemd unit or an OpenRC service and cannot manage K3s otherwise",
			"no supported init system: neither /run/systemd/system (systemd) nor /sbin/openrc-run (OpenRC) exists (detected %q)", f.InitSystem)}
	})
}

// checkSwap: swap on is a warning (docs/k3s.md).
func checkSwap(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if f.SwapTotalKiB <= 0 {
			return nil
		}
		return []finding.Finding{warnf(h.Name, "turn swap off (swapoff -a, and remove the swap entry from /etc/fstab or disable the swap unit) unless you configured the kubelet's swap behaviour on purpose",
			"swap is on (SwapTotal %s): the kubelet's memory accounting and pod eviction assume no swap", fmtKiB(f.SwapTotalKiB))}
	})
}

// Memory thresholds (K3s docs, installation requirements: server 2 GB, agent 512 MB). MemTotal
// leaves out what the kernel reserves, so a machine with 2 GiB of RAM reports about 1.9 GiB;
// the thresholds are compared at 90%.
const (
	memFloorKiB       = 512 << 10 // below this (agents and servers): error
	memServerKiB      = 2 << 20   // below this on a server: warning
	memSlackPercent   = 90
	diskMinKiB        = 2 << 20  // free under /var/lib/rancher below this: error
	diskRecommendKiB  = 10 << 20 // below this: warning
	rootMaxKeysWanted = 10000
)

func below(v, threshold int64) bool { return v < threshold*memSlackPercent/100 }

// checkMem: K3s's documented memory minimums.
func checkMem(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		m := f.MemTotalKiB
		if m <= 0 {
			return []finding.Finding{warnf(h.Name, "check that /proc/meminfo is readable", "memory size unknown (no MemTotal in /proc/meminfo)")}
		}
		if below(m, memFloorKiB) {
			return []finding.Finding{errorf(h.Name, "give the host at least 512 MiB of memory (2 GiB for a server)",
				"only %s of memory (MemTotal %d KiB); K3s needs at least 512 MiB on any node", fmtKiB(m), m)}
		}
		if h.Role == inventory.RoleServer && below(m, memServerKiB) {
			return []finding.Finding{warnf(h.Name, "give servers at least 2 GiB of memory, or expect the API server and datastore to be slow or OOM-killed under load",
				"server with only %s of memory (MemTotal %d KiB); K3s recommends at least 2 GiB for a server", fmtKiB(m), m)}
		}
		return nil
	})
}

// checkDisk: free space where K3s keeps images and the datastore.
func checkDisk(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		d := f.DiskFreeKiB
		where := f.DiskPath
		if where == "" {
			return []finding.Finding{warnf(h.Name, "check that df works on the host", "free disk space under /var/lib/rancher unknown")}
		}
		fix := fmt.Sprintf("free space on the filesystem holding %s or mount a larger disk at /var/lib/rancher (K3s keeps container images and its datastore there)", where)
		if d < diskMinKiB {
			return []finding.Finding{errorf(h.Name, fix, "only %s free on the filesystem holding %s (for /var/lib/rancher); K3s needs at least 2 GiB, 10 GiB recommended", fmtKiB(d), where)}
		}
		if d < diskRecommendKiB {
			return []finding.Finding{warnf(h.Name, fix, "only %s free on the filesystem holding %s (for /var/lib/rancher); at least 10 GiB is recommended", fmtKiB(d), where)}
		}
		return nil
	})
}

// checkHostname: DNS-1123 names and duplicates. k3strap always renders node-name (the
// inventory name), so neither breaks node registration: both are warnings that explain.
func checkHostname(in *Input) []finding.Finding {
	c := in.Cluster
	out := eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		hn := f.Hostname
		fix := fmt.Sprintf("give the host a unique lowercase DNS name: hostnamectl set-hostname %s (or edit /etc/hostname)", h.Name)
		switch {
		case hn == "":
			return []finding.Finding{warnf(h.Name, fix, "the host has no hostname; the node registers as %q because k3strap renders node-name", h.Name)}
		case hn == "localhost" || strings.HasPrefix(hn, "localhost."):
			return []finding.Finding{warnf(h.Name, fix, "the hostname is %q; the node registers as %q because k3strap renders node-name, but logs and tools that show the hostname cannot tell hosts apart", hn, h.Name)}
		}
		if errs := validation.IsDNS1123Subdomain(hn); len(errs) > 0 {
			return []finding.Finding{warnf(h.Name, fix, "hostname %q is not a valid DNS-1123 name (%s); K3s would refuse it as a node name, but the node registers as %q because k3strap renders node-name", hn, errs[0], h.Name)}
		}
		return nil
	})
	groups := map[string][]string{}
	var keys []string
	eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		k := strings.ToLower(f.Hostname)
		if k == "" {
			return nil
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], h.Name)
		return nil
	})
	for _, k := range keys {
		if names := groups[k]; len(names) > 1 {
			out = append(out, warnf(hostList(c, names),
				"give each host its own hostname (hostnamectl set-hostname NAME) so logs, metrics and SSH prompts tell them apart",
				"%d hosts share the hostname %q; each still registers under its own node-name (%s), which k3strap renders, so the cluster works, but anything that shows hostnames will confuse them",
				len(names), k, strings.Join(names, ", ")))
		}
	}
	return out
}

// checkMachineID: cloned images share /etc/machine-id, which must be unique per node (the
// kubelet reports it as the node's machineID; systemd derives DHCP client IDs from it).
func checkMachineID(in *Input) []finding.Finding {
	groups := map[string][]string{}
	var keys []string
	eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if f.MachineID == "" {
			return nil
		}
		if _, ok := groups[f.MachineID]; !ok {
			keys = append(keys, f.MachineID)
		}
		groups[f.MachineID] = append(groups[f.MachineID], h.Name)
		return nil
	})
	var out []finding.Finding
	for _, k := range keys {
		if names := groups[k]; len(names) > 1 {
			out = append(out, errorf(hostList(in.Cluster, names),
				"give every clone its own ID: rm -f /etc/machine-id && systemd-machine-id-setup (OpenRC: dbus-uuidgen --ensure=/etc/machine-id), then reboot",
				"%s have the same /etc/machine-id %s: the hosts were cloned from one image; nodes with the same machine ID break node identity (the kubelet reports it as the node's machineID, and systemd-networkd derives the same DHCP client ID and so the same leased address from it)",
				strings.Join(names, ", "), k))
		}
	}
	return out
}

// checkClockSkew: the host's clock against the workstation's (TLS certificates, etcd, tokens).
func checkClockSkew(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if f.RemoteClock.IsZero() {
			return []finding.Finding{warnf(h.Name, "check that `date` works on the host", "the host's clock could not be read; clock skew unknown")}
		}
		s := f.ClockSkew
		abs := s
		if abs < 0 {
			abs = -abs
		}
		dir := "ahead of"
		if s < 0 {
			dir = "behind"
		}
		fix := "enable time synchronisation on the host (timedatectl set-ntp true, or chrony / ntpd; on OpenRC: rc-update add chronyd) and check the workstation's clock too"
		switch {
		case abs > k3s.ClockSkewError:
			return []finding.Finding{errorf(h.Name, fix, "the clock is %s %s this workstation (more than %s): certificates K3s issues look not yet valid or expired to other nodes, and etcd and token checks fail", abs.Round(100*time.Millisecond), dir, fmtSeconds(k3s.ClockSkewError))}
		case abs > k3s.ClockSkewWarn:
			return []finding.Finding{warnf(h.Name, fix, "the clock is %s %s this workstation (more than %s)", abs.Round(100*time.Millisecond), dir, fmtSeconds(k3s.ClockSkewWarn))}
		}
		return nil
	})
}

// clusterFamilies reports which IP families the cluster's pod network uses (cluster-cidr of the
// first server; IPv4 by default).
func clusterFamilies(c *inventory.Cluster) (v4, v6 bool) {
	cidrs, _ := c.ClusterCIDRs()
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			continue
		}
		if p.Addr().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	if !v4 && !v6 {
		v4 = true
	}
	return v4, v6
}

// checkDefaultRoute: K3s needs a default route for each IP family of the cluster, also in
// airgap (docs/k3s.md#airgap).
func checkDefaultRoute(in *Input) []finding.Finding {
	v4, v6 := clusterFamilies(in.Cluster)
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		var missing []string
		if v4 && f.DefaultRoute == nil {
			missing = append(missing, "IPv4 (/proc/net/route)")
		}
		if v6 && f.DefaultRoute6 == nil {
			missing = append(missing, "IPv6 (/proc/net/ipv6_route)")
		}
		if len(missing) == 0 {
			return nil
		}
		return []finding.Finding{errorf(h.Name,
			"add a default route, e.g. ip route add default via <gateway> dev <interface>, and make it persistent; on an isolated (airgap) network a default route to a dummy interface is enough",
			"no %s default route: K3s needs one to choose the node IP and for its service proxy, also in airgap installs", strings.Join(missing, " or "))}
	})
}

// fmtSeconds writes a threshold in seconds ("2 s", "60 s").
func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%g s", d.Seconds()) }
