// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/cni"
)

// feature builds a facts.Feature from CONFIG_ names and module names.
func feature(name string, config []string, modules ...string) facts.Feature {
	for i, c := range config {
		if !strings.HasPrefix(c, "CONFIG_") {
			config[i] = "CONFIG_" + c
		}
	}
	return facts.Feature{Name: name, Config: config, Modules: modules}
}

func nsFeature(name, config, ns string) facts.Feature {
	return facts.Feature{Name: name, Config: []string{"CONFIG_" + config}, Namespace: ns}
}

// RequiredKernelFeatures returns what every K3s node's kernel needs (docs/k3s.md "Kernel
// requirements", from K3s's contrib/util/check-config.sh): namespaces, cgroups, veth, bridge,
// br_netfilter, iptables filter and nat, the xt matches addrtype / conntrack / comment /
// multiport / statistic, MASQUERADE, REJECT, POSIX message queues and seccomp. cgroupVersion
// picks the cgroup options: v1 needs the devices and freezer controllers, v2 does device
// control with eBPF (CONFIG_CGROUP_BPF) and has the freezer built in.
func RequiredKernelFeatures(cgroupVersion int) []facts.Feature {
	fs := []facts.Feature{
		feature("namespaces", []string{"NAMESPACES"}),
		nsFeature("network namespaces", "NET_NS", "net"),
		nsFeature("PID namespaces", "PID_NS", "pid"),
		nsFeature("IPC namespaces", "IPC_NS", "ipc"),
		nsFeature("UTS namespaces", "UTS_NS", "uts"),
		feature("cgroups", []string{"CGROUPS"}),
		feature("cgroup cpuacct", []string{"CGROUP_CPUACCT"}),
		feature("cgroup CPU scheduler", []string{"CGROUP_SCHED"}),
		feature("cpusets", []string{"CPUSETS"}),
		feature("memory cgroup", []string{"MEMCG"}),
	}
	if cgroupVersion == 2 {
		fs = append(fs, feature("cgroup BPF (device control on cgroup v2)", []string{"CGROUP_BPF"}))
	} else {
		fs = append(fs,
			feature("cgroup devices", []string{"CGROUP_DEVICE"}),
			feature("cgroup freezer", []string{"CGROUP_FREEZER"}))
	}
	return append(fs,
		feature("veth", []string{"VETH"}, "veth"),
		feature("bridge", []string{"BRIDGE"}, "bridge"),
		feature("br_netfilter", []string{"BRIDGE_NETFILTER"}, "br_netfilter"),
		feature("iptables filter", []string{"IP_NF_FILTER"}, "iptable_filter"),
		feature("iptables nat", []string{"IP_NF_NAT"}, "iptable_nat"),
		feature("nf_nat", []string{"NF_NAT"}, "nf_nat"),
		feature("xt_addrtype", []string{"NETFILTER_XT_MATCH_ADDRTYPE"}, "xt_addrtype"),
		feature("xt_conntrack", []string{"NETFILTER_XT_MATCH_CONNTRACK"}, "xt_conntrack"),
		feature("xt_comment", []string{"NETFILTER_XT_MATCH_COMMENT"}, "xt_comment"),
		feature("xt_multiport", []string{"NETFILTER_XT_MATCH_MULTIPORT"}, "xt_multiport"),
		feature("xt_statistic", []string{"NETFILTER_XT_MATCH_STATISTIC"}, "xt_statistic"),
		feature("MASQUERADE", []string{"IP_NF_TARGET_MASQUERADE", "NETFILTER_XT_TARGET_MASQUERADE"}, "ipt_MASQUERADE", "xt_MASQUERADE"),
		feature("REJECT", []string{"IP_NF_TARGET_REJECT"}, "ipt_REJECT"),
		feature("POSIX message queues", []string{"POSIX_MQUEUE"}),
		feature("seccomp", []string{"SECCOMP"}),
	)
}

