// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

func nodeTaints(t *testing.T, s *sim, name string) []string {
	t.Helper()
	n, err := s.clientset().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, tt := range n.Spec.Taints {
		out = append(out, tt.Key)
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

const externalCCM = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hcloud-cloud-controller-manager
  namespace: kube-system
spec:
  selector:
    matchLabels: {app: ccm}
  template:
    metadata:
      labels: {app: ccm}
    spec:
      hostNetwork: true
      tolerations:
      - key: node.cloudprovider.kubernetes.io/uninitialized
        value: "true"
        effect: NoSchedule
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
      containers:
      - name: ccm
        image: hetznercloud/hcloud-cloud-controller-manager:v1.20.0
`

// TestOldFlannelAndExternalCCM: with the subnetEnvWaitsForTaint knob (K3s 1.21 behaviour)
// an F1 node has a PodCIDR but no subnet.env; an external cloud controller applied later
// clears the taint (~3 s scaled), then subnet.env appears and the network policy
// controller starts.
func TestOldFlannelAndExternalCCM(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": string(fixture(t, "config-f1.yaml")),
		"/etc/k3ssim/sim.yaml":         "timeScale: 0.05\nsubnetEnvWaitsForTaint: true\n",
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	s.waitReadyz(10 * time.Second)
	cs := s.clientset()
	eventually(t, 10*time.Second, "PodCIDR", func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR != ""
	})
	time.Sleep(scaled(4)) // well past the 1.9 s flannel needs after the PodCIDR
	if _, err := os.Stat(root.Path(paths.SubnetEnv)); err == nil {
		t.Fatal("subnet.env must wait for the uninitialized taint with subnetEnvWaitsForTaint")
	}
	s.logs.waitFor(t, "waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint", 10*time.Second)
	if !contains(nodeTaints(t, s, "vm"), "node.cloudprovider.kubernetes.io/uninitialized") {
		t.Fatal("taint gone without a cloud controller")
	}
	manifest := filepath.Join(t.TempDir(), "ccm.yaml")
	writeFile(t, manifest, externalCCM)
	applied := time.Now()
	if out, e, c := s.kubectl("", "apply", "-f", manifest); c != 0 || out != "daemonset.apps/hcloud-cloud-controller-manager created\n" {
		t.Fatalf("apply: %d %q %q", c, out, e)
	}
	eventually(t, 10*time.Second, "taint cleared by the external cloud controller", func() bool {
		return !contains(nodeTaints(t, s, "vm"), "node.cloudprovider.kubernetes.io/uninitialized")
	})
	if d := time.Since(applied); d < scaled(2.5) {
		t.Errorf("taint cleared %v after apply, want ~3 s scaled", d)
	}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
	if n.Spec.ProviderID == "" {
		t.Error("external cloud controller must set providerID")
	}
	eventually(t, 10*time.Second, "subnet.env", func() bool {
		_, err := os.Stat(root.Path(paths.SubnetEnv))
		return err == nil
	})
	s.logs.waitFor(t, "Starting network policy controller full sync goroutine", 10*time.Second)
	if code, ended := s.exitCode(0); ended {
		t.Errorf("must keep running, exited %d", code)
	}
}

// TestCRDStall: the half-created-CRD stall keeps the taint and subnet.env away ~70 s
// (scaled) although the PodCIDR is set.
func TestCRDStall(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": plainConfig,
		"/etc/k3ssim/sim.yaml":         "timeScale: 0.05\ncrdStall: true\n",
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	s.waitReadyz(10 * time.Second)
	s.logs.waitFor(t, "Waiting for CRD addons.k3s.cattle.io to become available", 10*time.Second)
	cs := s.clientset()
	eventually(t, 10*time.Second, "PodCIDR", func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR != ""
	})
	if d := time.Since(s.start); d > scaled(60) {
		t.Fatalf("PodCIDR came too late (%v) for the check", d)
	}
	if !contains(nodeTaints(t, s, "vm"), "node.cloudprovider.kubernetes.io/uninitialized") {
		t.Error("uninitialized taint must stay during the stall")
	}
	if _, err := os.Stat(root.Path(paths.SubnetEnv)); err == nil {
		t.Error("subnet.env must be missing during the stall")
	}
	eventually(t, 10*time.Second, "subnet.env after the stall", func() bool {
		_, err := os.Stat(root.Path(paths.SubnetEnv))
		return err == nil
	})
	if d := time.Since(s.start); d < scaled(68) {
		t.Errorf("subnet.env after %v, want ~70 s scaled", d)
	}
	eventually(t, 5*time.Second, "taint gone after the stall", func() bool {
		return !contains(nodeTaints(t, s, "vm"), "node.cloudprovider.kubernetes.io/uninitialized")
	})
}

// TestWorkloads: HelmCharts (one failing by knob), Deployments becoming available after
// deploymentDelay, the manifests directory, kubectl taint/cordon/drain/logs.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": "disable: [servicelb]\n",
		"/etc/k3ssim/sim.yaml":         "timeScale: 0.05\ndeploymentDelay: 2s\nfailHelmCharts: [broken]\n",
		"/var/lib/rancher/k3s/server/manifests/cert-manager.yaml": `apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata:
  name: cert-manager
  namespace: kube-system
spec:
  repo: https://charts.jetstack.io
  chart: cert-manager
  targetNamespace: cert-manager
  createNamespace: true
  version: v1.16.1
`,
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	s.waitReadyz(10 * time.Second)
	cs := s.clientset()
	ctx := context.Background()
	// Packaged add-ons and the manifests directory.
	eventually(t, 15*time.Second, "traefik and cert-manager installed", func() bool {
		d1, err1 := cs.AppsV1().Deployments("kube-system").Get(ctx, "traefik", metav1.GetOptions{})
		d2, err2 := cs.AppsV1().Deployments("cert-manager").Get(ctx, "cert-manager-webhook", metav1.GetOptions{})
		return err1 == nil && err2 == nil && d1.Status.AvailableReplicas == 1 && d2.Status.AvailableReplicas == 1
	}, func() string { out, _, _ := s.kubectl("", "get", "pods,jobs", "-A"); return out })
	for _, name := range []string{"coredns", "local-path-provisioner", "metrics-server"} {
		if _, err := cs.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("packaged add-on %s: %v", name, err)
		}
	}
	// A failing HelmChart.
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	writeFile(t, broken, "apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata:\n  name: broken\n  namespace: kube-system\nspec:\n  chart: rancher\n  repo: https://releases.rancher.com/server-charts/latest\n  targetNamespace: cattle-system\n")
	if _, e, c := s.kubectl("", "apply", "-f", broken); c != 0 {
		t.Fatal(e)
	}
	eventually(t, 10*time.Second, "helm-install-broken failed", func() bool {
		j, err := cs.BatchV1().Jobs("kube-system").Get(ctx, "helm-install-broken", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if out, _, c := s.kubectl("", "logs", "-n", "kube-system", "job/helm-install-broken"); c != 0 || !strings.Contains(out, "Error: INSTALLATION FAILED") {
		t.Errorf("failed job logs: %q", out)
	}
	if _, err := cs.AppsV1().Deployments("cattle-system").Get(ctx, "broken", metav1.GetOptions{}); err == nil {
		t.Error("a failed chart must not install its workloads")
	}

	// An applied Deployment becomes available only after deploymentDelay (2 s scaled).
	dep := filepath.Join(t.TempDir(), "web.yaml")
	writeFile(t, dep, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n")
	applied := time.Now()
	if out, _, c := s.kubectl("", "apply", "-f", dep); c != 0 || out != "deployment.apps/web created\n" {
		t.Fatalf("apply: %q", out)
	}
	if out, _, _ := s.kubectl("", "apply", "-f", dep); out != "deployment.apps/web unchanged\n" {
		t.Errorf("re-apply: %q", out)
	}
	if out, _, c := s.kubectl("", "rollout", "status", "deployment/web", "--timeout=10s"); c != 0 || !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("rollout status: %q", out)
	}
	if d := time.Since(applied); d < scaled(2)*8/10 {
		t.Errorf("available after %v, want >= deploymentDelay (%v)", d, scaled(2))
	}

	// A NoExecute taint evicts pods that do not tolerate it; kubectl taint/untaint.
	if out, e, c := s.kubectl("", "taint", "nodes", "vm", "dedicated=edge:NoExecute"); c != 0 || out != "node/vm tainted\n" {
		t.Fatalf("taint: %q %q", out, e)
	}
	if _, e, c := s.kubectl("", "taint", "nodes", "vm", "dedicated=edge:NoExecute"); c != 1 || !strings.Contains(e, "--overwrite is false") {
		t.Errorf("duplicate taint: %q", e)
	}
	eventually(t, 5*time.Second, "web pods evicted and pending", func() bool {
		out, _, _ := s.kubectl("", "get", "pods", "-l", "app=web", "-o", "json")
		var l corev1.PodList
		_ = json.Unmarshal([]byte(out), &l)
		if len(l.Items) != 2 {
			return false
		}
		for _, p := range l.Items {
			if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
				return false
			}
		}
		return true
	})
	if out, _, c := s.kubectl("", "taint", "nodes", "vm", "dedicated-"); c != 0 || out != "node/vm untainted\n" {
		t.Fatalf("untaint: %q", out)
	}
	if out, _, c := s.kubectl("", "wait", "--for=condition=Available", "deployment/web", "--timeout=10s"); c != 0 {
		t.Fatalf("wait: %q", out)
	}
	// cordon / drain / uncordon.
	out, e, c := s.kubectl("", "drain", "vm", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10s")
	if c != 0 || !strings.HasPrefix(out, "node/vm cordoned\n") || !strings.HasSuffix(out, "node/vm drained\n") || !strings.Contains(out, "evicting pod default/web-") {
		t.Fatalf("drain: %d %q %q", c, out, e)
	}
	if out, _, _ := s.kubectl("", "get", "nodes"); !strings.Contains(out, "Ready,SchedulingDisabled") {
		t.Errorf("cordoned node table: %q", out)
	}
	if out, _, c := s.kubectl("", "uncordon", "vm"); c != 0 || out != "node/vm uncordoned\n" {
		t.Errorf("uncordon: %q", out)
	}
	if out, _, c := s.kubectl("", "delete", "deployment", "web"); c != 0 || out != "deployment.apps \"web\" deleted\n" {
		t.Errorf("delete: %q", out)
	}
	eventually(t, 5*time.Second, "web pods gone", func() bool {
		out, _, _ := s.kubectl("", "get", "pods", "-l", "app=web", "-o", "name")
		return out == ""
	})
}

// TestConnectionRefused: kubectl's message when nothing listens.
func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	root := newRoot(t, nil)
	s := &sim{t: t, root: root, port: freePort(t)}
	kc := strings.Replace(string(fixture(t, "k3s.yaml.redacted")), "certificate-authority-data: REDACTED", "insecure-skip-tls-verify: true", 1)
	kc = strings.Replace(kc, "    client-certificate-data: REDACTED\n    client-key-data: REDACTED\n", "    token: x\n", 1)
	kc = strings.Replace(kc, "127.0.0.1:6443", "127.0.0.1:"+itoa(s.port), 1)
	writeFile(t, root.Path(paths.DefaultKubeconfig), kc)
	_, e, c := s.kubectl("", "get", "nodes")
	if c != 1 || e != "The connection to the server 127.0.0.1:"+itoa(s.port)+" was refused - did you specify the right host or port?\n" {
		t.Errorf("got %d %q", c, e)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
