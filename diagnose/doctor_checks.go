// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// Role taints a CNI DaemonSet must tolerate (docs/failure-modes.md F4): the legacy master
// taint (older installers, kubeadm before 1.24) and the control-plane one.
var roleTaints = []string{k3s.TaintMaster, k3s.TaintControlPlane}

// checkUnreachable: hosts doctor could not read.
func checkUnreachable(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, ne := range in.Nodes {
		if ne.Err == "" {
			continue
		}
		out = append(out, finding.Finding{ID: checkid.Unreachable, Severity: finding.Error, Host: nameOr(ne.Node, ne.Host),
			Title:    "doctor could not read this host",
			Message:  "Nothing was gathered from " + ne.Host + ": " + ne.Err,
			Evidence: []finding.Evidence{{Text: ne.Err, Source: ne.Host + ": ssh"}},
			Fixes:    []string{"check that the host is up and reachable over SSH with the same settings (user, key, bastion, sudo)"}})
	}
	return out
}

func nameOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// slowStart is how long a K3s unit may stay activating without a restart before doctor says so:
// an agent sends READY only once its network is up, which K3s users see take minutes
// (docs/k3s.md "Readiness of the unit").
const slowStart = 10 * time.Minute

// crashLooping reports whether systemd shows the unit failing, by the crash-loop rule the
// bring-up supervisor shares (k3s.CrashLoop): failed, or not active after repeated restarts (an
// exit waiting for its restart, SubState auto-restart, counts as one) — or stopped. A unit
// activating with no restart is starting (K3s has not sent READY yet), and one restart is
// systemd recovering from one exit, not failing (docs/k3s.md "Readiness of the unit").
func crashLooping(f *facts.DoctorNode) bool {
	if f.ActiveState == "active" {
		return false
	}
	n := f.Restarts
	if f.SubState == "auto-restart" {
		n++
	}
	return k3s.CrashLoop(f.ActiveState, n) || f.ActiveState != "activating"
}

// checkCrashLoop: a K3s unit that does not stay up (crash loop, failed start) or that
// restarted, with the fatal journal lines as evidence (ServiceFailing); a unit activating for
// longer than slowStart without a restart is a slow start.
func checkCrashLoop(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		f := ne.Facts
		if f == nil || f.Unit == "" {
			continue
		}
		name := nameOr(ne.Node, ne.Host)
		ev := Evidence{NodeName: name, Journal: f.Journal, ServiceState: f.ActiveState}
		// F1's shutdown is reported by checkF1 with its cause.
		if n, _ := ev.journalMatches(k3s.LineShutdownTaint); n > 0 {
			continue
		}
		state := finding.Evidence{Text: fmt.Sprintf("unit %s is %s/%s, systemd restarted it %s", f.Unit, f.ActiveState, f.SubState, plural(f.Restarts, "time", "times")),
			Source: hostSrc(ne, "systemctl show "+f.Unit)}
		switch {
		case crashLooping(f):
			d := ServiceFailing(ev, f.Unit)
			fd := fromDiagnosis(d, finding.Error, name, ne)
			fd.ID = checkid.CrashLoop
			if d.ID == "critical-config-mismatch" {
				fd.ID = d.ID
			}
			fd.Evidence = append(fd.Evidence, state)
			out = append(out, fd)
		case f.ActiveState == "activating" && f.Restarts == 0:
			if f.StartedAt.IsZero() || in.Now.Sub(f.StartedAt) < slowStart {
				continue
			}
			since := in.Now.Sub(f.StartedAt).Round(time.Second)
			fd := finding.Finding{ID: checkid.SlowStart, Severity: finding.Warning, Host: name,
				Title: fmt.Sprintf("%s has been starting for %s", f.Unit, since),
				Message: fmt.Sprintf("systemd still waits for %s to say it is ready, %s after it started, without a restart. K3s says so once its "+
					"network is up; that normally takes seconds to a few minutes.", f.Unit, since),
				Evidence: []finding.Evidence{state, {Text: "main process started " + f.StartedAt.UTC().Format(time.RFC3339), Source: hostSrc(ne, "systemctl show "+f.Unit)}},
				Fixes:    []string{"read `journalctl -u " + f.Unit + "` for what K3s waits for (the API server through its tunnel, the node's PodCIDR, flannel)"}}
			for _, l := range FatalLines(f.Journal) {
				fd.Evidence = append(fd.Evidence, finding.Evidence{Text: trimLine(l), Source: hostSrc(ne, "journalctl -u "+f.Unit)})
			}
			out = append(out, fd)
		case f.Restarts > 0:
			fatal := FatalLines(f.Journal)
			fd := finding.Finding{ID: checkid.ServiceRestarts, Severity: finding.Warning, Host: name,
				Title:   fmt.Sprintf("%s restarted %s", f.Unit, plural(f.Restarts, "time", "times")),
				Message: fmt.Sprintf("The %s service runs now but systemd restarted it %s.", f.Unit, plural(f.Restarts, "time", "times")),
				Evidence: []finding.Evidence{{Text: fmt.Sprintf("NRestarts=%d, active since %s", f.Restarts, f.ActiveSince.Format(time.RFC3339)),
					Source: hostSrc(ne, "systemctl show "+f.Unit)}},
				Fixes: []string{"read `journalctl -u " + f.Unit + "` around the restarts"}}
			if len(fatal) > 0 {
				fd.Message += " K3s last exited because: " + journalMessage(fatal[len(fatal)-1])
			}
			for _, l := range fatal {
				fd.Evidence = append(fd.Evidence, finding.Evidence{Text: trimLine(l), Source: hostSrc(ne, "journalctl -u "+f.Unit)})
			}
			out = append(out, fd)
		}
	}
	return out
}

