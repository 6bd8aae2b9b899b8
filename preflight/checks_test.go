// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

func cp1w1() *inventory.Cluster {
	return newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent))
}

func only(name string, fn func(f *facts.Host)) func(string, *facts.Host) {
	return func(n string, f *facts.Host) {
		if n == name {
			fn(f)
		}
	}
}

func TestHealthyClusterHasNoFindings(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("cp3", inventory.RoleServer), host("w1", inventory.RoleAgent))
	r := Run(input(c, nil), Ignore{})
	for _, f := range r.Findings {
		t.Errorf("unexpected finding: %s (fix: %s)", f, f.Fix())
	}
}

func TestSSH(t *testing.T) {
	c := cp1w1()
	c.Spec.SSH.User = "ops"
	c.Spec.SSH.KeyPath = "~/.ssh/edge"
	unreachable := input(c, nil)
	delete(unreachable.Facts, "w1")
	unreachable.Unreachable = map[string]error{"w1": errors.New("dial tcp 10.0.0.11:22: i/o timeout")}
	noFacts := input(c, nil)
	noFacts.Facts["cp1"] = nil
	hung := input(c, nil)
	delete(hung.Facts, "w1")
	hung.Unreachable = map[string]error{"w1": &remote.DeadlineError{Host: "w1", Command: "gather facts", Timeout: 2 * time.Minute}}
	agent := input(c, nil)
	delete(agent.Facts, "w1")
	agent.Unreachable = map[string]error{"w1": &remote.ConnectError{Host: "w1", Step: remote.StepAgent, Err: errors.New("ssh-agent did not answer within 10s")}}
	notInRun := input(c, nil)
	delete(notInRun.Facts, "w1")
	notInRun.NotInRun = map[string]bool{"w1": true}
	runCases(t, "SSH", []checkCase{
		{"all reachable", input(c, nil), nil},
		{"a host the run does not work on", notInRun, nil},
		{"command hung", hung, []want{errW("w1", "SSH to ops@w1.example.net:22 works, but gather facts on w1 did not finish within 2m0s").withFix("look for what hangs")}},
		{"agent silent", agent, []want{errW("w1", "ssh-agent did not answer within 10s").withFix("ssh-add -l", "ssh.keyPath")}},
		{"unreachable", unreachable, []want{
			errW("w1", "SSH to ops@w1.example.net:22 failed", "i/o timeout").withFix("~/.ssh/edge", "known_hosts"),
		}},
		{"no facts", noFacts, []want{errW("cp1", "gathered no facts")}},
	})
}

func TestSudo(t *testing.T) {
	c := cp1w1()
	runCases(t, "Sudo", []checkCase{
		{"root and nopasswd", input(c, only("w1", func(f *facts.Host) { f.Sudo = facts.Sudo{User: "ops", OK: true, Mode: "nopasswd"} })), nil},
		{"needs password", input(c, only("w1", func(f *facts.Host) {
			f.Sudo = facts.Sudo{User: "ops", NeedsPassword: true, Mode: "needs-password", Message: "sudo: a password is required"}
		})), []want{errW("w1", "user ops", "needs a password", "a password is required").withFix("sudoPasswordEnv", "NOPASSWD")}},
		{"bad password", input(c, only("cp1", func(f *facts.Host) {
			f.Sudo = facts.Sudo{User: "ops", NeedsPassword: true, Mode: "bad-password", Message: "sudo: 1 incorrect password attempt"}
		})), []want{errW("cp1", "rejected the password", "incorrect password").withFix("sudoPasswordFile")}},
		{"denied", input(c, only("cp1", func(f *facts.Host) {
			f.Sudo = facts.Sudo{User: "ops", Mode: "denied", Message: "ops is not in the sudoers file."}
		})), []want{errW("cp1", "cannot become root", "not in the sudoers file").withFix("/etc/sudoers.d/")}},
		{"no sudo", input(c, only("cp1", func(f *facts.Host) {
			f.Sudo = facts.Sudo{User: "ops", Mode: "unavailable", Message: "sudo is not installed"}
		})), []want{errW("cp1", "sudo is not installed").withFix("install sudo")}},
	})
}

func TestOS(t *testing.T) {
	c := cp1w1()
	runCases(t, "OS", []checkCase{
		{"known", input(c, only("w1", func(f *facts.Host) { f.OS = facts.OSRelease{ID: "alpine"} })), nil},
		{"known family", input(c, only("w1", func(f *facts.Host) { f.OS = facts.OSRelease{ID: "kali", IDLike: "debian"} })), nil},
		{"unknown", input(c, only("w1", func(f *facts.Host) {
			f.OS = facts.OSRelease{ID: "haiku", PrettyName: "Haiku R1"}
		})), []want{warnW("w1", "Haiku R1", "ID=haiku")}},
		{"no os-release", input(c, only("cp1", func(f *facts.Host) { f.OS = facts.OSRelease{} })), []want{warnW("cp1", "no /etc/os-release")}},
	})
}

func TestArch(t *testing.T) {
	c := cp1w1()
	air := cp1w1()
	air.Spec.K3s.Install = inventory.Airgap
	air.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: "k3s", Images: "k3s-airgap-images-amd64.tar.zst"}}
	arm := func(f *facts.Host) { f.Machine, f.Arch = "aarch64", "arm64" }
	runCases(t, "Arch", []checkCase{
		{"online any supported arch", input(c, only("w1", arm)), nil},
		{"unsupported", input(c, only("w1", func(f *facts.Host) { f.Machine, f.Arch = "riscv64", "" })), []want{errW("w1", `"riscv64"`, "amd64, arm64 and arm")}},
		{"airgap has the arch", input(air, nil), nil},
		{"airgap lacks the arch", input(air, only("w1", arm)), []want{
			errW("w1", "no binary for arm64", "aarch64").withFix("spec.k3s.airgap.arm64", "k3s-arm64", "k3s-airgap-images-arm64.tar.zst", "v1.36.3+k3s1"),
		}},
	})
}

