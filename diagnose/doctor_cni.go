// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// The pod network: subnet.env and PodCIDR, CNI pods and the kernel (F2), CNI DaemonSets and
// the role taints (F4).

// Role taints a CNI DaemonSet must tolerate (docs/failure-modes.md F4): the legacy master
// taint (older installers, kubeadm before 1.24) and the control-plane one.
var roleTaints = []string{k3s.TaintMaster, k3s.TaintControlPlane}

// subnetEnvMsg is the sandbox error of a pod on a node without flannel's subnet.env.
const subnetEnvMsg = "open /run/flannel/subnet.env"

// checkPodNetwork: flannel on, but a node has no pod network: subnet.env missing or
// unparsable, PodCIDR unset, or pods stuck creating their sandbox for want of subnet.env. It
// judges the present: a pod's sandbox event older than the node's current network (subnet.env's
// modification) or than the unit's last start is history, and while the same run read a valid
// subnet.env on the host no event contradicts it.
func checkPodNetwork(in *Input) []finding.Finding {
	if !in.flannelOn() {
		return nil
	}
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		var ev []finding.Evidence
		ne := in.evidenceOf(n.Name)
		var since time.Time // events before this are history
		networkOK := false
		if ne != nil && ne.Facts.SubnetEnvPresent != nil {
			src := hostSrc(ne, "/run/flannel/subnet.env")
			if !*ne.Facts.SubnetEnvPresent {
				ev = append(ev, finding.Evidence{Text: "/run/flannel/subnet.env does not exist", Source: src})
			} else if _, err := ParseSubnetEnv(ne.Facts.SubnetEnv); err != nil {
				ev = append(ev, finding.Evidence{Text: "subnet.env does not parse: " + err.Error(), Source: src})
			} else {
				networkOK = true
				since = ne.Facts.SubnetEnvWritten
			}
			if ne.Facts.StartedAt.After(since) {
				since = ne.Facts.StartedAt
			}
		}
		if n.Spec.PodCIDR == "" {
			ev = append(ev, finding.Evidence{Text: "spec.podCIDR is not set", Source: nodeSrc(n.Name)})
		}
		var stuck []string
		for _, p := range podsOn(in.View.Pods, n.Name) {
			if p.Spec.HostNetwork || running(p) || (networkOK && since.IsZero()) {
				continue
			}
			msgs := append([]string{podReason(p)}, in.podEventsSince(p.Namespace, p.Name, since)...)
			for _, m := range msgs {
				if strings.Contains(m, subnetEnvMsg) {
					stuck = append(stuck, p.Namespace+"/"+p.Name)
					ev = append(ev, finding.Evidence{Text: p.Namespace + "/" + p.Name + ": " + trimLine(m), Source: "kubectl get pods,events -A"})
					break
				}
			}
		}
		if len(ev) == 0 {
			continue
		}
		f := finding.Finding{ID: checkid.NoPodNetwork, Severity: finding.Error, Host: n.Name,
			Title: "no pod network on " + n.Name,
			Message: "K3s's flannel is on, but " + n.Name + " has no working pod network: pods on it cannot get an address " +
				"(ContainerCreating with `open /run/flannel/subnet.env: no such file or directory`).",
			Evidence: ev,
			Fixes: []string{
				"look at `journalctl -u k3s` (or k3s-agent) on the node for flannel errors; restart the unit once fixed",
				"with flannel-backend: none, install a CNI; otherwise check that kube-controller-manager allocates node CIDRs",
			}}
		if len(stuck) > 0 {
			f.Message += " Stuck: " + strings.Join(stuck, ", ") + "."
		}
		if n.Spec.PodCIDR == "" {
			if v, ok := k3s.ArgValue(in.nodeArgs(n.Name)["kube-controller-manager-arg"], "allocate-node-cidrs"); ok && v == "false" {
				f.Message += " No PodCIDR is assigned because kube-controller-manager runs with allocate-node-cidrs=false, so flannel never writes subnet.env."
				f.Fixes = append([]string{"remove kube-controller-manager-arg allocate-node-cidrs=false, or bring a CNI that assigns pod addresses itself"}, f.Fixes...)
			}
		}
		out = append(out, f)
	}
	return out
}