// checkF1: the uninitialized taint present longer than the grace (docs/failure-modes.md F1),
// explained by UninitializedStall; with how long, the Pending pods and K3s's restarts.
func checkF1(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		t, ok := hasTaint(n, k3s.TaintUninitialized)
		if !ok {
			continue
		}
		age := in.Now.Sub(n.CreationTimestamp.Time)
		if t.TimeAdded != nil {
			age = in.Now.Sub(t.TimeAdded.Time)
		}
		ne := in.evidenceOf(n.Name)
		if age < in.TaintGrace {
			// Too young to judge: say it is there and since when, so the user knows what to
			// look at again (the embedded cloud controller removes it within seconds).
			since := n.CreationTimestamp.Time
			if t.TimeAdded != nil {
				since = t.TimeAdded.Time
			}
			out = append(out, finding.Finding{ID: checkid.UninitializedTaint, Severity: finding.Info, Host: n.Name,
				Title: fmt.Sprintf("%s still carries the uninitialized taint", n.Name),
				Message: fmt.Sprintf("%s has carried %s since %s (%s ago); a cloud controller removes it within seconds of registration. "+
					"It is judged after %s (--stall-grace): run doctor again after %s if it is still there.",
					n.Name, k3s.TaintUninitialized, since.UTC().Format(time.RFC3339), age.Round(time.Second), in.TaintGrace,
					since.Add(in.TaintGrace).UTC().Format(time.RFC3339)),
				Evidence: []finding.Evidence{{Text: fmt.Sprintf("taint %s=%s:%s", t.Key, t.Value, t.Effect), Source: nodeSrc(n.Name)}}})
			continue
		}
		ev := Evidence{NodeName: n.Name, Node: n, Pods: in.View.Pods, ExternalCloudController: in.ExternalCloudController, TaintAge: age}
		if ne != nil {
			ev.Journal, ev.ConfigArgs, ev.ServiceState = ne.Facts.Journal, configArgs(ne.Facts), ne.Facts.ActiveState
			ev.SubnetEnvPresent = ptrTrue(ne.Facts.SubnetEnvPresent)
		} else if srv := in.evidenceOf(in.ViewHostNode()); srv != nil {
			// An agent not reached: the server's journal still shows the embedded controller.
			ev.Journal = srv.Facts.Journal
		}
		d := UninitializedStall(ev)
		sev := finding.Error
		if d.ID == "manifest-deployer-stall" {
			sev = finding.Warning
		}
		f := fromDiagnosis(d, sev, n.Name, ne)
		if ne != nil {
			if WaitingForUntaintedNode(ne.Facts.Journal) {
				f.Evidence = append(f.Evidence, finding.Evidence{Text: "K3s waits for an untainted node (the embedded cloud controller's own wait)", Source: hostSrc(ne, "journalctl -u "+unitOf(ne))})
			}
			shutdowns, _ := ev.journalMatches(k3s.LineShutdownTaint)
			f.Evidence = append(f.Evidence, finding.Evidence{Text: fmt.Sprintf("systemd restarted %s %s; the journal shows %s on this taint", unitOf(ne),
				plural(ne.Facts.Restarts, "time", "times"), plural(shutdowns, "shutdown", "shutdowns")), Source: hostSrc(ne, "systemctl show "+unitOf(ne))})
		}
		f.Commands = []string{fmt.Sprintf("kubectl taint nodes %s %s-   # last resort, see the fixes", n.Name, k3s.TaintUninitialized)}
		out = append(out, f)
	}
	return out
}

