// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// Taints and labels: pods Pending on a taint (F3), taints and labels lost since registration
// and drift from the inventory (F5).

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
