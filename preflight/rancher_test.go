// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// taintedFirst returns cp1 (tainted dedicated=edge:NoExecute plus the control-plane taint, which
// Rancher's agents tolerate by default) and an untainted agent w1, with the rancher section r.
func taintedFirst(r *inventory.Rancher) *inventory.Cluster {
	cp := host("cp1", inventory.RoleServer)
	cp.Taints = []inventory.Taint{
		{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoExecute},
		{Key: k3s.TaintControlPlane, Effect: corev1.TaintEffectNoSchedule},
	}
	c := newCluster(cp, host("w1", inventory.RoleAgent))
	c.Spec.Rancher = r
	return c
}

func importMode(version string, clusterTols, fleetTols []inventory.Toleration) *inventory.Rancher {
	return &inventory.Rancher{Register: &inventory.RancherRegister{ImportURL: "https://rancher.example.com/v3/import/abc_c-1.yaml",
		RancherVersion: version, ClusterAgentTolerations: clusterTols, FleetAgentTolerations: fleetTols}}
}

var edgeTol = []inventory.Toleration{{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoExecute"}}

func TestRancherAgentTolerations(t *testing.T) {
	untainted := newCluster(host("cp1", inventory.RoleServer))
	untainted.Spec.Rancher = importMode("", nil, nil)
	runCases(t, "RancherAgentTolerations", []checkCase{
		{"no tolerations declared", input(taintedFirst(importMode("v2.11.3", nil, nil)), nil), []want{
			errW("cp1", "custom taint(s) dedicated=edge:NoExecute", "clusterAgentDeploymentCustomization.appendTolerations", "fleetAgentDeploymentCustomization.appendTolerations", "Pending").
				withFix("{key: dedicated, operator: Equal, value: edge, effect: NoExecute}", "register.url"),
		}},
		{"fleet agent missing", input(taintedFirst(importMode("v2.11.3", edgeTol, nil)), nil), []want{
			errW("cp1", "fleetAgentDeploymentCustomization.appendTolerations for dedicated=edge:NoExecute"),
		}},
		{"both declared", input(taintedFirst(importMode("v2.11.3", edgeTol, []inventory.Toleration{{Key: "dedicated", Operator: "Exists"}})), nil), nil},
		{"API mode sets them itself", input(taintedFirst(&inventory.Rancher{Register: &inventory.RancherRegister{URL: "https://r.example.com", APITokenEnv: "T"}}), nil), nil},
		{"untainted first server", input(untainted, nil), nil},
		{"install mode", input(taintedFirst(&inventory.Rancher{Install: &inventory.RancherInstall{}}), nil), nil},
	})
}

func TestRancherVersion(t *testing.T) {
	runCases(t, "RancherVersion", []checkCase{
		{"old Rancher, tainted first node", input(taintedFirst(importMode("v2.10.3", edgeTol, edgeTol)), nil), []want{
			warnW("cp1", "Rancher v2.10.3 lacks the fix for rancher/rancher#49981", "dedicated=edge:NoExecute").withFix(RancherAgentTaintFixedIn),
		}},
		{"unknown version", input(taintedFirst(importMode("", edgeTol, edgeTol)), nil), []want{
			warnW("cp1", "Rancher version is unknown").withFix("spec.rancher.register.rancherVersion"),
		}},
		{"fixed Rancher", input(taintedFirst(importMode("v2.11.3", edgeTol, edgeTol)), nil), nil},
		{"install of an old Rancher", input(taintedFirst(&inventory.Rancher{Install: &inventory.RancherInstall{Version: "2.9.3"}}), nil), []want{
			warnW("cp1", "Rancher 2.9.3 lacks the fix").withFix("spec.rancher.install.version"),
		}},
		{"untainted", input(newCluster(host("cp1", inventory.RoleServer)), nil), nil},
	})
}

func TestRancherHasAgentTaintFix(t *testing.T) {
	for v, want := range map[string][2]bool{
		"v2.9.3": {false, true}, "v2.10.5": {false, true}, "v2.10.6": {true, true}, "2.11.1": {false, true},
		"v2.11.2-rc1": {false, true}, "v2.11.2": {true, true}, "v2.12.0": {true, true}, "v2.13.1": {true, true},
		"v3.0.0": {true, true}, "latest": {false, false}, "": {false, false},
	} {
		fixed, known := RancherHasAgentTaintFix(v)
		if fixed != want[0] || known != want[1] {
			t.Errorf("RancherHasAgentTaintFix(%q) = %v, %v; want %v, %v", v, fixed, known, want[0], want[1])
		}
	}
}

// TestFirstNodeTaintsRancher: a Rancher install on a cluster whose only node carries a custom
// taint cannot run its helm-install jobs nor its pods; rancher.install.tolerations fixes the
// pods, not the jobs (helm-controller gives them fixed tolerations).
func TestFirstNodeTaintsRancher(t *testing.T) {
	cp := host("cp1", inventory.RoleServer)
	cp.Taints = []inventory.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoExecute}}
	c := newCluster(cp)
	c.Spec.K3s.Config.Disable = inventory.StringList{"coredns", "local-storage", "metrics-server", "traefik"}
	c.Spec.Rancher = &inventory.Rancher{Install: &inventory.RancherInstall{}}
	got := checkByID(t, "FirstNodeTaints").Run(input(c, nil))
	if len(got) != 1 {
		t.Fatalf("findings %v", got)
	}
	for _, name := range []string{"helm-install-cert-manager", "cert-manager", "helm-install-rancher", "rancher"} {
		if !strings.Contains(got[0].Message, name) {
			t.Errorf("finding does not name %s: %s", name, got[0].Message)
		}
	}
	c.Spec.Rancher.Install.Tolerations = edgeTol
	got = checkByID(t, "FirstNodeTaints").Run(input(c, nil))
	if len(got) != 1 || strings.Contains(got[0].Message, "rancher tolerates") || !strings.Contains(got[0].Message, "helm-install-rancher") {
		t.Errorf("with tolerations: %v", got)
	}
	// CriticalAddonsOnly, which K3s's packaged add-ons tolerate, still stops a HelmChart's
	// install Job (it tolerates nothing: k3s.HelmJobTolerations, seen on the real K3s), and
	// the fix does not offer that taint as a way out.
	c.Spec.Hosts[0].Taints = []inventory.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute}}
	got = checkByID(t, "FirstNodeTaints").Run(input(c, nil))
	if len(got) != 1 || !strings.Contains(got[0].Message, "helm-install-cert-manager, helm-install-rancher tolerate no taint, so not CriticalAddonsOnly=true:NoExecute") ||
		strings.Contains(strings.Join(got[0].Fixes, " "), "CriticalAddonsOnly") {
		t.Errorf("CriticalAddonsOnly with a Rancher install: %+v", got)
	}
	// An untainted agent takes everything.
	c.Spec.Hosts = append(c.Spec.Hosts, host("w1", inventory.RoleAgent))
	if got := checkByID(t, "FirstNodeTaints").Run(input(c, nil)); len(got) != 0 {
		t.Errorf("with an untainted agent: %v", got)
	}
}