// missingFeatures splits the absent features of fs into those the kernel's evidence proves
// absent and those it could not prove present (facts.Kernel.Conclusive).
func missingFeatures(k facts.Kernel, fs []facts.Feature) (absent, unproven []string) {
	for _, f := range fs {
		ok, where := k.Find(f)
		if ok {
			continue
		}
		line := fmt.Sprintf("%s (%s)", f.Name, where)
		if k.Conclusive(f) {
			absent = append(absent, line)
		} else {
			unproven = append(unproven, line)
		}
	}
	return absent, unproven
}

func kernelEvidenceFix(f *facts.Host) string {
	return fmt.Sprintf("make the kernel's configuration readable (CONFIG_IKCONFIG_PROC for /proc/config.gz, or install /boot/config-%s) so k3strap can verify it, or check it yourself with `k3s check-config`", f.KernelRelease)
}

// checkKernelConfig: the kernel options every K3s node needs, and kernel.keys.root_maxkeys.
func checkKernelConfig(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		var out []finding.Finding
		k := f.Kernel
		if !k.Readable() {
			out = append(out, warnf(h.Name, kernelEvidenceFix(f),
				"kernel %s: no kernel config and no module lists readable (/proc/config.gz, /boot/config-%s, /proc/modules, /sys/module, modules.builtin, modules.dep); the kernel features K3s needs are unverified", f.KernelRelease, f.KernelRelease))
		} else {
			absent, unproven := missingFeatures(k, RequiredKernelFeatures(f.Cgroup.Version))
			if len(absent) > 0 {
				out = append(out, errorf(h.Name,
					"use a kernel built with these options (=y, or =m with the module installed under /lib/modules), or load the modules with modprobe; `k3s check-config` lists the full set",
					"kernel %s lacks %d feature(s) K3s needs: %s", f.KernelRelease, len(absent), strings.Join(absent, "; ")))
			}
			if len(unproven) > 0 {
				out = append(out, warnf(h.Name, kernelEvidenceFix(f),
					"kernel %s: could not prove %d feature(s) K3s needs (no kernel config to read): %s", f.KernelRelease, len(unproven), strings.Join(unproven, "; ")))
			}
		}
		if n := f.KeysRootMaxKeys; n > 0 && n <= rootMaxKeysWanted {
			out = append(out, warnf(h.Name,
				"raise it: sysctl -w kernel.keys.root_maxkeys=1000000 and persist it in /etc/sysctl.d/90-k3s.conf",
				"kernel.keys.root_maxkeys is %d; K3s wants more than %d: every container takes a key, and container creation fails once root's keys run out", n, rootMaxKeysWanted))
		}
		return out
	})
}

// CNIRequirement is what one pod network choice needs from every node's kernel (docs/failure-modes.md F2).
// Add a row to CNIRequirements to teach CNIKernel a new CNI or backend.
type CNIRequirement struct {
	// CNI is the inventory's spec.cni.type (flannel = K3s's embedded flannel).
	CNI inventory.CNIType
	// Backend is the flannel backend or Calico encapsulation, matched case-insensitively; ""
	// matches any backend.
	Backend string
	// Features are the kernel features every node needs.
	Features []facts.Feature
	// MinKernel is the oldest kernel release (major.minor) the CNI supports; "" for any.
	MinKernel string
	// Fix says what to do when a node lacks them.
	Fix string
	// Source is where the requirement is documented.
	Source string
}

// calicoFeatures are the kernel features Calico needs whatever the encapsulation
// (docs/cni.md, docs.tigera.io "System requirements": ip_set, xt_set, xt_addrtype, xt_conntrack,
// xt_multiport, xt_mark, rpfilter), then the encapsulation's own.
func calicoFeatures(extra ...facts.Feature) []facts.Feature {
	return append([]facts.Feature{
		feature("ip_set", []string{"IP_SET"}, "ip_set"),
		feature("xt_set", []string{"NETFILTER_XT_SET"}, "xt_set"),
		feature("xt_addrtype", []string{"NETFILTER_XT_MATCH_ADDRTYPE"}, "xt_addrtype"),
		feature("xt_conntrack", []string{"NETFILTER_XT_MATCH_CONNTRACK"}, "xt_conntrack"),
		feature("xt_multiport", []string{"NETFILTER_XT_MATCH_MULTIPORT"}, "xt_multiport"),
		feature("xt_mark", []string{"NETFILTER_XT_MARK", "NETFILTER_XT_MATCH_MARK"}, "xt_mark"),
		feature("rpfilter", []string{"IP_NF_MATCH_RPFILTER"}, "ipt_rpfilter"),
	}, extra...)
}

