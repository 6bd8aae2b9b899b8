// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/cni"
)

// Component is a workload that k3strap or K3s deploys and that must find a node whose taints it
// tolerates (docs/failure-modes.md F3). Add rows to Components to teach FirstNodeTaints about more of them
// (CNI DaemonSets, Rancher's cattle-cluster-agent, ...).
type Component struct {
	// Name is how messages and Input.Tolerations refer to it.
	Name string
	// Namespace and Kind locate it in the cluster.
	Namespace, Kind string
	// Source says where Tolerations were read.
	Source string
	// Tolerations are the component's own tolerations, as deployed.
	Tolerations []corev1.Toleration
	// Rendered returns the tolerations k3strap renders into the component for cluster c (on
	// top of Tolerations); nil when it renders none.
	Rendered func(c *inventory.Cluster) []corev1.Toleration
	// EveryNode is true for a DaemonSet that must run on every node (the CNI): any node whose
	// blocking taints it does not tolerate is reported, not only the first server. Nodes that
	// kernelPolicy exclude keeps out of the CNI are skipped.
	EveryNode bool
	// Deployed reports whether the cluster deploys the component.
	Deployed func(c *inventory.Cluster) bool
}

// tolerations returns everything comp tolerates in cluster c: its own, the rendered ones and
// those the installer declares in extra.
func (comp Component) tolerations(c *inventory.Cluster, extra map[string][]corev1.Toleration) []corev1.Toleration {
	tol := append([]corev1.Toleration{}, comp.Tolerations...)
	if comp.Rendered != nil {
		tol = append(tol, comp.Rendered(c)...)
	}
	return append(tol, extra[comp.Name]...)
}

// k3sAddonTolerations are the tolerations of K3s's packaged add-ons since the master toleration
// was removed (k3s-io/k3s#12663, July 2025): CriticalAddonsOnly (any effect) and the
// control-plane NoSchedule taint, plus the not-ready / unreachable NoExecute tolerations
// (300 s) that the DefaultTolerationSeconds admission plugin adds to every pod. Seen on a real
// K3s v1.36.3 CoreDNS pod: fixtures/real-k3s-v1.36.3/coredns-describe-f1.txt.
func k3sAddonTolerations() []corev1.Toleration {
	secs := int64(300)
	return []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: k3s.TaintControlPlane, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
	}
}

// packagedAddon reports whether K3s deploys the add-on that `disable: [name]` removes.
func packagedAddon(disableName string) func(c *inventory.Cluster) bool {
	return func(c *inventory.Cluster) bool {
		fs := c.FirstServer()
		return fs != nil && !k3s.Disables(c.HostConfig(fs).Disable, disableName)
	}
}

// cniIs reports whether the cluster's pod network is t.
func cniIs(t inventory.CNIType) func(c *inventory.Cluster) bool {
	return func(c *inventory.Cluster) bool { return c.Spec.CNI.Type == t }
}

// calicoByHelmChart reports whether the tigera operator is deployed through K3s's
// helm-controller (by version, or a local chart archive), whose install job then has to be
// scheduled too; a local tigera-operator.yaml is applied directly.
func calicoByHelmChart(c *inventory.Cluster) bool {
	if c.Spec.CNI.Type != inventory.CNICalico {
		return false
	}
	n := c.Spec.CNI.Calico
	return n == nil || n.Manifest == "" || cni.IsChartArchive(n.Manifest)
}

