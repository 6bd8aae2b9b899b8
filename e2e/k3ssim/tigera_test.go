// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// operatorStandIn is a stand-in for tigera-operator.yaml: the simulated operator only needs
// its Deployment to run.
const operatorStandIn = `apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: tigera-operator
  namespace: tigera-operator
spec:
  replicas: 1
  selector:
    matchLabels: {name: tigera-operator}
  template:
    metadata:
      labels: {name: tigera-operator}
    spec:
      hostNetwork: true
      tolerations:
      - {effect: NoExecute, operator: Exists}
      - {effect: NoSchedule, operator: Exists}
      containers:
      - name: tigera-operator
        image: quay.io/tigera/operator
`

func installationYAML(tolerations, affinity string) string {
	return "apiVersion: operator.tigera.io/v1\nkind: Installation\nmetadata:\n  name: default\nspec:\n  calicoNetwork:\n    ipPools:\n    - {cidr: 10.42.0.0/16, encapsulation: VXLAN}\n" +
		"  calicoNodeDaemonSet:\n    spec:\n      template:\n        spec:\n" + tolerations + affinity
}

// TestTigeraOperator: the simulated operator turns the Installation into calico-node whose
// tolerations REPLACE Calico's defaults and whose affinity can skip excluded nodes; the
// conflictOnNextReplace knob writes the node (visible annotation) before the PUT conflicts.
func TestTigeraOperator(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml":                        "flannel-backend: none\ndisable-network-policy: true\nnode-taint: [dedicated=edge:NoExecute]\ndisable: [traefik, servicelb, metrics-server, local-storage, coredns]\n",
		"/etc/k3ssim/sim.yaml":                                "timeScale: 0.05\ndeploymentDelay: 1s\n",
		"/var/lib/rancher/k3s/server/manifests/operator.yaml": operatorStandIn,
		// Only CriticalAddonsOnly: the defaults are replaced, so the NoExecute taint is not tolerated.
		"/var/lib/rancher/k3s/server/manifests/installation.yaml": installationYAML("          tolerations:\n          - {key: CriticalAddonsOnly, operator: Exists}\n", ""),
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	s.waitReadyz(10 * time.Second)
	cs := s.clientset()
	ctx := context.Background()
	describe := func() string { out, _, _ := s.kubectl("", "get", "pods,daemonsets,deployments", "-A"); return out }
	eventually(t, 15*time.Second, "calico-node and calico-kube-controllers exist", func() bool {
		_, err1 := cs.AppsV1().DaemonSets("calico-system").Get(ctx, "calico-node", metav1.GetOptions{})
		_, err2 := cs.AppsV1().Deployments("calico-system").Get(ctx, "calico-kube-controllers", metav1.GetOptions{})
		return err1 == nil && err2 == nil
	}, describe)
	time.Sleep(500 * time.Millisecond)
	ds, _ := cs.AppsV1().DaemonSets("calico-system").Get(ctx, "calico-node", metav1.GetOptions{})
	if ds.Status.DesiredNumberScheduled != 0 || len(ds.Spec.Template.Spec.Tolerations) != 1 {
		t.Fatalf("replaced tolerations: desired %d, tolerations %+v", ds.Status.DesiredNumberScheduled, ds.Spec.Template.Spec.Tolerations)
	}
	if !ds.Spec.Template.Spec.HostNetwork || ds.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("calico-node template %+v", ds.Spec.Template.Spec)
	}

	// Tolerate the taint, but exclude nodes labelled k3strap.io/cni-excluded=true.
	inst := filepath.Join(t.TempDir(), "inst.yaml")
	writeFile(t, inst, installationYAML("          tolerations:\n          - {key: dedicated, operator: Equal, value: edge, effect: NoExecute}\n",
		"          affinity:\n            nodeAffinity:\n              requiredDuringSchedulingIgnoredDuringExecution:\n                nodeSelectorTerms:\n                - matchExpressions:\n                  - {key: k3strap.io/cni-excluded, operator: NotIn, values: [\"true\"]}\n"))
	if _, e, c := s.kubectl("", "apply", "-f", inst); c != 0 {
		t.Fatal(e)
	}
	eventually(t, 10*time.Second, "calico-node runs on vm and TigeraStatus calico is Available", func() bool {
		ds, err := cs.AppsV1().DaemonSets("calico-system").Get(ctx, "calico-node", metav1.GetOptions{})
		out, _, _ := s.kubectl("", "get", "tigerastatus", "calico", "-o", "json")
		var ts struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		_ = json.Unmarshal([]byte(out), &ts)
		avail := false
		for _, c := range ts.Status.Conditions {
			avail = avail || c.Type == "Available" && c.Status == "True"
		}
		return err == nil && ds.Status.NumberAvailable == 1 && avail
	}, func() string {
		out, _, _ := s.kubectl("", "get", "tigerastatus", "calico", "-o", "json")
		return describe() + out
	})
	if _, e, c := s.kubectl("", "label", "nodes", "vm", "k3strap.io/cni-excluded=true"); c != 0 {
		t.Fatal(e)
	}
	eventually(t, 10*time.Second, "calico-node leaves the excluded node", func() bool {
		ds, err := cs.AppsV1().DaemonSets("calico-system").Get(ctx, "calico-node", metav1.GetOptions{})
		pods, _ := cs.CoreV1().Pods("calico-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=calico-node"})
		return err == nil && ds.Status.DesiredNumberScheduled == 0 && len(pods.Items) == 0
	}, describe)

	// conflictOnNextReplace: the concurrent write is visible on the node.
	writeFile(t, root.Path(paths.KnobsFile), "timeScale: 0.05\nconflictOnNextReplace: 1\n")
	fresh, _, _ := s.kubectl("", "get", "node", "vm", "-o", "json")
	if _, e, c := s.kubectl(fresh, "replace", "-f", "-"); c != 1 || !strings.Contains(e, "(Conflict)") {
		t.Fatalf("replace after the knob: %d %q", c, e)
	}
	out, _, _ := s.kubectl("", "get", "node", "vm", "-o", "json")
	var n corev1.Node
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatal(err)
	}
	if n.Annotations[app.ConcurrentWriteAnnotation] != "1" {
		t.Errorf("concurrent write not visible: annotations %v", n.Annotations)
	}
}