// ViewHostNode is the node name of the host the cluster view came from.
func (in *Input) ViewHostNode() string {
	for _, ne := range in.Nodes {
		if ne.Host == in.ViewHost {
			return ne.Node
		}
	}
	return ""
}

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

// checkPendingOnTaint: Pending pods no node accepts because of its taints (docs/failure-modes.md
// F3), one finding per workload naming the taint and the node; cattle-cluster-agent with a
// Rancher before the fix of rancher/rancher#49981 gets F3-rancher-agent. Pods blocked only by
// the uninitialized taint are F1's.
func checkPendingOnTaint(in *Input) []finding.Finding {
	type blocked struct {
		pods  []string
		taint map[string][]string // node → untolerated taints
	}
	by := map[string]*blocked{}
	var order []string
	for _, p := range in.View.Pods {
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
			continue
		}
		nodes := map[string][]string{}
		onlyUninit := true
		for _, n := range in.View.Nodes {
			if n.Spec.Unschedulable {
				continue
			}
			for _, t := range n.Spec.Taints {
				if t.Effect == corev1.TaintEffectPreferNoSchedule || tolerates(p.Spec.Tolerations, t) {
					continue
				}
				nodes[n.Name] = append(nodes[n.Name], taintString(t))
				if t.Key != k3s.TaintUninitialized && t.Key != "node.kubernetes.io/not-ready" && t.Key != "node.kubernetes.io/unreachable" {
					onlyUninit = false
				}
			}
		}
		if len(nodes) == 0 || onlyUninit {
			continue
		}
		kind, name := owner(p)
		key := p.Namespace + "/" + kind + "/" + name
		b := by[key]
		if b == nil {
			b = &blocked{taint: nodes}
			by[key] = b
			order = append(order, key)
		}
		b.pods = append(b.pods, p.Name)
	}
	var out []finding.Finding
	for _, key := range order {
		b := by[key]
		parts := strings.SplitN(key, "/", 3)
		ns, kind, name := parts[0], parts[1], parts[2]
		nodes := slices.Sorted(maps.Keys(b.taint))
		var ev []finding.Evidence
		for _, n := range nodes {
			ev = append(ev, finding.Evidence{Text: fmt.Sprintf("node %s: untolerated %s", n, strings.Join(b.taint[n], ", ")), Source: nodeSrc(n)})
		}
		ev = append(ev, finding.Evidence{Text: fmt.Sprintf("Pending: %s", strings.Join(prefixAll(ns+"/", b.pods), ", ")), Source: "kubectl get pods -A"})
		for _, m := range in.podEvents(ns, b.pods[0]) {
			ev = append(ev, finding.Evidence{Text: trimLine(m), Source: "kubectl get events -n " + ns})
		}
		first := nodes[0]
		f := finding.Finding{ID: checkid.F3PendingOnTaint, Severity: finding.Error, Host: first,
			Title: fmt.Sprintf("%s %s/%s is Pending: no node tolerates its taints", kind, ns, name),
			Message: fmt.Sprintf("%s %s/%s cannot be scheduled: %s carries %s, which it does not tolerate.", kind, ns, name, first,
				strings.Join(b.taint[first], ", ")),
			Evidence: ev,
			Fixes: []string{
				fmt.Sprintf("add a toleration for %s to %s %s/%s (for a K3s add-on: a HelmChartConfig or the add-on's manifest)", strings.Join(b.taint[first], ", "), kind, ns, name),
				"or remove the taint from a node the workload may run on (`kubectl taint nodes NODE KEY-`)",
			}}
		if name == "cattle-cluster-agent" && ns == "cattle-system" {
			f.ID = checkid.F3RancherAgent
			f.Title = "cattle-cluster-agent is Pending on a taint: Rancher cannot manage the cluster"
			if in.RancherVersion != "" && in.RancherKnown && !in.RancherFixed {
				f.Message += fmt.Sprintf(" Rancher %s copies only its own taints into the agent's tolerations (rancher/rancher#49981, fixed in v2.12.0, v2.11.2 and v2.10.6).", in.RancherVersion)
				f.Fixes = append([]string{"upgrade Rancher to v2.12.0, v2.11.2 or v2.10.6 or later"}, f.Fixes...)
			}
		}
		out = append(out, f)
	}
	return out
}