func TestInitSystem(t *testing.T) {
	c := cp1w1()
	runCases(t, "InitSystem", []checkCase{
		{"systemd and openrc", input(c, only("w1", func(f *facts.Host) { f.InitSystem = "openrc" })), nil},
		{"none", input(c, only("w1", func(f *facts.Host) { f.InitSystem = "none" })), []want{errW("w1", "no supported init system", `"none"`)}},
	})
}

func TestKernelConfig(t *testing.T) {
	c := cp1w1()
	runCases(t, "KernelConfig", []checkCase{
		{"complete", input(c, nil), nil},
		{"modules =m loadable", input(c, only("w1", func(f *facts.Host) {
			f.Kernel.Config["CONFIG_BRIDGE"] = "m"
			f.Kernel.Config["CONFIG_NETFILTER_XT_MATCH_COMMENT"] = "m"
			f.Kernel.Loadable = []string{"bridge", "xt_comment"}
		})), nil},
		{"missing options", input(c, only("w1", func(f *facts.Host) {
			delete(f.Kernel.Config, "CONFIG_BRIDGE_NETFILTER")
			f.Kernel.Config["CONFIG_NETFILTER_XT_MATCH_STATISTIC"] = "m"
			delete(f.Kernel.Config, "CONFIG_POSIX_MQUEUE")
		})), []want{errW("w1", "kernel 6.1.0-28-amd64 lacks 3 feature(s)",
			"br_netfilter (not in /boot/config-6.1.0-28-amd64 (CONFIG_BRIDGE_NETFILTER not set)",
			"xt_statistic (CONFIG_NETFILTER_XT_MATCH_STATISTIC=m in /boot/config-6.1.0-28-amd64 but the module is not available",
			"POSIX message queues").withFix("modprobe", "k3s check-config")}},
		{"cgroup v1 needs devices and freezer", input(c, only("cp1", func(f *facts.Host) {
			f.Cgroup = facts.Cgroup{Version: 1, Controllers: []string{"cpuset", "memory"}}
			delete(f.Kernel.Config, "CONFIG_CGROUP_FREEZER")
		})), []want{errW("cp1", "lacks 1 feature(s)", "cgroup freezer")}},
		{"nothing readable", input(c, only("w1", func(f *facts.Host) { f.Kernel = facts.Kernel{} })), []want{
			warnW("w1", "no kernel config and no module lists readable", "unverified").withFix("CONFIG_IKCONFIG_PROC", "/boot/config-6.1.0-28-amd64"),
		}},
		{"no config, modules only: config-only options unproven", input(c, only("w1", func(f *facts.Host) {
			f.Kernel = facts.Kernel{
				ModuleSupport: true, SysModuleRead: true, Namespaces: []string{"net", "pid", "ipc", "uts"},
				BuiltinSource: "/lib/modules/r/modules.builtin", DepSource: "/lib/modules/r/modules.dep",
				Loadable: []string{"veth", "bridge", "br_netfilter", "iptable_filter", "iptable_nat", "nf_nat", "xt_addrtype", "xt_conntrack", "xt_comment", "xt_multiport", "xt_statistic", "xt_MASQUERADE", "ipt_REJECT"},
			}
		})), []want{warnW("w1", "could not prove", "namespaces (no kernel config", "seccomp")}},
		{"no config, a module missing everywhere", input(c, only("w1", func(f *facts.Host) {
			f.Kernel = facts.Kernel{
				ModuleSupport: true, SysModuleRead: true, Namespaces: []string{"net", "pid", "ipc", "uts"},
				BuiltinSource: "/lib/modules/r/modules.builtin", DepSource: "/lib/modules/r/modules.dep",
				Loadable: []string{"veth", "bridge", "iptable_filter", "iptable_nat", "nf_nat", "xt_addrtype", "xt_conntrack", "xt_comment", "xt_multiport", "xt_statistic", "xt_MASQUERADE", "ipt_REJECT"},
			}
		})), []want{
			errW("w1", "lacks 1 feature(s)", "br_netfilter (no kernel config", "not in /lib/modules/r/modules.dep"),
			warnW("w1", "could not prove"),
		}},
		{"low root_maxkeys", input(c, only("cp1", func(f *facts.Host) { f.KeysRootMaxKeys = 200 })), []want{
			warnW("cp1", "root_maxkeys is 200").withFix("sysctl -w kernel.keys.root_maxkeys=1000000"),
		}},
	})
}