// isCNIDaemonSet reports whether ns/name is a pod network DaemonSet.
func (in *Input) isCNIDaemonSet(ns, name string) bool {
	if slices.Contains(in.CNIDaemonSets, ns+"/"+name) {
		return true
	}
	for _, w := range []string{"flannel", "calico-node", "cilium", "canal", "weave", "kube-router", "antrea-agent"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// kernelWords are what a CNI pod says when the kernel lacks what it needs (docs/failure-modes.md F2).
var kernelWords = []string{"module", "modprobe", "kernel", "vxlan", "ipip", "wireguard", "bpf", "iptables", "nf_", "xt_", "ip_set", "ipset", "netfilter", "operation not supported", "not supported"}

// checkCNIKernel: CNI pods not running on a node (docs/failure-modes.md F2): for kernel
// reasons (F2-cni-kernel) or others (cni-not-running).
func checkCNIKernel(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, p := range in.View.Pods {
		kind, name := owner(p)
		if kind != "DaemonSet" || !in.isCNIDaemonSet(p.Namespace, name) || running(p) || p.Spec.NodeName == "" {
			continue
		}
		reasons := append([]string{podReason(p)}, in.podEvents(p.Namespace, p.Name)...)
		all := strings.ToLower(strings.Join(reasons, " "))
		kernel := ""
		for _, w := range kernelWords {
			if strings.Contains(all, w) {
				kernel = w
				break
			}
		}
		var ev []finding.Evidence
		for _, r := range reasons {
			if r != "" {
				ev = append(ev, finding.Evidence{Text: p.Namespace + "/" + p.Name + ": " + trimLine(r), Source: "kubectl get pods,events -A"})
			}
		}
		f := finding.Finding{ID: checkid.CNINotRunning, Severity: finding.Error, Host: p.Spec.NodeName,
			Title:    fmt.Sprintf("the pod network (%s/%s) does not run on %s", p.Namespace, name, p.Spec.NodeName),
			Message:  fmt.Sprintf("Pod %s/%s of DaemonSet %s is %s on %s; pods there get no network.", p.Namespace, p.Name, name, p.Status.Phase, p.Spec.NodeName),
			Evidence: ev,
			Fixes:    []string{fmt.Sprintf("kubectl -n %s logs %s --all-containers; kubectl -n %s describe pod %s", p.Namespace, p.Name, p.Namespace, p.Name)}}
		if kernel != "" {
			f.ID = checkid.F2CNIKernel
			f.Message += " The reasons point at the kernel (" + kernel + "): it lacks a module or feature the CNI needs."
			f.Fixes = []string{
				"load or install the missing module (modprobe; a kernel with the feature), see docs/failure-modes.md F2",
				"or keep the host out of the CNI (k3strap: spec.cni.kernelPolicy: exclude), or pick a backend the kernel supports",
			}
		}
		out = append(out, f)
	}
	return out
}

// checkCNIToleration: a CNI DaemonSet that does not tolerate a master / control-plane taint
// present on some node (docs/failure-modes.md F4): that node gets no pod network.
func checkCNIToleration(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, ds := range in.View.DaemonSets {
		if !in.isCNIDaemonSet(ds.Namespace, ds.Name) {
			continue
		}
		tol := ds.Spec.Template.Spec.Tolerations
		for _, n := range in.View.Nodes {
			for _, t := range n.Spec.Taints {
				if !slices.Contains(roleTaints, t.Key) || t.Effect == corev1.TaintEffectPreferNoSchedule || tolerates(tol, t) {
					continue
				}
				var tols []string
				for _, x := range tol {
					tols = append(tols, tolerationString(x))
				}
				out = append(out, finding.Finding{ID: checkid.F4CNIToleration, Severity: finding.Error, Host: n.Name,
					Title: fmt.Sprintf("%s/%s does not tolerate %s on %s", ds.Namespace, ds.Name, taintString(t), n.Name),
					Message: fmt.Sprintf("Node %s carries %s, which DaemonSet %s/%s does not tolerate: it runs no pod there, so the node has no pod network "+
						"(flannel before v0.25.0 dropped the legacy master toleration, flannel-io/flannel#1925).", n.Name, taintString(t), ds.Namespace, ds.Name),
					Evidence: []finding.Evidence{
						{Text: "taint " + taintString(t), Source: nodeSrc(n.Name)},
						{Text: "tolerations: " + orNone(strings.Join(tols, ", ")), Source: "kubectl -n " + ds.Namespace + " get daemonset " + ds.Name},
						{Text: fmt.Sprintf("scheduled on %d of %d nodes", ds.Status.DesiredNumberScheduled, len(in.View.Nodes)), Source: "kubectl -n " + ds.Namespace + " get daemonset " + ds.Name},
					},
					Fixes: []string{
						fmt.Sprintf("add the toleration {key: %s, operator: Exists, effect: %s} to DaemonSet %s/%s (or upgrade the CNI)", t.Key, t.Effect, ds.Namespace, ds.Name),
						"or remove the taint from the node if nothing needs it",
					},
					Commands: []string{fmt.Sprintf(`kubectl -n %s patch daemonset %s --type=json -p '[{"op":"add","path":"/spec/template/spec/tolerations/-","value":{"key":"%s","operator":"Exists","effect":"%s"}}]'`,
						ds.Namespace, ds.Name, t.Key, t.Effect)}})
			}
		}
	}
	return out
}

func tolerationString(t corev1.Toleration) string {
	s := t.Key
	if t.Operator == corev1.TolerationOpExists {
		if s == "" {
			s = "*"
		}
		s += " Exists"
	} else {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}