func prefixAll(p string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = p + x
	}
	return out
}

// checkLostTaints: node-taint / node-label given at registration (the k3s.io/node-args
// annotation) no longer on the Node (docs/failure-modes.md F5: K3s applies them only when a node
// registers). Repairable: doctor --fix puts them back by read-modify-write.
func checkLostTaints(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		args := NodeArgs(n)
		if args == nil {
			continue
		}
		if _, declared := in.Intent[n.Name]; declared {
			continue // the inventory's comparison (checkIntent) covers it
		}
		var lost []corev1.Taint
		for _, s := range args["node-taint"] {
			t, ok := parseTaint(s)
			if !ok {
				continue
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect }) {
				lost = append(lost, t)
			}
		}
		if len(lost) > 0 {
			var ts, cmds []string
			for _, t := range lost {
				ts = append(ts, taintString(t))
				cmds = append(cmds, fmt.Sprintf("kubectl taint nodes %s %s --overwrite", n.Name, taintString(t)))
			}
			out = append(out, finding.Finding{ID: checkid.F5LostTaint, Severity: finding.Error, Host: n.Name,
				Title:   "taint given at registration is gone from " + n.Name + ": " + strings.Join(ts, ", "),
				Message: fmt.Sprintf("K3s registered %s with node-taint %s, but the Node no longer carries it; K3s never puts it back (it applies node-taint only at registration), so workloads that must stay off this node may now run on it.", n.Name, strings.Join(ts, ", ")),
				Evidence: []finding.Evidence{
					{Text: "k3s.io/node-args node-taint: " + strings.Join(args["node-taint"], ", "), Source: nodeSrc(n.Name) + " (annotation)"},
					{Text: "spec.taints: " + orNone(joinTaints(n.Spec.Taints)), Source: nodeSrc(n.Name)},
				},
				Fixes:    []string{"put the taint back: `k3strap doctor --fix` (read-modify-write) or the commands below", "with k3strap: `k3strap apply --reconcile-taints -f FILE`"},
				Commands: cmds,
				Repair:   &finding.Repair{Node: n.Name, Taints: ts}})
		}
		lostLabels := map[string]string{}
		for _, s := range args["node-label"] {
			k, v, ok := strings.Cut(strings.TrimSpace(s), "=")
			if !ok || k == "" {
				continue
			}
			if have, ok := n.Labels[k]; !ok || have != v {
				lostLabels[k] = v
			}
		}
		if len(lostLabels) > 0 {
			var ls, cmds []string
			for _, k := range slices.Sorted(maps.Keys(lostLabels)) {
				ls = append(ls, k+"="+lostLabels[k])
				cmds = append(cmds, fmt.Sprintf("kubectl label nodes %s %s=%s --overwrite", n.Name, k, lostLabels[k]))
			}
			out = append(out, finding.Finding{ID: checkid.F5LostLabel, Severity: finding.Warning, Host: n.Name,
				Title:    "label given at registration is gone from " + n.Name + ": " + strings.Join(ls, ", "),
				Message:  fmt.Sprintf("K3s registered %s with node-label %s, but the Node no longer has it (K3s applies node-label only at registration).", n.Name, strings.Join(ls, ", ")),
				Evidence: []finding.Evidence{{Text: "k3s.io/node-args node-label: " + strings.Join(args["node-label"], ", "), Source: nodeSrc(n.Name) + " (annotation)"}},
				Fixes:    []string{"put the label back: `k3strap doctor --fix` or the commands below"},
				Commands: cmds,
				Repair:   &finding.Repair{Node: n.Name, Labels: lostLabels}})
		}
	}
	return out
}

func joinTaints(ts []corev1.Taint) string { return strings.Join(taintStrings(ts), ", ") }

// taintStrings renders taints in K3s's node-taint form key[=value]:Effect.
func taintStrings(ts []corev1.Taint) []string {
	var s []string
	for _, t := range ts {
		s = append(s, taintString(t))
	}
	return s
}

// parseTaint reads K3s's node-taint form key[=value]:Effect (k3s.ParseTaint).
func parseTaint(s string) (corev1.Taint, bool) {
	k, v, eff, err := k3s.ParseTaint(s)
	if err != nil || k == "" {
		return corev1.Taint{}, false
	}
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(eff)}, true
}