func TestCNIKernel(t *testing.T) {
	noVXLAN := only("w1", func(f *facts.Host) { delete(f.Kernel.Config, "CONFIG_VXLAN") })
	wgM := only("w1", func(f *facts.Host) {
		f.Kernel.Config["CONFIG_WIREGUARD"] = "m"
		f.Kernel.Loaded = []string{"wireguard"}
	})
	wg := cp1w1()
	wg.Spec.CNI.Backend = "wireguard-native"
	wgCfg := cp1w1()
	wgCfg.Spec.K3s.Config.FlannelBackend = "wireguard-native"
	hostgw := cp1w1()
	hostgw.Spec.CNI.Backend = "host-gw"
	none := cp1w1()
	none.Spec.CNI.Type = inventory.CNINone
	calico := cp1w1()
	calico.Spec.CNI = inventory.CNI{Type: inventory.CNICalico, Backend: "VXLAN"}
	standalone := cp1w1()
	standalone.Spec.CNI.Type = inventory.CNIFlannelStandalone
	runCases(t, "CNIKernel", []checkCase{
		{"vxlan present", input(cp1w1(), nil), nil},
		{"vxlan missing", input(cp1w1(), noVXLAN), []want{
			errW("w1", "flannel backend vxlan needs vxlan", "CONFIG_VXLAN not set").withFix("CONFIG_VXLAN", "host-gw"),
		}},
		{"vxlan unproven", input(cp1w1(), only("cp1", func(f *facts.Host) {
			f.Kernel = facts.Kernel{SysModuleRead: true}
		})), []want{warnW("cp1", "could not prove", "no modules.builtin")}},
		{"kernel unreadable", input(cp1w1(), only("cp1", func(f *facts.Host) { f.Kernel = facts.Kernel{} })), []want{warnW("cp1", "unverified")}},
		{"wireguard-native =m loaded", input(wg, wgM), nil},
		{"wireguard-native missing", input(wg, only("cp1", func(f *facts.Host) { delete(f.Kernel.Config, "CONFIG_WIREGUARD") })), []want{
			errW("cp1", "flannel backend wireguard-native needs wireguard").withFix("5.6", "vxlan"),
		}},
		{"backend from k3s config", input(wgCfg, noVXLAN), nil},
		{"host-gw needs nothing", input(hostgw, noVXLAN), nil},
		{"cni none needs nothing", input(none, noVXLAN), nil},
		{"standalone flannel defaults to vxlan", input(standalone, noVXLAN), []want{errW("w1", "flannel-standalone (backend vxlan) needs vxlan")}},
		{"calico VXLAN present", input(calico, nil), nil},
	})
}

// TestCNIKernelPolicy: Calico's kernel needs under kernelPolicy strict (an error naming host,
// missing features and where they were looked for) and exclude (a warning per host, one
// summary, and CNIExcludedHosts for the installer) — docs/failure-modes.md F2.
func TestCNIKernelPolicy(t *testing.T) {
	noIPSet := only("w1", func(f *facts.Host) {
		delete(f.Kernel.Config, "CONFIG_IP_SET")
		delete(f.Kernel.Config, "CONFIG_NETFILTER_XT_SET")
	})
	calico := func(backend string, policy inventory.KernelPolicy) *inventory.Cluster {
		c := cp1w1()
		c.Spec.CNI = inventory.CNI{Type: inventory.CNICalico, Backend: backend, KernelPolicy: policy}
		return c
	}
	oldKernel := only("w1", func(f *facts.Host) { f.KernelRelease = "5.4.0-150-generic" })
	noIPIP := only("cp1", func(f *facts.Host) { delete(f.Kernel.Config, "CONFIG_NET_IPIP") })
	flannelExclude := cp1w1()
	flannelExclude.Spec.CNI.KernelPolicy = inventory.KernelPolicyExclude
	standaloneExclude := cp1w1()
	standaloneExclude.Spec.CNI = inventory.CNI{Type: inventory.CNIFlannelStandalone, KernelPolicy: inventory.KernelPolicyExclude}
	noVXLAN := only("w1", func(f *facts.Host) { delete(f.Kernel.Config, "CONFIG_VXLAN") })
	bothNoIPSet := func(_ string, f *facts.Host) { delete(f.Kernel.Config, "CONFIG_IP_SET") }

	runCases(t, "CNIKernel", []checkCase{
		{"strict: host without ip_set fails", input(calico("", ""), noIPSet), []want{
			errW("w1", "calico (encapsulation VXLANCrossSubnet) needs ip_set, xt_set", "kernel 6.1.0-28-amd64 lacks",
				"ip_set (not in /boot/config-6.1.0-28-amd64 (CONFIG_IP_SET not set)", "xt_set (", "not in /sys/module").
				withFix("kernelPolicy: exclude"),
		}},
		{"strict explicitly", input(calico("VXLAN", inventory.KernelPolicyStrict), noIPSet), []want{errW("w1", "lacks: ip_set")}},
		{"exclude: host without ip_set is excluded, loudly", input(calico("", inventory.KernelPolicyExclude), noIPSet), []want{
			warnW("w1", "EXCLUDED from calico", "lacks ip_set (not in /boot/config-6.1.0-28-amd64", "k3strap.io/cni-excluded=true"),
			warnW("w1", "1 host(s) EXCLUDED from calico", ": w1"),
		}},
		{"exclude: every host lacking is an error", input(calico("", inventory.KernelPolicyExclude), bothNoIPSet), []want{
			warnW("cp1", "EXCLUDED"), warnW("w1", "EXCLUDED"), errW("cp1, w1", "would exclude every host"),
		}},
		{"kernel older than 5.10", input(calico("VXLAN", ""), oldKernel), []want{errW("w1", "kernel >= 5.10 (uname -r says 5.4.0-150-generic)")}},
		{"IPIP needs ipip", input(calico("IPIP", ""), noIPIP), []want{errW("cp1", "ipip (not in", "CONFIG_NET_IPIP not set")}},
		{"VXLAN does not need ipip", input(calico("VXLAN", ""), noIPIP), nil},
		{"embedded flannel cannot exclude", input(flannelExclude, noVXLAN), []want{
			errW("w1", "flannel backend vxlan needs vxlan").withFix("embedded flannel runs inside K3s on every node"),
		}},
		{"flannel-standalone can exclude", input(standaloneExclude, noVXLAN), []want{
			warnW("w1", "EXCLUDED from flannel-standalone (backend vxlan)"), warnW("w1", "1 host(s) EXCLUDED"),
		}},
	})

	if got := CNIExcludedHosts(input(calico("", inventory.KernelPolicyExclude), noIPSet)); len(got) != 1 || got[0].Host != "w1" ||
		!strings.Contains(strings.Join(got[0].Missing, ";"), "CONFIG_IP_SET not set") {
		t.Errorf("CNIExcludedHosts = %+v, want w1 missing ip_set", got)
	}
	for name, in := range map[string]*Input{
		"strict":            input(calico("", ""), noIPSet),
		"embedded flannel":  input(flannelExclude, noVXLAN),
		"kernel unreadable": input(calico("", inventory.KernelPolicyExclude), only("w1", func(f *facts.Host) { f.Kernel = facts.Kernel{} })),
	} {
		if got := CNIExcludedHosts(in); len(got) != 0 {
			t.Errorf("%s: CNIExcludedHosts = %+v, want none", name, got)
		}
	}
}

