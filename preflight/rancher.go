// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// Rancher checks (docs/failure-modes.md F3 and docs/rancher.md).

// RancherAgentTaintFixedIn names the Rancher releases with the fix for rancher/rancher#49981
// (cattle-cluster-agent Pending when the first all-role node of a K3s cluster has extra
// taints; backports #49983 for v2.11 and #49984 for v2.10, April 2025): v2.12.0 and later,
// v2.11.2+, v2.10.6+ — the first patch releases published after those backports closed.
const RancherAgentTaintFixedIn = "v2.12.0, v2.11.2 or v2.10.6"

// rancherAgentTaintFixes maps a Rancher minor (2.x) to the first patch release with the fix;
// minors above the highest listed have it, minors below the lowest never got it.
var rancherAgentTaintFixes = map[int]int{10: 6, 11: 2, 12: 0}

// RancherHasAgentTaintFix reports whether Rancher version v ("v2.11.3", "2.10.5-rc1") has the
// fix for rancher/rancher#49981; known is false when v does not parse.
func RancherHasAgentTaintFix(v string) (fixed, known bool) {
	core := strings.TrimPrefix(strings.TrimSpace(v), "v")
	core, _, _ = strings.Cut(core, "+")
	core, pre, _ := strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil {
			return false, false
		}
		n[i] = x
	}
	switch {
	case n[0] != 2:
		return n[0] > 2, true
	case n[1] > 12:
		return true, true
	}
	first, ok := rancherAgentTaintFixes[n[1]]
	if !ok {
		return false, true // 2.9 and older never got it
	}
	if n[2] == first && pre != "" {
		return false, true // a release candidate of the first fixed patch: not counted
	}
	return n[2] >= first, true
}

// checkRancherAgentTolerations implements F3 for register mode: when the first server carries
// custom NoSchedule / NoExecute taints, the cluster object in Rancher must carry matching
// clusterAgentDeploymentCustomization.appendTolerations and
// fleetAgentDeploymentCustomization.appendTolerations (Rancher ≥ 2.7.5, rancher/rancher#41035),
// or cattle-cluster-agent stays Pending and the cluster never connects. In API mode k3strap
// sets them itself; with an import URL the inventory declares what the cluster object carries.
func checkRancherAgentTolerations(in *Input) []finding.Finding {
	c := in.Cluster
	r := c.Spec.Rancher
	if r == nil || r.Register == nil || r.Register.APIMode() {
		return nil
	}
	custom := c.FirstServerCustomTaints()
	if len(custom) == 0 {
		return nil
	}
	fs := c.FirstServer()
	missC := inventory.Untolerated(custom, r.Register.ClusterAgentTolerations)
	missF := inventory.Untolerated(custom, r.Register.FleetAgentTolerations)
	if len(missC) == 0 && len(missF) == 0 {
		return nil
	}
	var parts []string
	if len(missC) > 0 {
		parts = append(parts, "clusterAgentDeploymentCustomization.appendTolerations for "+taintList(missC))
	}
	if len(missF) > 0 {
		parts = append(parts, "fleetAgentDeploymentCustomization.appendTolerations for "+taintList(missF))
	}
	need := missC
	for _, t := range missF {
		if !containsTaint(need, t) {
			need = append(need, t)
		}
	}
	return []finding.Finding{errorf(fs.Name,
		"in Rancher, edit the cluster (Cluster Configuration > Cluster Agent and Fleet Agent > Tolerations) and add "+tolerationYAML(need)+
			"; declare the same under spec.rancher.register.clusterAgentTolerations and fleetAgentTolerations; or give spec.rancher.register.url with an API token instead of importURL and k3strap sets them",
		"the first server %s has custom taint(s) %s, but the cluster object in Rancher lacks %s: cattle-cluster-agent and fleet-agent would stay Pending and the cluster never connect (docs/failure-modes.md F3, rancher/rancher#49981)",
		fs.Name, taintList(custom), strings.Join(parts, " and "))}
}