// checkIntent: with an inventory, declared hosts without a node and declared taints/labels the
// node lacks (drift.Diff computed them; docs/failure-modes.md F5).
func checkIntent(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, name := range slices.Sorted(maps.Keys(in.Intent)) {
		it := in.Intent[name]
		if !it.Registered {
			out = append(out, finding.Finding{ID: checkid.NotRegistered, Severity: finding.Error, Host: name,
				Title:    "host " + name + " of the inventory is not a node of the cluster",
				Message:  "The inventory declares " + name + " but the cluster has no node of that name (not joined, or another node-name).",
				Evidence: []finding.Evidence{{Text: "no node " + name, Source: "kubectl get nodes"}},
				Fixes:    []string{"`k3strap apply -f FILE` joins it; or look at its K3s unit's journal"}})
			continue
		}
		if len(it.MissingTaints) == 0 && len(it.Labels) == 0 {
			continue
		}
		var ev []finding.Evidence
		var cmds []string
		for _, d := range it.Describe {
			ev = append(ev, finding.Evidence{Text: d, Source: "inventory vs " + nodeSrc(name)})
		}
		for _, t := range it.MissingTaints {
			cmds = append(cmds, fmt.Sprintf("kubectl taint nodes %s %s --overwrite", name, taintString(t)))
		}
		for _, k := range slices.Sorted(maps.Keys(it.Labels)) {
			cmds = append(cmds, fmt.Sprintf("kubectl label nodes %s %s=%s --overwrite", name, k, it.Labels[k]))
		}
		out = append(out, finding.Finding{ID: checkid.F5Drift, Severity: finding.Error, Host: name,
			Title:    "node " + name + " lacks taints or labels the inventory declares",
			Message:  "Declared taints or labels are missing from " + name + " (K3s applies node-taint and node-label only at registration): " + strings.Join(it.Describe, "; "),
			Evidence: ev,
			Fixes:    []string{"`k3strap doctor --fix -f FILE` or `k3strap apply --reconcile-taints -f FILE` (read-modify-write)"},
			Commands: cmds,
			Repair:   &finding.Repair{Node: name, Taints: taintStrings(it.MissingTaints), Labels: it.Labels}})
	}
	return out
}

// checkNotReady: nodes whose Ready condition is not True, with the conditions' reasons.
func checkNotReady(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, n := range in.View.Nodes {
		var ready *corev1.NodeCondition
		var ev []finding.Evidence
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = &n.Status.Conditions[i]
			}
			if c.Type == corev1.NodeReady || c.Status == corev1.ConditionTrue {
				ev = append(ev, finding.Evidence{Text: fmt.Sprintf("condition %s=%s %s: %s (since %s)", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339)), Source: nodeSrc(n.Name)})
			}
		}
		if ready != nil && ready.Status == corev1.ConditionTrue {
			continue
		}
		reason := "no Ready condition"
		if ready != nil {
			reason = fmt.Sprintf("Ready=%s (%s: %s)", ready.Status, ready.Reason, ready.Message)
		}
		out = append(out, finding.Finding{ID: checkid.NodeNotReady, Severity: finding.Error, Host: n.Name,
			Title:    "node " + n.Name + " is NotReady",
			Message:  "Node " + n.Name + " is not Ready: " + reason + ".",
			Evidence: ev,
			Fixes:    []string{"look at the node's K3s unit (`systemctl status k3s` or k3s-agent, `journalctl -u ...`) and its kubelet's conditions"}})
	}
	return out
}

// checkCerts: K3s certificates expiring within CertWarn (cert-expiring) or expired.
func checkCerts(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		if ne.Facts == nil {
			continue
		}
		var soon, gone []finding.Evidence
		first := time.Time{}
		for _, c := range ne.Facts.Certs {
			left := c.NotAfter.Sub(in.Now)
			line := finding.Evidence{Text: fmt.Sprintf("%s (CN %s) expires %s (%s)", c.Path, c.Subject, c.NotAfter.UTC().Format(time.RFC3339), humanDays(left)), Source: hostSrc(ne, c.Path)}
			switch {
			case left <= 0:
				gone = append(gone, line)
			case left < in.CertWarn:
				soon = append(soon, line)
			default:
				continue
			}
			if first.IsZero() || c.NotAfter.Before(first) {
				first = c.NotAfter
			}
		}
		name := nameOr(ne.Node, ne.Host)
		fixes := []string{
			"restart K3s on the node (`systemctl restart " + unitOf(ne) + "`): K3s renews certificates that expire within 120 days at start",
			"or `k3s certificate rotate` (servers) then restart; CA certificates need `k3s certificate rotate-ca`",
		}
		if len(gone) > 0 {
			out = append(out, finding.Finding{ID: checkid.CertExpired, Severity: finding.Error, Host: name,
				Title: fmt.Sprintf("%s on %s expired", plural(len(gone), "K3s certificate", "K3s certificates"), name), Message: "Expired certificates break the API, the kubelet or joins.",
				Evidence: append(gone, soon...), Fixes: fixes})
			continue
		}
		if len(soon) > 0 {
			out = append(out, finding.Finding{ID: checkid.CertExpiring, Severity: finding.Warning, Host: name,
				Title:    fmt.Sprintf("%s on %s expire within %d days", plural(len(soon), "K3s certificate", "K3s certificates"), name, int(in.CertWarn.Hours()/24)),
				Message:  fmt.Sprintf("The first expires %s (%s).", first.UTC().Format(time.RFC3339), humanDays(first.Sub(in.Now))),
				Evidence: soon, Fixes: fixes})
		}
	}
	return out
}