func TestCgroups(t *testing.T) {
	v1 := func(f *facts.Host) {
		f.Cgroup = facts.Cgroup{Version: 1, Controllers: []string{"cpuset", "cpu", "memory"}}
	}
	optOut := cp1w1()
	optOut.Spec.K3s.Config.KubeletArg = inventory.StringList{"fail-cgroupv1=false"}
	old := cp1w1()
	old.Spec.K3s.Version = "v1.33.5+k3s1"
	channel := cp1w1()
	channel.Spec.K3s.Version, channel.Spec.K3s.Channel = "", "stable"
	runCases(t, "Cgroups", []checkCase{
		{"v2 complete", input(cp1w1(), nil), nil},
		{"v2 without cpuset", input(cp1w1(), only("w1", func(f *facts.Host) { f.Cgroup.Controllers = []string{"cpu", "memory"} })), []want{
			errW("w1", "cgroup v2 without the cpuset controller(s)", "cgroup.controllers lists: cpu memory").withFix("cmdline.txt"),
		}},
		{"v1 memory disabled", input(optOut, only("w1", func(f *facts.Host) { f.Cgroup = facts.Cgroup{Version: 1, Controllers: []string{"cpuset", "cpu"}} })), []want{
			errW("w1", "cgroup v1 without the memory controller(s)", "/proc/cgroups"),
		}},
		{"no cgroups", input(cp1w1(), only("cp1", func(f *facts.Host) { f.Cgroup = facts.Cgroup{} })), []want{errW("cp1", "no cgroup filesystem")}},
		{"v1 with k3s 1.36", input(cp1w1(), only("cp1", v1)), []want{
			errW("cp1", "cgroup v1", "v1.36.3+k3s1", "refuses cgroup v1").withFix("systemd.unified_cgroup_hierarchy=1", "fail-cgroupv1=false"),
		}},
		{"v1 with fail-cgroupv1=false", input(optOut, only("cp1", v1)), nil},
		{"v1 with k3s 1.33", input(old, only("cp1", v1)), []want{warnW("cp1", "deprecated")}},
		{"v1 with a channel", input(channel, only("cp1", v1)), []want{warnW("cp1", `channel "stable"`)}},
	})
}

func TestSwap(t *testing.T) {
	runCases(t, "Swap", []checkCase{
		{"off", input(cp1w1(), nil), nil},
		{"on", input(cp1w1(), only("w1", func(f *facts.Host) { f.SwapTotalKiB = 512 << 10 })), []want{warnW("w1", "swap is on (SwapTotal 512 MiB)").withFix("swapoff -a")}},
	})
}

func TestPorts(t *testing.T) {
	listen := func(name, proto string, port int) func(string, *facts.Host) {
		return only(name, func(f *facts.Host) {
			f.Listening = append(f.Listening, facts.Port{Proto: proto, Port: port, Addr: "0.0.0.0"}, facts.Port{Proto: proto, Port: port, Addr: "::"})
		})
	}
	running := func(f *facts.Host) {
		f.K3s.BinaryVersion, f.K3s.Service, f.K3s.ServiceActive = "v1.36.3+k3s1", "k3s", "active"
		f.Listening = append(f.Listening, facts.Port{Proto: "tcp", Port: 6443, Addr: "::"}, facts.Port{Proto: "udp", Port: 8472, Addr: "0.0.0.0"})
	}
	stopped := func(f *facts.Host) {
		running(f)
		f.K3s.ServiceActive = "failed"
	}
	wg := cp1w1()
	wg.Spec.CNI.Backend = "wireguard-native"
	wg6 := cp1w1()
	wg6.Spec.CNI.Backend = "wireguard-native"
	wg6.Spec.K3s.Config.ClusterCIDR = inventory.StringList{"10.42.0.0/16,2001:cafe:42::/56"}

	runCases(t, "Port-6443", []checkCase{
		{"free", input(cp1w1(), nil), nil},
		{"taken on a server", input(cp1w1(), listen("cp1", "tcp", 6443)), []want{
			errW("cp1", "TCP port 6443 (the K3s API server and supervisor) is already in use (bound to 0.0.0.0, ::)").withFix("ss -ltnp 'sport = :6443'"),
		}},
		{"taken on an agent does not matter", input(cp1w1(), listen("w1", "tcp", 6443)), nil},
		{"held by the running K3s", input(cp1w1(), only("cp1", running)), nil},
		{"K3s installed but stopped", input(cp1w1(), only("cp1", stopped)), []want{errW("cp1", "not running (\"failed\")")}},
	})
	runCases(t, "Port-10250", []checkCase{
		{"taken on an agent", input(cp1w1(), listen("w1", "tcp", 10250)), []want{errW("w1", "TCP port 10250 (the kubelet)")}},
	})
	runCases(t, "Port-2379", []checkCase{
		{"taken on a server", input(cp1w1(), listen("cp1", "tcp", 2379)), []want{errW("cp1", "2379 (embedded etcd (clients))")}},
		{"agent", input(cp1w1(), listen("w1", "tcp", 2379)), nil},
	})
	runCases(t, "Port-2380", []checkCase{
		{"taken on a server", input(cp1w1(), listen("cp1", "tcp", 2380)), []want{errW("cp1", "2380")}},
	})
	runCases(t, "Port-8472", []checkCase{
		{"vxlan port taken", input(cp1w1(), listen("w1", "udp", 8472)), []want{
			errW("w1", "UDP port 8472 (flannel VXLAN)").withFix("ss -lunp", "ip link delete flannel.1"),
		}},
		{"not used by wireguard-native", input(wg, listen("w1", "udp", 8472)), nil},
		{"tcp 8472 is not the vxlan port", input(cp1w1(), listen("w1", "tcp", 8472)), nil},
	})
	runCases(t, "Port-51820", []checkCase{
		{"wireguard port taken", input(wg, listen("cp1", "udp", 51820)), []want{errW("cp1", "UDP port 51820")}},
		{"vxlan does not use it", input(cp1w1(), listen("cp1", "udp", 51820)), nil},
	})
	runCases(t, "Port-51821", []checkCase{
		{"ipv4-only cluster", input(wg, listen("cp1", "udp", 51821)), nil},
		{"dual-stack wireguard", input(wg6, listen("cp1", "udp", 51821)), []want{errW("cp1", "UDP port 51821")}},
	})
}

