// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func hostIndex(c *inventory.Cluster, h *inventory.Host) int {
	for i := range c.Spec.Hosts {
		if c.Spec.Hosts[i].Name == h.Name {
			return i
		}
	}
	return -1
}

// disabledBy names the inventory setting that disables the embedded cloud controller on server
// s.
func disabledBy(c *inventory.Cluster, s *inventory.Host) string {
	switch c.Spec.K3s.CloudController {
	case inventory.CloudControllerExternal:
		return setting(c, "spec.k3s.cloudController", "external")
	case inventory.CloudControllerDisabled:
		return setting(c, "spec.k3s.cloudController", "disabled")
	}
	if inventory.IsTrue(s.K3s.Config.DisableCloudController) {
		return setting(c, fmt.Sprintf("spec.hosts[%d].k3s.config.disable-cloud-controller", hostIndex(c, s)), "true")
	}
	if inventory.IsTrue(c.Spec.K3s.Config.DisableCloudController) {
		return setting(c, "spec.k3s.config.disable-cloud-controller", "true")
	}
	return "disable-cloud-controller: true"
}

// kubeletArgSource names where h's kubelet-arg cloud-provider=external comes from. Per-host
// kubelet-arg replaces the cluster-wide list (inventory.K3sConfig.Merge).
func kubeletArgSource(c *inventory.Cluster, h *inventory.Host) string {
	if h.K3s.Config.KubeletArg != nil {
		if _, ok := inventory.ArgValue(h.K3s.Config.KubeletArg, "cloud-provider"); ok {
			return setting(c, fmt.Sprintf("spec.hosts[%d].k3s.config.kubelet-arg", hostIndex(c, h)), "")
		}
	} else if _, ok := inventory.ArgValue(c.Spec.K3s.Config.KubeletArg, "cloud-provider"); ok {
		return setting(c, "spec.k3s.config.kubelet-arg", "")
	}
	if c.Spec.K3s.CloudController == inventory.CloudControllerExternal {
		return setting(c, "spec.k3s.cloudController", "external") + ", which adds it"
	}
	return "kubelet-arg"
}

// checkCloudController implements docs/failure-modes.md F1 (the rule: k3s.CloudSettings):
//   - error when a node's kubelet gets cloud-provider=external (inventory
//     Cluster.CloudSettings) while no cloud controller will run: the embedded
//     one is disabled (Cluster.EmbeddedCloudController) and no external one is declared
//     (cloudController external with a manifest). The node keeps the
//     node.cloudprovider.kubernetes.io/uninitialized taint forever;
//   - error when servers disagree about disable-cloud-controller;
//   - warning when the embedded controller is disabled and nothing replaces it, without the
//     F1 combination: no uninitialized taint then, but no node addresses from a cloud controller
//     and no ServiceLB (which runs inside K3s's cloud controller).
func checkCloudController(in *Input) []finding.Finding {
	c := in.Cluster
	var out []finding.Finding
	var on, off, offSrc []string
	for _, s := range c.Servers() {
		if c.EmbeddedCloudController(s) {
			on = append(on, s.Name)
		} else {
			off = append(off, s.Name)
			offSrc = append(offSrc, fmt.Sprintf("%s by %s", s.Name, disabledBy(c, s)))
		}
	}
	disagree := len(on) > 0 && len(off) > 0
	if disagree {
		out = append(out, errorf(hostList(c, append(append([]string{}, on...), off...)),
			"set disable-cloud-controller the same way for every server: in spec.k3s.config (cluster-wide) or through spec.k3s.cloudController, not per host",
			"servers disagree about disable-cloud-controller: the embedded cloud controller runs on %s but is disabled on %s; servers must agree, and nodes may or may not be initialised depending on which server leads",
			strings.Join(on, ", "), strings.Join(offSrc, ", ")))
	}

	external := c.ExternalCloudControllerDeclared()
	fs := c.FirstServer()
	npc := fs != nil && !inventory.IsTrue(c.HostConfig(fs).DisableNetworkPolicy)
	f1 := false
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if !c.CloudSettings(h).UninitializedTaintStays() {
			continue
		}
		f1 = true
		src := h
		if h.Role == inventory.RoleAgent && fs != nil {
			src = fs
		}
		by := disabledBy(c, src)
		if h.Role == inventory.RoleAgent && fs != nil {
			by += " on the first server " + fs.Name
		}
		argSrc := kubeletArgSource(c, h)
		consequence := "CoreDNS and every pod without a matching toleration stay Pending"
		if npc {
			consequence += ", and K3s's network policy controller waits for the taint and shuts K3s down after about 15 minutes, over and over under systemd"
		}
		noExternal := "no external cloud controller is declared"
		if c.Spec.K3s.CloudController == inventory.CloudControllerExternal {
			noExternal = "spec.k3s.externalCloudController.manifest is empty, so no external cloud controller is deployed"
		}
		out = append(out, errorf(h.Name, cloudFix(c, by, argSrc),
			"the kubelet gets kubelet-arg cloud-provider=external (%s), but K3s's embedded cloud controller is disabled (%s) and %s: the node registers with taint %s=true:NoSchedule and nothing ever removes it; %s (docs/failure-modes.md F1, k3s-io/k3s#11619)",
			argSrc, by, noExternal, k3s.TaintUninitialized, consequence))
	}

	if len(off) > 0 && !external && !f1 && !disagree {
		lb := ", and ServiceLB does not run (it runs inside K3s's cloud controller): Services of type LoadBalancer stay <pending>"
		if fs != nil && k3s.Disables(c.HostConfig(fs).Disable, k3s.ServiceLB) {
			lb = ""
		}
		out = append(out, warnf(hostList(c, off),
			"nothing to do if you run without a cloud provider on purpose; otherwise keep the embedded cloud controller (remove disable-cloud-controller) or declare spec.k3s.cloudController: external with spec.k3s.externalCloudController.manifest",
			"K3s's embedded cloud controller is disabled (%s) and no cloud controller replaces it: nodes get no uninitialized taint, but no cloud controller sets their addresses and providerID%s",
			strings.Join(offSrc, ", "), lb))
	}
	return out
}

func cloudFix(c *inventory.Cluster, by, argSrc string) string {
	keep := "keep K3s's embedded cloud controller (remove " + by + ")"
	switch c.Spec.K3s.CloudController {
	case inventory.CloudControllerDisabled:
		keep = "keep K3s's embedded cloud controller (set spec.k3s.cloudController: embedded or remove it)"
	case inventory.CloudControllerExternal:
		return "add spec.k3s.externalCloudController.manifest with your cloud controller's manifest (k3strap deploys it right after the first server starts), or set spec.k3s.cloudController: embedded"
	}
	return keep + "; or declare spec.k3s.cloudController: external with spec.k3s.externalCloudController.manifest; or drop cloud-provider=external from " + argSrc
}