func humanDays(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("%d days ago", int(-d.Hours()/24))
	}
	if d < 48*time.Hour {
		return "in " + d.Round(time.Minute).String()
	}
	return fmt.Sprintf("in %d days", int(d.Hours()/24))
}

// checkVersionSkew: nodes on different K3s releases (kubelet version), or a binary newer than
// what its node runs (upgraded but not restarted).
func checkVersionSkew(in *Input) []finding.Finding {
	var out []finding.Finding
	versions := map[string][]string{}
	for _, n := range in.View.Nodes {
		v := n.Status.NodeInfo.KubeletVersion
		if v != "" {
			versions[v] = append(versions[v], n.Name)
		}
	}
	if len(versions) > 1 {
		var parts []string
		var ev []finding.Evidence
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			sort.Strings(versions[v])
			parts = append(parts, v+": "+strings.Join(versions[v], ", "))
			ev = append(ev, finding.Evidence{Text: v + " on " + strings.Join(versions[v], ", "), Source: "kubectl get nodes (status.nodeInfo.kubeletVersion)"})
		}
		// The odd ones out: the nodes not on the newest release.
		newest := slices.MaxFunc(slices.Collect(maps.Keys(versions)), compareRelease)
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			if v == newest {
				continue
			}
			for _, n := range versions[v] {
				out = append(out, finding.Finding{ID: checkid.VersionSkew, Severity: finding.Warning, Host: n,
					Title:    fmt.Sprintf("%s runs %s, other nodes %s", n, v, newest),
					Message:  "The cluster's nodes run different K3s releases (" + strings.Join(parts, "; ") + "). Agents may lag servers during an upgrade, never lead them; finish the upgrade.",
					Evidence: ev,
					Fixes:    []string{"upgrade the lagging nodes (`k3strap upgrade -f FILE`, or the install script with INSTALL_K3S_VERSION=" + newest + ")"}})
			}
		}
	}
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		n := in.node(ne.Node)
		if ne.Facts == nil || n == nil || ne.Facts.Version == "" {
			continue
		}
		if kv := n.Status.NodeInfo.KubeletVersion; kv != "" && kv != ne.Facts.Version {
			out = append(out, finding.Finding{ID: checkid.VersionSkew, Severity: finding.Warning, Host: n.Name,
				Title:   fmt.Sprintf("the K3s binary on %s is %s but the node runs %s", n.Name, ne.Facts.Version, kv),
				Message: "The binary was replaced but K3s was not restarted (or failed to start the new one).",
				Evidence: []finding.Evidence{{Text: ne.Facts.VersionLine, Source: hostSrc(ne, "k3s --version")},
					{Text: "kubeletVersion " + kv, Source: nodeSrc(n.Name)}},
				Fixes: []string{"restart K3s on the node: `systemctl restart " + unitOf(ne) + "`"}})
		}
	}
	return out
}

func compareRelease(a, b string) int {
	ra, oka := k3s.ParseRelease(a)
	rb, okb := k3s.ParseRelease(b)
	if !oka || !okb {
		return strings.Compare(a, b)
	}
	return ra.Compare(rb)
}