// CNIRequirements returns the kernel requirement table, first matching row wins.
func CNIRequirements() []CNIRequirement {
	vxlan := feature("vxlan", []string{"VXLAN"}, "vxlan")
	wg := feature("wireguard", []string{"WIREGUARD"}, "wireguard")
	ipip := feature("ipip", []string{"NET_IPIP"}, "ipip")
	vxlanFix := "use a kernel with CONFIG_VXLAN (=y, or =m with the vxlan module installed), or choose flannel backend host-gw if all nodes share one L2 network"
	wgFix := "use a kernel with WireGuard (built in since Linux 5.6: CONFIG_WIREGUARD; older kernels: install the wireguard module), or choose flannel backend vxlan"
	const flannelSrc = "docs/failure-modes.md F2; flannel Documentation/backends.md"
	const calicoSrc = "docs/failure-modes.md F2, docs/cni.md; docs.tigera.io Calico system requirements"
	calicoFix := func(encap string) string {
		return "use a kernel >= 5.10 built with these options (=y, or =m with the modules installed under /lib/modules), or load them with modprobe" + encap +
			"; or set spec.cni.kernelPolicy: exclude to install such hosts without Calico (labelled " + cni.ExcludedLabel + "=true, no pod network from Calico)"
	}
	return []CNIRequirement{
		{CNI: inventory.CNIFlannel, Backend: "vxlan", Features: []facts.Feature{vxlan}, Fix: vxlanFix, Source: flannelSrc},
		{CNI: inventory.CNIFlannel, Backend: "wireguard-native", Features: []facts.Feature{wg}, Fix: wgFix, Source: flannelSrc},
		{CNI: inventory.CNIFlannel, Backend: "host-gw", Source: flannelSrc},
		{CNI: inventory.CNIFlannel, Backend: "none", Source: "K3s flannel-backend none: no embedded flannel"},
		{CNI: inventory.CNIFlannelStandalone, Backend: "vxlan", Features: []facts.Feature{vxlan}, Fix: vxlanFix, Source: flannelSrc},
		{CNI: inventory.CNIFlannelStandalone, Backend: "wireguard", Features: []facts.Feature{wg}, Fix: wgFix, Source: flannelSrc},
		{CNI: inventory.CNIFlannelStandalone, Backend: "wireguard-native", Features: []facts.Feature{wg}, Fix: wgFix, Source: flannelSrc},
		{CNI: inventory.CNIFlannelStandalone, Backend: "host-gw", Source: flannelSrc},
		{CNI: inventory.CNICalico, Backend: "VXLAN", Features: calicoFeatures(vxlan), MinKernel: "5.10", Fix: calicoFix(", or choose encapsulation None with BGP"), Source: calicoSrc},
		{CNI: inventory.CNICalico, Backend: "VXLANCrossSubnet", Features: calicoFeatures(vxlan), MinKernel: "5.10", Fix: calicoFix(""), Source: calicoSrc},
		{CNI: inventory.CNICalico, Backend: "IPIP", Features: calicoFeatures(ipip), MinKernel: "5.10", Fix: calicoFix(", or choose encapsulation VXLAN"), Source: calicoSrc},
		{CNI: inventory.CNICalico, Backend: "IPIPCrossSubnet", Features: calicoFeatures(ipip), MinKernel: "5.10", Fix: calicoFix(", or choose encapsulation VXLANCrossSubnet"), Source: calicoSrc},
		{CNI: inventory.CNICalico, Backend: "WireGuard", Features: calicoFeatures(vxlan, wg), MinKernel: "5.10", Fix: calicoFix(" (WireGuard is built in since Linux 5.6: CONFIG_WIREGUARD)"), Source: calicoSrc},
		{CNI: inventory.CNICalico, Backend: "None", Features: calicoFeatures(), MinKernel: "5.10", Fix: calicoFix(""), Source: calicoSrc},
		{CNI: inventory.CNINone, Source: "no pod network deployed by k3strap"},
	}
}