func TestMem(t *testing.T) {
	mem := func(name string, kib int64) func(string, *facts.Host) {
		return only(name, func(f *facts.Host) { f.MemTotalKiB = kib })
	}
	runCases(t, "Mem", []checkCase{
		{"plenty", input(cp1w1(), nil), nil},
		{"2 GiB server reports less than 2 GiB", input(cp1w1(), mem("cp1", 1_950_000)), nil},
		{"small server", input(cp1w1(), mem("cp1", 1<<20)), []want{
			warnW("cp1", "server with only 1.0 GiB of memory (MemTotal 1048576 KiB)", "at least 2 GiB"),
		}},
		{"tiny server", input(cp1w1(), mem("cp1", 300<<10)), []want{errW("cp1", "only 300 MiB", "at least 512 MiB")}},
		{"512 MiB agent", input(cp1w1(), mem("w1", 480<<10)), nil},
		{"tiny agent", input(cp1w1(), mem("w1", 256<<10)), []want{errW("w1", "only 256 MiB")}},
		{"unknown", input(cp1w1(), mem("w1", 0)), []want{warnW("w1", "memory size unknown")}},
	})
}

func TestDisk(t *testing.T) {
	disk := func(kib int64) func(string, *facts.Host) {
		return only("w1", func(f *facts.Host) { f.DiskFreeKiB = kib })
	}
	runCases(t, "Disk", []checkCase{
		{"plenty", input(cp1w1(), nil), nil},
		{"low", input(cp1w1(), disk(5<<20)), []want{warnW("w1", "only 5.0 GiB free", "/var/lib", "10 GiB").withFix("/var/lib/rancher")}},
		{"too low", input(cp1w1(), disk(1<<20)), []want{errW("w1", "only 1.0 GiB free", "at least 2 GiB")}},
		{"unknown", input(cp1w1(), only("w1", func(f *facts.Host) { f.DiskPath, f.DiskFreeKiB = "", 0 })), []want{warnW("w1", "unknown")}},
	})
}

func TestHostname(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent), host("w2", inventory.RoleAgent))
	runCases(t, "Hostname", []checkCase{
		{"distinct valid", input(c, nil), nil},
		{"invalid", input(c, only("w1", func(f *facts.Host) { f.Hostname = "Edge_Node" })), []want{
			warnW("w1", `hostname "Edge_Node" is not a valid DNS-1123 name`, `registers as "w1"`).withFix("hostnamectl set-hostname w1"),
		}},
		{"localhost", input(c, only("w2", func(f *facts.Host) { f.Hostname = "localhost" })), []want{warnW("w2", `"localhost"`)}},
		{"duplicates", input(c, func(n string, f *facts.Host) {
			if n != "w1" {
				f.Hostname = "debian"
			}
		}), []want{warnW("cp1, w2", `2 hosts share the hostname "debian"`, "node-name (cp1, w2)")}},
	})
}

func TestMachineID(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent), host("w2", inventory.RoleAgent))
	runCases(t, "MachineID", []checkCase{
		{"unique", input(c, nil), nil},
		{"missing ones are not compared", input(c, func(_ string, f *facts.Host) { f.MachineID = "" }), nil},
		{"cloned", input(c, func(n string, f *facts.Host) {
			if n != "cp1" {
				f.MachineID = "3d1219c7c4c5404aaa1f6d2a48adfda4"
			}
		}), []want{errW("w1, w2", "w1, w2 have the same /etc/machine-id 3d1219c7c4c5404aaa1f6d2a48adfda4", "cloned").withFix("systemd-machine-id-setup")}},
	})
}

func TestClockSkew(t *testing.T) {
	skew := func(d time.Duration) func(string, *facts.Host) {
		return only("w1", func(f *facts.Host) { f.ClockSkew = d })
	}
	runCases(t, "ClockSkew", []checkCase{
		{"in sync", input(cp1w1(), skew(1500*time.Millisecond)), nil},
		{"warning", input(cp1w1(), skew(-5*time.Second)), []want{warnW("w1", "5s behind").withFix("timedatectl set-ntp true")}},
		{"error", input(cp1w1(), skew(75*time.Second)), []want{errW("w1", "1m15s ahead of", "more than 60 s")}},
		{"unknown", input(cp1w1(), only("cp1", func(f *facts.Host) { f.RemoteClock = time.Time{} })), []want{warnW("cp1", "could not be read")}},
	})
}