// checkEtcd: embedded etcd members (servers with the etcd role) NotReady or missing, and
// whether quorum is lost or one failure away.
func checkEtcd(in *Input) []finding.Finding {
	var members, down, cps []string
	for _, n := range in.View.Nodes {
		if _, ok := n.Labels[k3s.LabelControlPlane]; ok {
			cps = append(cps, n.Name)
		}
		if n.Labels[k3s.LabelEtcd] != "true" {
			continue
		}
		members = append(members, n.Name)
		if !nodeReady(n) {
			down = append(down, n.Name)
		}
	}
	if len(members) == 0 {
		return nil
	}
	var out []finding.Finding
	ev := []finding.Evidence{{Text: fmt.Sprintf("etcd members (servers with %s=true): %s; NotReady: %s", k3s.LabelEtcd, strings.Join(members, ", "), orNone(strings.Join(down, ", "))), Source: "kubectl get nodes"}}
	n, up := len(members), len(members)-len(down)
	quorum := n/2 + 1
	switch {
	case up < quorum:
		out = append(out, finding.Finding{ID: checkid.EtcdQuorum, Severity: finding.Error, Title: fmt.Sprintf("etcd has lost quorum: %d of %d members up, %d needed", up, n, quorum),
			Message: "With fewer than a majority of etcd members the datastore refuses writes: the cluster cannot change.", Evidence: ev,
			Fixes: []string{"bring the down servers back; if they are gone for good, restore from a snapshot (`k3s server --cluster-reset`) on one server"}})
	case n > 1 && up-1 < quorum:
		out = append(out, finding.Finding{ID: checkid.EtcdQuorum, Severity: finding.Warning, Title: fmt.Sprintf("etcd quorum at risk: %d of %d members up; one more failure loses it", up, n),
			Message: "etcd needs a majority of its members; an even member count (or a member down) leaves no margin.", Evidence: ev,
			Fixes: []string{"bring down members back, and run an odd number of servers (3 or 5)"}})
	}
	for _, cp := range cps {
		if !slices.Contains(members, cp) {
			out = append(out, finding.Finding{ID: checkid.EtcdMemberMissing, Severity: finding.Warning, Host: cp,
				Title:    "server " + cp + " is not an etcd member",
				Message:  "The cluster uses embedded etcd but server " + cp + " carries no etcd role: it did not join etcd (or uses another datastore).",
				Evidence: ev, Fixes: []string{"look at `journalctl -u k3s` on " + cp + " for etcd join errors"}})
		}
	}
	return out
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkClockSkew: hosts whose clock differs from the workstation's by more than ClockSkewMax.
func checkClockSkew(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, ne := range in.Nodes {
		if ne.Facts == nil || ne.Facts.RemoteClock.IsZero() {
			continue
		}
		s := ne.ClockSkew
		if s < 0 {
			s = -s
		}
		if s <= in.ClockSkewMax {
			continue
		}
		sev := finding.Warning
		if s > k3s.ClockSkewError {
			sev = finding.Error
		}
		name := nameOr(ne.Node, ne.Host)
		out = append(out, finding.Finding{ID: checkid.DoctorClockSkew, Severity: sev, Host: name,
			Title:    fmt.Sprintf("the clock of %s is off by %s", name, ne.ClockSkew.Round(time.Millisecond)),
			Message:  "Clock skew breaks TLS certificate validity, etcd and token checks.",
			Evidence: []finding.Evidence{{Text: fmt.Sprintf("host clock %s, skew %s against the workstation", ne.Facts.RemoteClock.UTC().Format(time.RFC3339Nano), ne.ClockSkew.Round(time.Millisecond)), Source: ne.Host + ": date"}},
			Fixes:    []string{"run time synchronisation on every node (systemd-timesyncd or chrony)"}})
	}
	return out
}

// checkDisk: the node reports DiskPressure, or the filesystem of /var/lib/rancher is nearly
// full (the kubelet evicts below 15 % free for imagefs by default).
func checkDisk(in *Input) []finding.Finding {
	var out []finding.Finding
	seen := map[string]bool{}
	for _, n := range in.View.Nodes {
		for _, c := range n.Status.Conditions {
			if (c.Type == corev1.NodeDiskPressure || c.Type == corev1.NodeMemoryPressure || c.Type == corev1.NodePIDPressure) && c.Status == corev1.ConditionTrue {
				id := checkid.DiskPressure
				if c.Type != corev1.NodeDiskPressure {
					id = strings.ToLower(strings.TrimSuffix(string(c.Type), "Pressure")) + "-pressure"
				}
				seen[n.Name+id] = true
				out = append(out, finding.Finding{ID: id, Severity: finding.Error, Host: n.Name,
					Title:    fmt.Sprintf("node %s reports %s", n.Name, c.Type),
					Message:  fmt.Sprintf("The kubelet reports %s (%s): it evicts pods and refuses new ones.", c.Type, c.Message),
					Evidence: []finding.Evidence{{Text: fmt.Sprintf("condition %s=True %s: %s", c.Type, c.Reason, c.Message), Source: nodeSrc(n.Name)}},
					Fixes:    []string{"free space or memory on the node (images: `k3s crictl rmi --prune`; logs; data)"}})
			}
		}
	}
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		f := ne.Facts
		name := nameOr(ne.Node, ne.Host)
		if f == nil || f.DiskPath == "" || seen[name+"disk-pressure"] || f.DiskUsedPercent < 80 {
			continue
		}
		sev := finding.Warning
		if f.DiskUsedPercent >= 85 {
			sev = finding.Error
		}
		out = append(out, finding.Finding{ID: checkid.DiskPressure, Severity: sev, Host: name,
			Title:    fmt.Sprintf("the disk of %s is %d%% full", name, f.DiskUsedPercent),
			Message:  fmt.Sprintf("%s has %d MiB free (%d%% used); the kubelet starts evicting pods when less than 15%% is free.", f.DiskPath, f.DiskFreeKiB/1024, f.DiskUsedPercent),
			Evidence: []finding.Evidence{{Text: fmt.Sprintf("df %s: %d KiB free of %d KiB (%d%% used)", f.DiskPath, f.DiskFreeKiB, f.DiskTotalKiB, f.DiskUsedPercent), Source: hostSrc(ne, "df -Pk "+k3s.DirDataRoot)}},
			Fixes:    []string{"free space on the node (unused images: `k3s crictl rmi --prune`; old logs) or grow the disk"}})
	}
	return out
}