// cniChoice returns the pod network and backend the hosts will run: for K3s's embedded flannel
// the first server's effective flannel-backend (vxlan by default), for standalone flannel
// spec.cni.backend (vxlan by default), for Calico the encapsulation (VXLANCrossSubnet by
// default), else spec.cni.backend as written.
func cniChoice(c *inventory.Cluster) (inventory.CNIType, string) {
	switch t := c.Spec.CNI.Type; t {
	case "", inventory.CNIFlannel:
		if fs := c.FirstServer(); fs != nil {
			return inventory.CNIFlannel, c.HostConfig(fs).EffectiveFlannelBackend()
		}
		return inventory.CNIFlannel, inventory.DefaultFlannelBackend
	case inventory.CNIFlannelStandalone:
		if c.Spec.CNI.Backend == "" {
			return t, "vxlan"
		}
		return t, c.Spec.CNI.Backend
	case inventory.CNICalico:
		if enc, err := cni.CalicoEncapsulation(c.Spec.CNI.Backend); err == nil {
			return t, enc
		}
		return t, c.Spec.CNI.Backend
	default:
		return t, c.Spec.CNI.Backend
	}
}

func cniRequirement(t inventory.CNIType, backend string) (CNIRequirement, bool) {
	for _, r := range CNIRequirements() {
		if r.CNI == t && (r.Backend == "" || strings.EqualFold(r.Backend, backend)) {
			return r, true
		}
	}
	return CNIRequirement{}, false
}

func cniLabel(t inventory.CNIType, backend string) string {
	switch {
	case t == inventory.CNIFlannel:
		return "flannel backend " + backend
	case t == inventory.CNICalico:
		return "calico (encapsulation " + backend + ")"
	case backend == "":
		return string(t)
	}
	return fmt.Sprintf("%s (backend %s)", t, backend)
}

// kernelVersion parses the major.minor of a kernel release such as "6.1.0-28-amd64".
func kernelVersion(release string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(release, ".")
	if !found {
		return 0, 0, false
	}
	b := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		b = rest[:i]
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(a)
	minor, err2 = strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil && b != ""
}

// cniHostVerdict is what one host's kernel lacks for the chosen CNI.
type cniHostVerdict struct {
	host *inventory.Host
	f    *facts.Host
	// absent are features the evidence proves absent ("name (where it was looked for)"),
	// plus a too old kernel.
	absent []string
	// unproven are features the evidence could not prove present.
	unproven   []string
	unreadable bool
}

// cniVerdicts judges every host with facts against the CNI's kernel requirement.
func cniVerdicts(in *Input, req CNIRequirement) []cniHostVerdict {
	var out []cniHostVerdict
	for i := range in.Cluster.Spec.Hosts {
		h := &in.Cluster.Spec.Hosts[i]
		f := in.Facts[h.Name]
		if f == nil {
			continue
		}
		v := cniHostVerdict{host: h, f: f}
		if req.MinKernel != "" {
			wantMaj, wantMin, _ := kernelVersion(req.MinKernel + ".0")
			if maj, min, ok := kernelVersion(f.KernelRelease); ok && (maj < wantMaj || maj == wantMaj && min < wantMin) {
				v.absent = append(v.absent, fmt.Sprintf("kernel >= %s (uname -r says %s)", req.MinKernel, f.KernelRelease))
			}
		}
		if len(req.Features) > 0 {
			if !f.Kernel.Readable() {
				v.unreadable = true
			} else {
				absent, unproven := missingFeatures(f.Kernel, req.Features)
				v.absent = append(v.absent, absent...)
				v.unproven = unproven
			}
		}
		out = append(out, v)
	}
	return out
}

// ExcludedHost is a host that kernelPolicy exclude keeps out of the CNI (docs/failure-modes.md F2).
type ExcludedHost struct {
	// Host is the inventory host name.
	Host string
	// Missing are the features its kernel lacks, each with where it was looked for.
	Missing []string
}