func TestDefaultRoute(t *testing.T) {
	v6only := cp1w1()
	v6only.Spec.K3s.Config.ClusterCIDR = inventory.StringList{"2001:cafe:42::/56"}
	v6route := func(f *facts.Host) {
		f.DefaultRoute = nil
		f.DefaultRoute6 = &facts.Route{Interface: "eth0", Gateway: "fd00::1"}
	}
	runCases(t, "DefaultRoute", []checkCase{
		{"present", input(cp1w1(), nil), nil},
		{"none", input(cp1w1(), only("w1", func(f *facts.Host) { f.DefaultRoute = nil })), []want{
			errW("w1", "no IPv4 (/proc/net/route) default route", "airgap").withFix("ip route add default", "dummy interface"),
		}},
		{"only ipv6 on an ipv4 cluster", input(cp1w1(), only("w1", v6route)), []want{errW("w1", "no IPv4")}},
		{"ipv6-only cluster", input(v6only, func(_ string, f *facts.Host) { v6route(f) }), nil},
	})
}

func TestExistingInstall(t *testing.T) {
	installed := func(version, unit, active string) func(*facts.Host) {
		return func(f *facts.Host) {
			f.K3s.BinaryVersion, f.K3s.BinaryPath = version, "/usr/local/bin/k3s"
			f.K3s.Service, f.K3s.Services, f.K3s.ServiceActive, f.K3s.ServiceEnabled = unit, []string{unit}, active, "enabled"
		}
	}
	runCases(t, "ExistingInstall", []checkCase{
		{"fresh hosts", input(cp1w1(), nil), nil},
		{"same version re-run", input(cp1w1(), only("cp1", installed("v1.36.3+k3s1", "k3s", "active"))), []want{
			warnW("cp1", "already installed (binary v1.36.3+k3s1; k3s.service active, enabled)", "reconcile it", "v1.36.3+k3s1"),
		}},
		{"upgrade", input(cp1w1(), only("w1", installed("v1.35.1+k3s1", "k3s-agent", "active"))), []want{
			warnW("w1", "upgrade it from v1.35.1+k3s1 to v1.36.3+k3s1"),
		}},
		{"downgrade", input(cp1w1(), only("cp1", installed("v1.36.4+k3s1", "k3s", "active"))), []want{
			errW("cp1", "K3s v1.36.4+k3s1 is installed, newer than spec.k3s.version v1.36.3+k3s1", "downgrades").withFix("v1.36.4+k3s1 or newer", "k3s-uninstall.sh"),
		}},
		{"newer k3s build", input(cp1w1(), only("cp1", installed("v1.36.3+k3s2", "k3s", "active"))), []want{errW("cp1", "newer than spec.k3s.version")}},
		{"agent unit on a server", input(cp1w1(), only("cp1", installed("v1.36.3+k3s1", "k3s-agent", "active"))), []want{
			errW("cp1", "a server", "k3s-agent unit of a K3s agent").withFix("k3s-agent-uninstall.sh", "role"),
		}},
		{"server unit on an agent", input(cp1w1(), only("w1", installed("v1.36.3+k3s1", "k3s", "inactive"))), []want{
			errW("w1", "an agent", "k3s unit of a K3s server", "k3s.service inactive").withFix("k3s-uninstall.sh"),
		}},
		{"binary only", input(cp1w1(), only("w1", func(f *facts.Host) { f.K3s.BinaryVersion = "v1.36.3+k3s1" })), []want{warnW("w1", "binary v1.36.3+k3s1")}},
		{"re-run of k3strap", input(cp1w1(), only("cp1", func(f *facts.Host) {
			installed("v1.36.3+k3s1", "k3s", "active")(f)
			f.K3s.Files = map[string]string{facts.ManagedMarker: "abc"}
		})), nil},
	})
}

func TestCloudController(t *testing.T) {
	disabledCfg := func(c *inventory.Cluster) *inventory.Cluster {
		c.Spec.K3s.Config.DisableCloudController = inventory.Bool(true)
		return c
	}
	f1Agent := cp1w1()
	f1Agent.Spec.K3s.Config.DisableCloudController = inventory.Bool(true)
	f1Agent.Spec.Hosts[1].K3s.Config.KubeletArg = inventory.StringList{"cloud-provider=external"}
	extNoManifest := cp1w1()
	extNoManifest.Spec.K3s.CloudController = inventory.CloudControllerExternal
	ext := cp1w1()
	ext.Spec.K3s.CloudController = inventory.CloudControllerExternal
	ext.Spec.K3s.ExternalCloudController = &inventory.ExternalCloudController{Manifest: "ccm.yaml"}
	mode := cp1w1()
	mode.Spec.K3s.CloudController = inventory.CloudControllerDisabled
	noLB := disabledCfg(cp1w1())
	noLB.Spec.K3s.Config.Disable = inventory.StringList{"traefik,servicelb"}
	ha := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("cp3", inventory.RoleServer))
	ha.Spec.Hosts[2].K3s.Config.DisableCloudController = inventory.Bool(true)
	noNPC := cp1w1()
	noNPC.Spec.K3s.Config.DisableCloudController = inventory.Bool(true)
	noNPC.Spec.K3s.Config.DisableNetworkPolicy = inventory.Bool(true)
	noNPC.Spec.K3s.Config.KubeletArg = inventory.StringList{"cloud-provider=external"}

	runCases(t, "CloudController", []checkCase{
		{"embedded (default)", input(cp1w1(), nil), nil},
		{"external with manifest", input(ext, nil), nil},
		{"disabled alone", input(disabledCfg(cp1w1()), nil), []want{
			warnW("cp1", "disabled (cp1 by spec.k3s.config.disable-cloud-controller: true)", "no uninitialized taint", "ServiceLB does not run").withFix("cloudController: external"),
		}},
		{"disabled, servicelb disabled too", input(noLB, nil), []want{warnW("cp1", "providerID")}},
		{"cloudController: disabled", input(mode, nil), []want{warnW("cp1", "spec.k3s.cloudController: disabled")}},
		{"F1 on an agent", input(f1Agent, nil), []want{
			errW("w1", "kubelet-arg cloud-provider=external (spec.hosts[1].k3s.config.kubelet-arg)",
				"disabled (spec.k3s.config.disable-cloud-controller: true on the first server cp1)",
				"node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", "CoreDNS", "shuts K3s down").
				withFix("remove spec.k3s.config.disable-cloud-controller: true", "cloudController: external", "drop cloud-provider=external from spec.hosts[1].k3s.config.kubelet-arg"),
		}},
		{"external without manifest", input(extNoManifest, nil), []want{
			errW("cp1", "spec.k3s.cloudController: external, which adds it", "externalCloudController.manifest is empty").withFix("add spec.k3s.externalCloudController.manifest"),
			errW("w1", "externalCloudController.manifest is empty"),
		}},
		{"F1 without network policy controller", input(noNPC, nil), []want{
			errW("cp1", "CoreDNS"), errW("w1", "CoreDNS"),
		}},
		{"servers disagree", input(ha, nil), []want{
			errW("cp1, cp2, cp3", "disagree", "runs on cp1, cp2", "disabled on cp3 by spec.hosts[2].k3s.config.disable-cloud-controller: true").withFix("spec.k3s.config"),
		}},
	})
	for _, f := range checkByID(t, "CloudController").Run(input(noLB, nil)) {
		if strings.Contains(f.Message, "ServiceLB") {
			t.Errorf("servicelb is disabled, but the message mentions it: %s", f.Message)
		}
	}
	// the shutdown is only mentioned when the network policy controller runs.
	for _, f := range checkByID(t, "CloudController").Run(input(noNPC, nil)) {
		if strings.Contains(f.Message, "shuts K3s down") {
			t.Errorf("network policy disabled, but the message mentions the shutdown: %s", f.Message)
		}
	}
}