// pulledImageRE finds the image a pull error names: the kubelet's `failed to pull image
// "REF"` / `Failed to pull image "REF"` and its ErrImagePull message `image "REF"`.
var pulledImageRE = regexp.MustCompile(`(?i)(?:pull(?:ing)? image|image) \\?"([^"\\]+)\\?"`)

// checkImagePull: pods on a node that cannot start because their images (or the sandbox's
// pause image) cannot be pulled — on an airgap site, usually the images archive was never put in
// /var/lib/rancher/k3s/agent/images/ (docs/k3s.md "Airgap"). It judges the present: a pod that
// runs is fine, and only events after the node's unit last started count.
func checkImagePull(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		var since time.Time
		if ne := in.evidenceOf(n.Name); ne != nil && ne.Facts != nil {
			since = ne.Facts.StartedAt
		}
		images := map[string]bool{}
		var stuck []string
		var ev []finding.Evidence
		for _, p := range podsOn(in.View.Pods, n.Name) {
			if running(p) {
				continue
			}
			msgs := append([]string{podReason(p)}, in.podEventsSince(p.Namespace, p.Name, since)...)
			hit := ""
			for _, m := range msgs {
				if !imagePullRE.MatchString(m) {
					continue
				}
				hit = m
				for _, g := range pulledImageRE.FindAllStringSubmatch(m, -1) {
					ref := strings.TrimPrefix(strings.TrimPrefix(g[1], "docker.io/"), "library/")
					images[ref] = true
				}
			}
			if hit != "" {
				stuck = append(stuck, p.Namespace+"/"+p.Name)
				ev = append(ev, finding.Evidence{Text: p.Namespace + "/" + p.Name + ": " + trimLine(hit), Source: "kubectl get pods,events -A"})
			}
		}
		if len(stuck) == 0 {
			continue
		}
		refs := slices.Sorted(maps.Keys(images))
		f := finding.Finding{ID: checkid.ImagePull, Severity: finding.Error, Host: n.Name,
			Title: fmt.Sprintf("pods on %s cannot pull their images", n.Name),
			Message: fmt.Sprintf("%s: the container runtime on %s cannot pull %s, so these pods never start: %s.",
				plural(len(stuck), "pod waits", "pods wait"), n.Name, orList(refs, "their images"), strings.Join(stuck, ", ")),
			Evidence: ev,
			Fixes: []string{
				"on an airgap host: put the release's k3s-airgap-images-<arch>.tar.zst in " + k3s.DirImages + "/ (spec.k3s.airgap.<arch>.images) and restart K3s there",
				"otherwise: let the node reach the registry, or configure a mirror (spec.registries, /etc/rancher/k3s/registries.yaml)",
			}}
		out = append(out, f)
	}
	return out
}

// orList joins items with ", ", or says def when there are none.
func orList(items []string, def string) string {
	if len(items) == 0 {
		return def
	}
	return strings.Join(items, ", ")
}
