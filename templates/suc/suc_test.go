// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package suc

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPlans(t *testing.T) {
	out, err := Plans(Options{K3sVersion: "v1.36.4+k3s1", AgentConcurrency: 3,
		Tolerations: []Toleration{TolerationFor("dedicated", "edge", "NoExecute"), TolerationFor("gpu", "", "NoSchedule"), TolerationFor("dedicated", "edge", "NoExecute")}})
	if err != nil {
		t.Fatal(err)
	}
	var plans []plan
	for _, d := range strings.Split(string(out), "\n---\n")[1:] {
		var p plan
		if err := yaml.Unmarshal([]byte(d), &p); err != nil || p.Kind != "Plan" {
			t.Fatalf("not a Plan (%v):\n%s", err, d)
		}
		plans = append(plans, p)
	}
	if len(plans) != 2 {
		t.Fatalf("want 2 Plans, got %d:\n%s", len(plans), out)
	}
	server, agent := plans[0].Spec, plans[1].Spec
	if plans[0].Metadata.Name != ServerPlan || plans[1].Metadata.Name != AgentPlan || plans[0].Metadata.Namespace != Namespace {
		t.Errorf("names: %+v %+v", plans[0].Metadata, plans[1].Metadata)
	}
	if server.Concurrency != 1 || !server.Cordon || server.Drain != nil || server.Prepare != nil {
		t.Errorf("server Plan: %+v", server)
	}
	if agent.Concurrency != 3 || agent.Drain == nil || agent.Drain.Timeout != "10m0s" || agent.Prepare == nil ||
		strings.Join(agent.Prepare.Args, " ") != "prepare k3s-server" {
		t.Errorf("agent Plan: %+v", agent)
	}
	for _, sp := range []planSpec{server, agent} {
		if sp.Version != "v1.36.4+k3s1" || sp.ServiceAccountName != ServiceAccount || sp.Upgrade.Image != UpgradeImage {
			t.Errorf("Plan: %+v", sp)
		}
		n := 0
		for _, tl := range sp.Tolerations {
			if tl == (Toleration{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoExecute"}) || tl == (Toleration{Key: "gpu", Operator: "Exists", Effect: "NoSchedule"}) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("Plan should tolerate each declared taint once: %+v", sp.Tolerations)
		}
	}
	se, ae := server.NodeSelector.MatchExpressions, agent.NodeSelector.MatchExpressions
	if l := se[len(se)-1]; l.Key != "node-role.kubernetes.io/control-plane" || l.Operator != "Exists" {
		t.Errorf("server selector: %+v", se)
	}
	if l := ae[len(ae)-1]; l.Key != "node-role.kubernetes.io/control-plane" || l.Operator != "DoesNotExist" {
		t.Errorf("agent selector: %+v", ae)
	}
	if _, err := Plans(Options{}); err == nil {
		t.Error("Plans without a version should fail")
	}
}

func TestControllerManifests(t *testing.T) {
	s := string(ControllerManifests(Options{}))
	for _, want := range []string{"kind: CustomResourceDefinition", "name: plans.upgrade.cattle.io", "image: " + ControllerImage,
		"kind: ClusterRoleBinding", "name: system-upgrade-drainer", "kind: Namespace"} {
		if !strings.Contains(s, want) {
			t.Errorf("controller manifests lack %q", want)
		}
	}
	// As SUC's kustomization (namespace: system-upgrade) would: every namespaced object and
	// every ServiceAccount subject in the namespace; the API server refuses a
	// ClusterRoleBinding whose ServiceAccount subject names none.
	for _, doc := range strings.Split(s, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Subjects []struct {
				Kind      string `json:"kind"`
				Namespace string `json:"namespace"`
			} `json:"subjects"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("a document does not decode: %v\n%s", err, doc)
		}
		switch obj.Kind {
		case "Role", "RoleBinding", "ServiceAccount", "ConfigMap", "Deployment":
			if obj.Metadata.Namespace != Namespace {
				t.Errorf("%s %s in namespace %q, want %s", obj.Kind, obj.Metadata.Name, obj.Metadata.Namespace, Namespace)
			}
		}
		for _, sub := range obj.Subjects {
			if sub.Kind == "ServiceAccount" && sub.Namespace != Namespace {
				t.Errorf("%s %s: ServiceAccount subject in namespace %q, want %s", obj.Kind, obj.Metadata.Name, sub.Namespace, Namespace)
			}
		}
	}
	if n := strings.Count(s, "kind: RoleBinding") + strings.Count(s, "kind: ClusterRoleBinding"); n != 3 {
		t.Errorf("%d bindings, want SUC's 3", n)
	}
	if strings.Contains(s, "v0.14.0") {
		t.Error("controller image not pinned to " + Version)
	}
	s = string(ControllerManifests(Options{ControllerImage: "mirror.local/suc:v0.20.1", KubectlImage: "mirror.local/kubectl:v1.30.3"}))
	if !strings.Contains(s, "image: mirror.local/suc:v0.20.1") || !strings.Contains(s, `SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE: "mirror.local/kubectl:v1.30.3"`) {
		t.Error("airgap images not substituted")
	}
	s = string(ControllerManifests(Options{ControllerManifest: []byte("kind: Mine\n")}))
	if !strings.Contains(s, "kind: Mine") || strings.Contains(s, "kind: Deployment") || !strings.Contains(s, "CustomResourceDefinition") {
		t.Error("a manifest of the inventory should replace the embedded controller (CRD kept)")
	}
}