func TestFirstNodeTaints(t *testing.T) {
	taint := func(s string) inventory.Taint {
		tt, err := inventory.ParseTaint(s)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	single := func(taints ...string) *inventory.Cluster {
		c := newCluster(host("cp1", inventory.RoleServer))
		for _, s := range taints {
			c.Spec.Hosts[0].Taints = append(c.Spec.Hosts[0].Taints, taint(s))
		}
		return c
	}
	withAgent := single("dedicated=edge:NoExecute")
	withAgent.Spec.Hosts = append(withAgent.Spec.Hosts, host("w1", inventory.RoleAgent))
	taintedAgent := single("dedicated=edge:NoExecute")
	taintedAgent.Spec.Hosts = append(taintedAgent.Spec.Hosts, host("w1", inventory.RoleAgent))
	taintedAgent.Spec.Hosts[1].Taints = []inventory.Taint{taint("gpu=true:NoSchedule")}
	disabled := single("dedicated=edge:NoExecute")
	disabled.Spec.K3s.Config.Disable = inventory.StringList{"traefik", "metrics-server,local-storage"}
	viaConfig := single()
	viaConfig.Spec.K3s.Config.NodeTaint = inventory.StringList{"dedicated=edge:NoSchedule"}
	declared := &Input{Cluster: single("dedicated=edge:NoExecute"), Tolerations: map[string][]corev1.Toleration{}}
	for _, c := range Components() {
		declared.Tolerations[c.Name] = []corev1.Toleration{taint("dedicated=edge:NoExecute").Toleration()}
	}

	corednsOnly := &Input{Cluster: single("dedicated=edge:NoExecute"), Tolerations: map[string][]corev1.Toleration{
		"coredns": {taint("dedicated=edge:NoExecute").Toleration()},
	}}
	twoTaints := &Input{Cluster: single("a=1:NoExecute", "b:NoSchedule"), Tolerations: map[string][]corev1.Toleration{
		"coredns": {taint("a=1:NoExecute").Toleration()},
	}}

	runCases(t, "FirstNodeTaints", []checkCase{
		{"untainted", input(single(), nil), nil},
		{"CriticalAddonsOnly is tolerated", input(single("CriticalAddonsOnly=true:NoExecute"), nil), nil},
		{"control-plane NoSchedule is tolerated", input(single("node-role.kubernetes.io/control-plane:NoSchedule"), nil), nil},
		{"PreferNoSchedule does not block", input(single("dedicated=edge:PreferNoSchedule"), nil), nil},
		{"custom NoExecute on the only node", input(single("dedicated=edge:NoExecute"), nil), []want{
			errW("cp1", "the first server cp1 has taint(s) dedicated=edge:NoExecute", "it is the only node",
				"coredns, local-path-provisioner, metrics-server, traefik stay Pending",
				"coredns, local-path-provisioner, metrics-server, traefik tolerate only CriticalAddonsOnly",
				"only CriticalAddonsOnly, node-role.kubernetes.io/control-plane:NoSchedule, node.kubernetes.io/not-ready:NoExecute, node.kubernetes.io/unreachable:NoExecute, not dedicated=edge:NoExecute").
				withFix("add an agent", "CriticalAddonsOnly=true:NoExecute", "spec.k3s.config.disable"),
		}},
		{"an untainted agent takes them", input(withAgent, nil), nil},
		{"the agent is tainted too", input(taintedAgent, nil), []want{
			errW("cp1, w1", "no other node can take them (w1 has gpu=true:NoSchedule)", "coredns"),
		}},
		{"disable removes components", input(disabled, nil), []want{errW("cp1", "coredns stay Pending")}},
		{"taint from node-taint in the config", input(viaConfig, nil), []want{errW("cp1", "dedicated=edge:NoSchedule")}},
		{"tolerations declared", declared, nil},
		{"tolerations declared for one component", corednsOnly, []want{
			errW("cp1", ": local-path-provisioner, metrics-server, traefik stay Pending"),
		}},
		{"components grouped by what they miss", twoTaints, []want{
			errW("cp1", "taint(s) a=1:NoExecute, b:NoSchedule",
				"coredns tolerates only CriticalAddonsOnly, node-role.kubernetes.io/control-plane:NoSchedule, node.kubernetes.io/not-ready:NoExecute, node.kubernetes.io/unreachable:NoExecute, a=1:NoExecute, not b:NoSchedule",
				"; local-path-provisioner, metrics-server, traefik tolerate only", "not a=1:NoExecute, b:NoSchedule"),
		}},
	})
}

// TestFirstNodeTaintsCNI: the CNI's workloads are components too: the Calico
// operator's bootstrap install job does not tolerate a custom taint, the DaemonSets get
// k3strap's rendered tolerations, and a DaemonSet that must run everywhere is judged per node.
func TestFirstNodeTaintsCNI(t *testing.T) {
	taint := func(s string) inventory.Taint {
		tt, err := inventory.ParseTaint(s)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	edge := func(cni inventory.CNI) *inventory.Cluster {
		c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent))
		c.Spec.K3s.Config.Disable = inventory.StringList{"traefik", "metrics-server", "local-storage", "coredns"}
		c.Spec.Hosts[0].Taints = []inventory.Taint{taint("dedicated=edge:NoExecute")}
		c.Spec.Hosts[1].Taints = []inventory.Taint{taint("dedicated=edge:NoExecute"), taint("node-role.kubernetes.io/master:NoSchedule")}
		c.Spec.CNI = cni
		return c
	}
	local := edge(inventory.CNI{Type: inventory.CNICalico, Calico: &inventory.CalicoSpec{Manifest: "tigera-operator.yaml"}})
	chart := edge(inventory.CNI{Type: inventory.CNICalico, Calico: &inventory.CalicoSpec{Manifest: "tigera-operator.tgz"}})
	runCases(t, "FirstNodeTaints", []checkCase{
		{"calico by HelmChart: the install job stays Pending", input(edge(inventory.CNI{Type: inventory.CNICalico}), nil), []want{
			errW("cp1, w1", "helm-install-tigera-operator stay Pending", "not dedicated=edge:NoExecute"),
		}},
		{"calico chart archive is a HelmChart too", input(chart, nil), []want{errW("cp1, w1", "helm-install-tigera-operator")}},
		{"calico local manifest: operator, calico-node and kube-controllers tolerate", input(local, nil), nil},
		{"flannel-standalone tolerates every declared taint", input(edge(inventory.CNI{Type: inventory.CNIFlannelStandalone}), nil), nil},
	})

	// Per-node judgement of a DaemonSet that only has upstream flannel's tolerations (what
	// k3strap's rendering prevents): w1's NoExecute taint keeps it off w1, the master
	// NoSchedule one does not (upstream tolerates every NoSchedule).
	c := edge(inventory.CNI{Type: inventory.CNIFlannelStandalone})
	upstream := Component{Name: "kube-flannel-ds", Namespace: "kube-flannel", Kind: "DaemonSet", Source: "upstream",
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		EveryNode:   true, Deployed: func(*inventory.Cluster) bool { return true }}
	got := everyNodeFindings(input(c, nil), []Component{upstream})
	if len(got) != 2 || got[0].Host != "cp1" || got[1].Host != "w1" {
		t.Fatalf("findings %v, want one for cp1 and one for w1", got)
	}
	for _, f := range got {
		if f.Severity != finding.Error || !strings.Contains(f.Message, "not dedicated=edge:NoExecute") ||
			strings.Contains(f.Message, "master") || !strings.Contains(f.Message, "gets no pod network") {
			t.Errorf("finding %s", f)
		}
	}
	// A host excluded by kernelPolicy exclude is not judged.
	c.Spec.CNI.KernelPolicy = inventory.KernelPolicyExclude
	in := input(c, only("w1", func(f *facts.Host) { delete(f.Kernel.Config, "CONFIG_VXLAN") }))
	if got := everyNodeFindings(in, []Component{upstream}); len(got) != 1 || got[0].Host != "cp1" {
		t.Errorf("with w1 excluded: %v", got)
	}
}