// checkRancherVersion warns, when the first server carries custom taints, about a Rancher
// release without the fix for rancher/rancher#49981 (install: rancher.install.version or its
// default; register with an import URL: rancher.register.rancherVersion, a warning when it is
// not declared; API mode asks Rancher during apply).
func checkRancherVersion(in *Input) []finding.Finding {
	c := in.Cluster
	r := c.Spec.Rancher
	if r == nil || (r.Install == nil && r.Register == nil) {
		return nil
	}
	custom := c.FirstServerCustomTaints()
	if len(custom) == 0 {
		return nil
	}
	fs := c.FirstServer()
	var v, field string
	switch {
	case r.Install != nil:
		v, field = r.Install.RancherVersion(), "spec.rancher.install.version"
	case r.Register.APIMode():
		return nil
	default:
		v, field = r.Register.RancherVersion, "spec.rancher.register.rancherVersion"
		if v == "" {
			return []finding.Finding{warnf(fs.Name, "declare the Rancher version in "+field+" (Rancher shows it at the bottom of its menu)",
				"the first server %s has custom taint(s) %s and the Rancher version is unknown: releases before %s leave cattle-cluster-agent Pending on a tainted first node (rancher/rancher#49981)",
				fs.Name, taintList(custom), RancherAgentTaintFixedIn)}
		}
	}
	fixed, known := RancherHasAgentTaintFix(v)
	if !known || fixed {
		return nil
	}
	return []finding.Finding{warnf(fs.Name, "use Rancher "+RancherAgentTaintFixedIn+" or newer ("+field+"), or keep the appendTolerations on the cluster object",
		"Rancher %s lacks the fix for rancher/rancher#49981 and the first server %s has custom taint(s) %s: cattle-cluster-agent stays Pending on a tainted first node unless the cluster object carries matching appendTolerations",
		v, fs.Name, taintList(custom))}
}

func taintList(ts []inventory.Taint) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

func containsTaint(ts []inventory.Taint, t inventory.Taint) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// tolerationYAML renders the tolerations for taints in the inventory's flow form.
func tolerationYAML(ts []inventory.Taint) string {
	var s []string
	for _, t := range ts {
		tol := inventory.TolerationFor(t)
		item := "{key: " + tol.Key + ", operator: " + tol.Operator
		if tol.Value != "" {
			item += ", value: " + tol.Value
		}
		s = append(s, item+", effect: "+tol.Effect+"}")
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func rancherInstalled(c *inventory.Cluster) bool {
	return c.Spec.Rancher != nil && c.Spec.Rancher.Install != nil
}

func certManagerInstalled(c *inventory.Cluster) bool {
	return rancherInstalled(c) && c.Spec.Rancher.Install.EffectiveTLSSource().NeedsCertManager()
}

// rancherInstallTolerations are the tolerations k3strap renders into the rancher and
// cert-manager chart values (rancher.install.tolerations).
func rancherInstallTolerations(c *inventory.Cluster) []corev1.Toleration {
	if !rancherInstalled(c) {
		return nil
	}
	return inventory.CoreTolerations(c.Spec.Rancher.Install.Tolerations)
}

// rancherComponents are the workloads of a Rancher install for FirstNodeTaints: the
// helm-controller's install jobs (they tolerate no custom taint), cert-manager's Deployments
// (no tolerations of their own) and Rancher's (cattle.io/os=linux only), each plus
// rancher.install.tolerations.
func rancherComponents() []Component {
	return []Component{
		{
			Name: "helm-install-cert-manager", Namespace: "kube-system", Kind: "Job",
			Source:      "K3s helm-controller install job of HelmChart cert-manager",
			Tolerations: helmJobTolerations(false), Deployed: certManagerInstalled,
		},
		{
			Name: "cert-manager", Namespace: "cert-manager", Kind: "Deployment",
			Source:   "jetstack cert-manager chart (values tolerations, webhook/cainjector/startupapicheck.tolerations: empty by default)",
			Rendered: rancherInstallTolerations, Deployed: certManagerInstalled,
		},
		{
			Name: "helm-install-rancher", Namespace: "kube-system", Kind: "Job",
			Source:      "K3s helm-controller install job of HelmChart rancher",
			Tolerations: helmJobTolerations(false), Deployed: rancherInstalled,
		},
		{
			Name: "rancher", Namespace: "cattle-system", Kind: "Deployment",
			Source: "rancher chart templates/deployment.yaml (cattle.io/os=linux:NoSchedule + values tolerations)",
			Tolerations: []corev1.Toleration{
				{Key: "cattle.io/os", Operator: corev1.TolerationOpEqual, Value: "linux", Effect: corev1.TaintEffectNoSchedule},
			},
			Rendered: rancherInstallTolerations, Deployed: rancherInstalled,
		},
	}
}