// CNIExcludedHosts returns, in inventory order, the hosts whose kernel provably lacks what the
// chosen CNI needs when spec.cni.kernelPolicy is exclude and the CNI runs as a DaemonSet
// (calico, flannel-standalone): the installer labels their nodes k3strap.io/cni-excluded=true.
// Empty under strict, for K3s's embedded flannel and none, and for hosts without facts or whose
// kernel could not be read (those are not proven to lack anything).
func CNIExcludedHosts(in *Input) []ExcludedHost {
	c := in.Cluster
	t, backend := cniChoice(c)
	if c.Spec.CNI.KernelPolicy != inventory.KernelPolicyExclude || !cni.Excludable(t) {
		return nil
	}
	req, ok := cniRequirement(t, backend)
	if !ok {
		return nil
	}
	var out []ExcludedHost
	for _, v := range cniVerdicts(in, req) {
		if len(v.absent) > 0 {
			out = append(out, ExcludedHost{Host: v.host.Name, Missing: v.absent})
		}
	}
	return out
}

// checkCNIKernel: the kernel features the chosen pod network needs on every node (F2). Under
// kernelPolicy strict (default) a host that lacks them is an error naming the host, the
// missing features and where they were looked for; under exclude, with a CNI that runs as a
// DaemonSet, it is a warning that says the host is excluded, plus one summary warning listing
// every excluded host — unless no host is left to run the CNI, which is an error.
func checkCNIKernel(in *Input) []finding.Finding {
	c := in.Cluster
	t, backend := cniChoice(c)
	label := cniLabel(t, backend)
	req, ok := cniRequirement(t, backend)
	if !ok {
		var names []string
		for i := range c.Spec.Hosts {
			names = append(names, c.Spec.Hosts[i].Name)
		}
		return []finding.Finding{warnf(hostList(c, names),
			"check the nodes' kernels against the CNI's documentation yourself",
			"k3strap does not know the kernel requirements of %s; not checked", label)}
	}
	if len(req.Features) == 0 && req.MinKernel == "" {
		return nil
	}
	var names []string
	for _, f := range req.Features {
		names = append(names, f.Name)
	}
	if req.MinKernel != "" {
		names = append(names, "kernel >= "+req.MinKernel)
	}
	need := strings.Join(names, ", ")
	exclude := c.Spec.CNI.KernelPolicy == inventory.KernelPolicyExclude
	excludable := cni.Excludable(t)
	var out, excluded []finding.Finding
	var excludedNames []string
	verdicts := cniVerdicts(in, req)
	for _, v := range verdicts {
		h, f := v.host, v.f
		if v.unreadable {
			out = append(out, warnf(h.Name, kernelEvidenceFix(f),
				"%s needs %s; kernel %s has no readable config or module lists, so it is unverified", label, need, f.KernelRelease))
		}
		if len(v.absent) > 0 {
			switch {
			case exclude && excludable:
				excludedNames = append(excludedNames, h.Name)
				excluded = append(excluded, warnf(h.Name, req.Fix,
					"EXCLUDED from %s (kernelPolicy exclude): kernel %s lacks %s; k3strap installs K3s on %s but labels its node %s=true and the %s DaemonSet skips it, so pods there get no pod network from %s",
					label, f.KernelRelease, strings.Join(v.absent, "; "), h.Name, cni.ExcludedLabel, t, t))
			case exclude:
				out = append(out, errorf(h.Name,
					req.Fix+"; kernelPolicy exclude cannot help here: K3s's embedded flannel runs inside K3s on every node (exclude applies to calico and flannel-standalone)",
					"%s needs %s, which kernel %s lacks: %s", label, need, f.KernelRelease, strings.Join(v.absent, "; ")))
			default:
				fix := req.Fix
				if excludable && !strings.Contains(fix, "kernelPolicy") {
					fix += "; or set spec.cni.kernelPolicy: exclude to install such hosts without " + string(t)
				}
				out = append(out, errorf(h.Name, fix,
					"%s needs %s, which kernel %s lacks: %s", label, need, f.KernelRelease, strings.Join(v.absent, "; ")))
			}
		}
		if len(v.unproven) > 0 {
			out = append(out, warnf(h.Name, kernelEvidenceFix(f),
				"%s needs %s; could not prove it on kernel %s: %s", label, need, f.KernelRelease, strings.Join(v.unproven, "; ")))
		}
	}
	out = append(out, excluded...)
	if len(excludedNames) > 0 {
		if len(excludedNames) == len(c.Spec.Hosts) {
			out = append(out, errorf(hostList(c, excludedNames),
				"use kernels with the features listed above on at least the first server, or choose another CNI",
				"kernelPolicy exclude would exclude every host from %s: no node could run it and the cluster would have no pod network", label))
		} else {
			out = append(out, warnf(hostList(c, excludedNames),
				"give these hosts a kernel with the missing features and re-run `k3strap apply` (the label is then removed), or keep workloads that need the pod network off them",
				"%d host(s) EXCLUDED from %s by kernelPolicy exclude: %s — their nodes are labelled %s=true and get no %s pods",
				len(excludedNames), label, strings.Join(excludedNames, ", "), cni.ExcludedLabel, t))
		}
	}
	return out
}