// TestCalicoPorts: Calico's ports are checked only with Calico, per encapsulation.
func TestCalicoPorts(t *testing.T) {
	busy := func(proto string, port int) func(string, *facts.Host) {
		return only("w1", func(f *facts.Host) {
			f.Listening = append(f.Listening, facts.Port{Proto: proto, Port: port, Addr: "0.0.0.0"})
		})
	}
	calico := func(backend string) *inventory.Cluster {
		c := cp1w1()
		c.Spec.CNI = inventory.CNI{Type: inventory.CNICalico, Backend: backend}
		return c
	}
	runCases(t, "Port-4789", []checkCase{
		{"VXLAN needs 4789", input(calico("VXLAN"), busy("udp", 4789)), []want{errW("w1", "UDP port 4789 (Calico VXLAN) is already in use")}},
		{"IPIP does not", input(calico("IPIP"), busy("udp", 4789)), nil},
		{"flannel does not", input(cp1w1(), busy("udp", 4789)), nil},
	})
	runCases(t, "Port-179", []checkCase{
		{"IPIP needs BGP", input(calico("IPIP"), busy("tcp", 179)), []want{errW("w1", "TCP port 179 (Calico BGP)")}},
		{"default VXLANCrossSubnet has BGP off", input(calico(""), busy("tcp", 179)), nil},
	})
	runCases(t, "Port-5473", []checkCase{
		{"Typha", input(calico(""), busy("tcp", 5473)), []want{errW("w1", "Calico Typha")}},
	})
}