// helmJobTolerations are the tolerations K3s's helm-controller gives a HelmChart's install job
// (k3s.HelmJobTolerations: bootstrap charts also tolerate the not-ready and uninitialized
// taints); a custom taint is never among them.
func helmJobTolerations(bootstrap bool) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range k3s.HelmJobTolerations(bootstrap) {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// Components returns the workloads FirstNodeTaints checks, in message order: K3s's packaged
// add-ons, then the CNI's workloads, then Rancher's.
func Components() []Component {
	return append(append(packagedComponents(), cniComponents()...), rancherComponents()...)
}

// cniComponents are the workloads of the pod networks k3strap deploys: their
// upstream tolerations plus what templates/cni renders.
func cniComponents() []Component {
	exists := corev1.TolerationOpExists
	return []Component{
		{
			Name: "helm-install-tigera-operator", Namespace: "kube-system", Kind: "Job",
			Source:      "K3s helm-controller install job of HelmChart tigera-operator (bootstrap)",
			Tolerations: helmJobTolerations(true), Deployed: calicoByHelmChart,
		},
		{
			Name: "tigera-operator", Namespace: "tigera-operator", Kind: "Deployment",
			Source:      "projectcalico tigera-operator manifest / chart values.tolerations",
			Tolerations: cni.OperatorDefaultTolerations(), Rendered: cni.DeclaredTolerations, Deployed: cniIs(inventory.CNICalico),
		},
		{
			Name: "calico-node", Namespace: "calico-system", Kind: "DaemonSet",
			Source:      "tigera operator defaults (docs/cni.md) + Installation.spec.calicoNodeDaemonSet",
			Tolerations: cni.CalicoDefaultTolerations(), Rendered: cni.CalicoNodeTolerations, EveryNode: true, Deployed: cniIs(inventory.CNICalico),
		},
		{
			Name: "calico-kube-controllers", Namespace: "calico-system", Kind: "Deployment",
			Source: "tigera operator defaults + Installation.spec.controlPlaneTolerations",
			Tolerations: []corev1.Toleration{
				{Key: "CriticalAddonsOnly", Operator: exists},
				{Key: k3s.TaintMaster, Operator: exists, Effect: corev1.TaintEffectNoSchedule},
				{Key: k3s.TaintControlPlane, Operator: exists, Effect: corev1.TaintEffectNoSchedule},
			},
			Rendered: cni.CalicoControlPlaneTolerations, Deployed: cniIs(inventory.CNICalico),
		},
		{
			Name: "kube-flannel-ds", Namespace: "kube-flannel", Kind: "DaemonSet",
			Source:      "flannel-io/flannel kube-flannel.yml (docs/cni.md, docs/failure-modes.md F4) + templates/cni",
			Tolerations: cni.FlannelDefaultTolerations(), Rendered: cni.FlannelTolerations, EveryNode: true, Deployed: cniIs(inventory.CNIFlannelStandalone),
		},
	}
}

// packagedComponents are K3s's packaged add-ons.
func packagedComponents() []Component {
	return []Component{
		{
			Name: "coredns", Namespace: "kube-system", Kind: "Deployment",
			// k3s-io/k3s manifests/coredns.yaml; real v1.36.3 pod: coredns-describe-f1.txt.
			Source:      "k3s-io/k3s manifests/coredns.yaml",
			Tolerations: k3sAddonTolerations(), Deployed: packagedAddon("coredns"),
		},
		{
			Name: "local-path-provisioner", Namespace: "kube-system", Kind: "Deployment",
			// k3s-io/k3s manifests/local-storage.yaml (disable name: local-storage).
			Source:      "k3s-io/k3s manifests/local-storage.yaml",
			Tolerations: k3sAddonTolerations(), Deployed: packagedAddon("local-storage"),
		},
		{
			Name: "metrics-server", Namespace: "kube-system", Kind: "Deployment",
			// k3s-io/k3s manifests/metrics-server/metrics-server-deployment.yaml.
			Source:      "k3s-io/k3s manifests/metrics-server/metrics-server-deployment.yaml",
			Tolerations: k3sAddonTolerations(), Deployed: packagedAddon("metrics-server"),
		},
		{
			Name: "traefik", Namespace: "kube-system", Kind: "Deployment",
			// k3s-io/k3s manifests/traefik.yaml: HelmChart valuesContent.tolerations.
			Source:      "k3s-io/k3s manifests/traefik.yaml",
			Tolerations: k3sAddonTolerations(), Deployed: packagedAddon("traefik"),
		},
	}
}

// blockingTaints returns h's NoSchedule / NoExecute taints as K3s will register them
// (inventory.Cluster.HostTaints).
func blockingTaints(c *inventory.Cluster, h *inventory.Host) []inventory.Taint {
	var out []inventory.Taint
	for _, t := range c.HostTaints(h) {
		if t.Blocks() {
			out = append(out, t)
		}
	}
	return out
}

func untolerated(taints []inventory.Taint, tol []corev1.Toleration) []string {
	var out []string
	for _, t := range taints {
		if !t.ToleratedBy(tol) {
			out = append(out, t.String())
		}
	}
	return out
}

func describeTolerations(tol []corev1.Toleration) string {
	var out []string
	for _, t := range tol {
		s := t.Key
		if t.Key == "" {
			s = "every taint"
		}
		if t.Operator == corev1.TolerationOpEqual || (t.Operator == "" && t.Value != "") {
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "no taints"
	}
	return strings.Join(out, ", ")
}

// checkFirstNodeTaints implements docs/failure-modes.md F3 for every component the plan deploys: a
// NoSchedule / NoExecute taint on the first server is an error when a deployed component
// tolerates it on no node: neither on the first server nor on any agent or other server (with
// their own taints); and a CNI DaemonSet that must run on every node is an error for each node
// whose taints it does not tolerate (F4). Tolerations k3strap renders and those the installer
// adds (Input.Tolerations) count.
func checkFirstNodeTaints(in *Input) []finding.Finding {
	return append(firstNodeFindings(in), everyNodeFindings(in, Components())...)
}

// everyNodeFindings reports, per node, the CNI DaemonSets that would stay Pending there and on
// which taints. Hosts excluded by kernelPolicy exclude are skipped: the DaemonSet is not meant
// to run there.
func everyNodeFindings(in *Input, comps []Component) []finding.Finding {
	c := in.Cluster
	skip := map[string]bool{}
	for _, e := range CNIExcludedHosts(in) {
		skip[e.Host] = true
	}
	var out []finding.Finding
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if skip[h.Name] {
			continue
		}
		taints := blockingTaints(c, h)
		for _, comp := range comps {
			if !comp.EveryNode || !comp.Deployed(c) {
				continue
			}
			tol := comp.tolerations(c, in.Tolerations)
			missing := untolerated(taints, tol)
			if len(missing) == 0 {
				continue
			}
			out = append(out, errorf(h.Name,
				fmt.Sprintf("let k3strap render %s's tolerations (it tolerates every taint declared in the inventory), or remove the taint from %s", comp.Name, h.Name),
				"%s (%s %s/%s, %s) tolerates only %s, not %s: its pod on %s stays Pending and %s gets no pod network",
				comp.Name, comp.Kind, comp.Namespace, comp.Name, comp.Source, describeTolerations(tol), strings.Join(missing, ", "), h.Name, h.Name))
		}
	}
	return out
}

func firstNodeFindings(in *Input) []finding.Finding {
	c := in.Cluster
	fs := c.FirstServer()
	if fs == nil {
		return nil
	}
	fsTaints := blockingTaints(c, fs)
	if len(fsTaints) == 0 {
		return nil
	}
	var stuck, stuckNames []string
	involved := []string{fs.Name}
	var otherDesc []string
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if h.Name == fs.Name {
			continue
		}
		ts := blockingTaints(c, h)
		var ss []string
		for _, t := range ts {
			ss = append(ss, t.String())
		}
		otherDesc = append(otherDesc, fmt.Sprintf("%s has %s", h.Name, orNone(ss)))
	}
	// Components with the same tolerations and the same untolerated taints share one clause.
	type group struct {
		names        []string
		tol, missing string
	}
	var groups []*group
	// caoTolerated: every stuck component tolerates CriticalAddonsOnly=true:NoExecute, so
	// that taint is a way out (a HelmChart's install Job tolerates none: k3s.HelmJobTolerations).
	criticalAddonsOnly := inventory.Taint{Key: k3s.TaintCriticalAddonsOnly, Value: "true", Effect: corev1.TaintEffectNoExecute}
	caoTolerated := true
	for _, comp := range Components() {
		if !comp.Deployed(c) || comp.EveryNode {
			continue
		}
		tol := comp.tolerations(c, in.Tolerations)
		missing := untolerated(fsTaints, tol)
		if len(missing) == 0 {
			continue
		}
		elsewhere := false
		for i := range c.Spec.Hosts {
			h := &c.Spec.Hosts[i]
			if h.Name != fs.Name && len(untolerated(blockingTaints(c, h), tol)) == 0 {
				elsewhere = true
				break
			}
		}
		if elsewhere {
			continue
		}
		stuckNames = append(stuckNames, comp.Name)
		if !criticalAddonsOnly.ToleratedBy(tol) {
			caoTolerated = false
		}
		g := &group{names: []string{comp.Name}, tol: describeTolerations(tol), missing: strings.Join(missing, ", ")}
		merged := false
		for _, o := range groups {
			if o.tol == g.tol && o.missing == g.missing {
				o.names = append(o.names, comp.Name)
				merged = true
				break
			}
		}
		if !merged {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		verb := "tolerates"
		if len(g.names) > 1 {
			verb = "tolerate"
		}
		if g.tol == describeTolerations(nil) {
			stuck = append(stuck, fmt.Sprintf("%s %s no taint, so not %s", strings.Join(g.names, ", "), verb, g.missing))
			continue
		}
		stuck = append(stuck, fmt.Sprintf("%s %s only %s, not %s", strings.Join(g.names, ", "), verb, g.tol, g.missing))
	}
	if len(stuck) == 0 {
		return nil
	}
	var fsDesc []string
	for _, t := range fsTaints {
		fsDesc = append(fsDesc, t.String())
	}
	others := "it is the only node"
	if len(otherDesc) > 0 {
		others = "no other node can take them (" + strings.Join(otherDesc, "; ") + ")"
		for i := range c.Spec.Hosts {
			if n := c.Spec.Hosts[i].Name; n != fs.Name {
				involved = append(involved, n)
			}
		}
	}
	cao := ""
	if caoTolerated {
		cao = "or taint the first server with CriticalAddonsOnly=true:NoExecute instead, which the packaged add-ons tolerate; "
	}
	return []finding.Finding{errorf(hostList(c, involved),
		fmt.Sprintf("add an agent (or a server) without these taints; %sor remove the taint from %s; or disable add-ons you do not need (spec.k3s.config.disable)", cao, fs.Name),
		"the first server %s has taint(s) %s and %s: %s stay Pending (%s)",
		fs.Name, strings.Join(fsDesc, ", "), others, strings.Join(stuckNames, ", "), strings.Join(stuck, "; "))}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no blocking taints"
	}
	return strings.Join(s, ", ")
}