// checkCgroups: the controllers K3s needs (docs/k3s.md#kernel-requirements: v2 cpu, cpuset, memory; v1 cpuset,
// memory), and cgroup v1 with Kubernetes >= 1.35, whose kubelet refuses to start on v1 unless
// kubelet-arg fail-cgroupv1=false (KEP-5573, kubernetes/kubernetes#134298).
func checkCgroups(in *Input) []finding.Finding {
	c := in.Cluster
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		cg := f.Cgroup
		var need []string
		switch cg.Version {
		case 2:
			need = []string{"cpu", "cpuset", "memory"}
		case 1:
			need = []string{"cpuset", "memory"}
		default:
			return []finding.Finding{errorf(h.Name, "mount the cgroup2 filesystem at /sys/fs/cgroup (systemd and OpenRC with rc_cgroup_mode=unified do this at boot)",
				"no cgroup filesystem found at /sys/fs/cgroup: K3s cannot run containers")}
		}
		var out []finding.Finding
		var missing []string
		for _, n := range need {
			if !slices.Contains(cg.Controllers, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			src := "/proc/cgroups (enabled=1)"
			if cg.Version == 2 {
				src = "/sys/fs/cgroup/cgroup.controllers"
			}
			out = append(out, errorf(h.Name,
				"enable the controllers on the kernel command line and reboot (Raspberry Pi OS: append cgroup_memory=1 cgroup_enable=memory to /boot/firmware/cmdline.txt)",
				"cgroup v%d without the %s controller(s) K3s needs; %s lists: %s", cg.Version, strings.Join(missing, ", "), src, strings.Join(cg.Controllers, " ")))
		}
		if cg.Version == 1 {
			if v, ok := inventory.ArgValue(c.HostConfig(h).KubeletArg, "fail-cgroupv1"); ok && v == "false" {
				return out
			}
			fix := "boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command line; OpenRC: rc_cgroup_mode=\"unified\" in /etc/rc.conf), or add kubelet-arg fail-cgroupv1=false to keep the deprecated v1"
			ver, known := k3s.ParseRelease(c.Spec.K3s.Version)
			switch {
			case known && ver.AtLeast(1, 35):
				out = append(out, errorf(h.Name, fix,
					"the host uses cgroup v1 and K3s %s (Kubernetes >= 1.35) starts a kubelet that refuses cgroup v1 by default (\"kubelet is configured to not run on a host using cgroup v1\")", c.Spec.K3s.Version))
			case known:
				out = append(out, warnf(h.Name, fix,
					"the host uses cgroup v1, which Kubernetes has deprecated; from K3s v1.35 on, the kubelet refuses to start on it by default"))
			default:
				out = append(out, warnf(h.Name, fix,
					"the host uses cgroup v1; K3s from channel %q is likely v1.35 or newer, whose kubelet refuses to start on cgroup v1 by default", c.Spec.K3s.Channel))
			}
		}
		return out
	})
}
