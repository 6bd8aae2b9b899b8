// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// cniInv is an airgap inventory with the simulator: cp1 (server) and w1..wN (agents), a cni
// section (Extra.cni, indented 4), extra fields for cp1 (Extra.cp1, indented 6) and
// optionally every packaged add-on disabled (Extra.noAddons).
const cniInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{- if .Extra.noAddons}}
      disable: [traefik, servicelb, local-storage, metrics-server, coredns]
{{- end}}
  cni:
{{.Extra.cni}}
{{template "ssh-root" .}}
  hosts:
{{- range $i, $h := .Hosts}}
    - name: {{if eq $i 0}}cp1{{else}}w{{$i}}{{end}}
      address: {{$h.Address}}
      role: {{if eq $i 0}}server{{else}}agent{{end}}
{{- if eq $i 0}}{{with $.Extra.cp1}}
{{.}}{{end}}{{end}}
{{- end}}
`

// standIn is the test-only stand-in for Calico's tigera-operator.yaml.
func standIn() string {
	return filepath.Join(repoRoot(), "e2e", "testdata", "tigera-operator-standin.yaml")
}

// kubectlJSON runs `k3s kubectl ... -o json` inside host i and decodes the output into v.
func (c *testCluster) kubectlJSON(i int, v any, args ...string) {
	c.t.Helper()
	out := c.exec(i, append(append([]string{"/usr/local/bin/k3s", "kubectl"}, args...), "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

func (c *testCluster) node(name string) *corev1.Node {
	c.t.Helper()
	var n corev1.Node
	c.kubectlJSON(0, &n, "get", "node", name)
	return &n
}

// dsPodNodes returns the nodes running a pod of DaemonSet ns/name.
func (c *testCluster) dsPodNodes(ns, name string) map[string]corev1.PodPhase {
	c.t.Helper()
	var l corev1.PodList
	c.kubectlJSON(0, &l, "get", "pods", "-n", ns)
	out := map[string]corev1.PodPhase{}
	for _, p := range l.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && o.Name == name {
				out[p.Spec.NodeName] = p.Status.Phase
			}
		}
	}
	return out
}

func hasTaint(n *corev1.Node, s string) bool {
	for _, t := range n.Spec.Taints {
		str := t.Key
		if t.Value != "" {
			str += "=" + t.Value
		}
		if str+":"+string(t.Effect) == s {
			return true
		}
	}
	return false
}

func findings(r run, check, host, sev string) []*events.PreflightResult {
	var out []*events.PreflightResult
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == check && strings.Contains(e.Host, host) && e.Finding.Severity == sev {
			out = append(out, e.Finding)
		}
	}
	return out
}

// TestCNICalicoKernelPolicy: Calico on a mixed fleet (docs/failure-modes.md F2). The agent's kernel lacks
// ip_set (harness kernel mask): kernelPolicy strict fails preflight naming the host, the
// missing features and where they were looked for; exclude installs both hosts, labels the
// agent's node k3strap.io/cni-excluded=true, keeps calico-node off it (rendered affinity), and
// says so loudly. calico-node runs on the first server although it carries a custom NoExecute
// taint (the Installation keeps Calico's default tolerations and adds the declared taint).
func TestCNICalicoKernelPolicy(t *testing.T) {
	c := newCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.KernelMask(ctx, c.hosts[1].Index, "ip_set"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.h.KernelUnmask(ctx, c.hosts[1].Index); err != nil {
			t.Errorf("kernel unmask: %v", err)
		}
	})
	inv := func(policy string) {
		c.writeInventory(cniInv, map[string]any{
			"cni": fmt.Sprintf("    type: calico\n    backend: VXLAN\n    kernelPolicy: %s\n    calico:\n      manifest: %s", policy, standIn()),
			"cp1": "      taints: [\"dedicated=edge:NoExecute\"]",
		})
	}

	inv("strict")
	r := c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("strict preflight exited %d, want 3", r.code)
	}
	errs := findings(r, "CNIKernel", "w1", "error")
	if len(errs) != 1 {
		t.Fatalf("want one CNIKernel error for w1, got %d", len(errs))
	}
	for _, want := range []string{"calico (encapsulation VXLAN) needs ip_set", "lacks: ip_set (", "CONFIG_IP_SET not set", "/proc/config.gz", "xt_set ("} {
		if !strings.Contains(errs[0].Message, want) {
			t.Errorf("CNIKernel message lacks %q: %s", want, errs[0].Message)
		}
	}
	if !strings.Contains(errs[0].Fix, "kernelPolicy: exclude") {
		t.Errorf("fix does not offer exclude: %s", errs[0].Fix)
	}
	if len(findings(r, "CNIKernel", "cp1", "error")) != 0 {
		t.Error("cp1 has ip_set but got a CNIKernel error")
	}

	inv("exclude")
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply with kernelPolicy exclude exited %d", r.code)
	}
	if len(findings(r, "CNIKernel", "w1", "warning")) < 2 {
		t.Error("preflight did not warn that w1 is excluded (per host and in the summary)")
	}
	loud := 0
	for _, e := range r.ofType(events.Warning) {
		if strings.Contains(e.Message, "EXCLUDED from calico") && strings.Contains(e.Message, "w1") {
			loud++
		}
	}
	if loud < 1 {
		t.Error("the run did not warn about the excluded host after install")
	}
	for _, h := range r.summary(t).Hosts {
		if h.Host == "w1" && !strings.Contains(h.Message, "EXCLUDED from calico") {
			t.Errorf("summary line of w1 does not say it is excluded: %q", h.Message)
		}
	}
	if got := c.node("w1").Labels["k3strap.io/cni-excluded"]; got != "true" {
		t.Errorf("w1 label k3strap.io/cni-excluded = %q, want true", got)
	}
	if _, ok := c.node("cp1").Labels["k3strap.io/cni-excluded"]; ok {
		t.Error("cp1 is labelled excluded")
	}
	pods := c.dsPodNodes("calico-system", "calico-node")
	if pods["cp1"] != corev1.PodRunning {
		t.Errorf("calico-node on cp1: %q (pods %v): the custom NoExecute taint must be tolerated", pods["cp1"], pods)
	}
	if _, ok := pods["w1"]; ok {
		t.Errorf("calico-node runs on the excluded w1: %v", pods)
	}
	// What K3s applied: the operator from the local file, the Installation k3strap rendered.
	if out := c.exec(0, "ls", "/var/lib/rancher/k3s/server/manifests"); !strings.Contains(out, "k3strap-calico-operator.yaml") || !strings.Contains(out, "k3strap-calico-installation.yaml") {
		t.Errorf("manifests folder: %s", out)
	}
	var inst struct {
		Spec struct {
			CalicoNodeDaemonSet struct {
				Spec struct {
					Template struct {
						Spec corev1.PodSpec `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			} `json:"calicoNodeDaemonSet"`
		} `json:"spec"`
	}
	c.kubectlJSON(0, &inst, "get", "installation", "default")
	ps := inst.Spec.CalicoNodeDaemonSet.Spec.Template.Spec
	if len(ps.Tolerations) != 4 || ps.Affinity == nil {
		t.Errorf("Installation calico-node tolerations %+v affinity %+v", ps.Tolerations, ps.Affinity)
	}
	// A re-run changes nothing and keeps the label.
	r2 := c.k3strap(3*time.Minute, "apply")
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("second apply exited %d", r2.code)
	}
	for _, h := range r2.summary(t).Hosts {
		if h.Status != events.StatusUnchanged && h.Status != events.StatusOK {
			t.Errorf("second apply: %s %s (%s)", h.Host, h.Status, h.Message)
		}
	}
	if got := c.node("w1").Labels["k3strap.io/cni-excluded"]; got != "true" {
		t.Errorf("label lost on re-run: %q", got)
	}
}

// TestTaintDriftCheckAndReconcile (F4, F5): standalone flannel runs on a node with a custom
// NoExecute taint; a taint removed behind k3strap's back is reported by `check` (exit 6) and by
// a plain apply, and restored by `apply --reconcile-taints` through a read-modify-write that
// survives a concurrent write (409, retried, the other write kept) and leaves K3s's own taints
// alone; a taint changed in the inventory after the node registered is applied.
func TestTaintDriftCheckAndReconcile(t *testing.T) {
	c := newCluster(t, 1)
	inv := func(taint string) {
		c.writeInventory(cniInv, map[string]any{
			"cni":      "    type: flannel-standalone",
			"cp1":      fmt.Sprintf("      taints: [%q]\n      labels: {site: lab}", taint),
			"noAddons": true,
		})
	}
	inv("dedicated=edge:NoExecute")
	r := c.k3strap(3*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	if p := c.dsPodNodes("kube-flannel", "kube-flannel-ds"); p["cp1"] != corev1.PodRunning {
		t.Errorf("kube-flannel-ds on the NoExecute-tainted cp1: %v (F4)", p)
	}
	skipped := false
	for _, e := range r.ofType(events.Milestone) {
		if e.Milestone.Name == "subnet-env" && e.Milestone.Skipped {
			skipped = true
		}
	}
	if !skipped {
		t.Error("subnet-env milestone not skipped with flannel-backend none")
	}

	r = c.k3strap(time.Minute, "check")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("check right after apply exited %d", r.code)
	}

	// Behind k3strap's back.
	c.exec(0, "/usr/local/bin/k3s", "kubectl", "taint", "nodes", "cp1", "dedicated-")
	c.exec(0, "/usr/local/bin/k3s", "kubectl", "cordon", "cp1") // K3s's own taint node.kubernetes.io/unschedulable
	r = c.k3strap(time.Minute, "check")
	defer r.dump(t)
	if r.code != 6 {
		t.Fatalf("check with a removed taint exited %d, want 6", r.code)
	}
	var drift *events.Event
	for _, e := range r.ofType(events.HostStep) {
		if e.Step == "drift" && e.Host == "cp1" {
			drift = &e
		}
	}
	if drift == nil || drift.Status != events.StatusFailed || !strings.Contains(drift.Message, "taint dedicated=edge:NoExecute missing") {
		t.Fatalf("check drift step for cp1: %+v", drift)
	}
	if strings.Contains(drift.Message, "unschedulable") {
		t.Errorf("K3s's own taint reported as drift: %s", drift.Message)
	}
	// The way on is apply's repair, not another check.
	if next := strings.Join(r.summary(t).Next, "\n"); !strings.Contains(next, "k3strap apply --reconcile-taints") || strings.Contains(next, "k3strap check") {
		t.Errorf("check's next steps on drift: %q", next)
	}

	// A plain apply reports, does not repair.
	r = c.k3strap(3*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("plain apply exited %d", r.code)
	}
	warned := false
	for _, e := range r.ofType(events.Warning) {
		if e.Host == "cp1" && strings.Contains(e.Message, "dedicated=edge:NoExecute missing") && strings.Contains(e.Message, "--reconcile-taints") {
			warned = true
		}
	}
	if !warned {
		t.Error("plain apply did not report the drift with the repair command")
	}
	if hasTaint(c.node("cp1"), "dedicated=edge:NoExecute") {
		t.Fatal("plain apply repaired the taint; only --reconcile-taints may")
	}

	// A concurrent writer changes the node between k3strap's read and its replace.
	if err := c.h.WriteFile(context.Background(), c.hosts[0].Index, "/etc/k3ssim/sim.yaml",
		fmt.Appendf(nil, "timeScale: %v\nconflictOnNextReplace: 1\n", SimTimeScale), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(3*time.Minute, "apply", "--reconcile-taints")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply --reconcile-taints exited %d", r.code)
	}
	retried := false
	for _, e := range r.ofType(events.Info) {
		if e.Host == "cp1" && strings.Contains(e.Message, "409 Conflict") {
			retried = true
		}
	}
	if !retried {
		t.Error("no conflict retry reported")
	}
	n := c.node("cp1")
	if !hasTaint(n, "dedicated=edge:NoExecute") {
		t.Errorf("taint not restored: %v", n.Spec.Taints)
	}
	if !hasTaint(n, "node.kubernetes.io/unschedulable:NoSchedule") {
		t.Errorf("K3s's own unschedulable taint was removed: %v", n.Spec.Taints)
	}
	if n.Annotations["k3ssim.k3strap.io/concurrent-writes"] != "1" {
		t.Errorf("the concurrent write was lost (annotations %v)", n.Annotations)
	}
	c.exec(0, "/usr/local/bin/k3s", "kubectl", "uncordon", "cp1")
	r = c.k3strap(time.Minute, "check")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("check after the repair exited %d", r.code)
	}

	// node-taint only applies at registration: a taint changed in the inventory afterwards.
	inv("dedicated=core:NoSchedule")
	r = c.k3strap(time.Minute, "check")
	defer r.dump(t)
	if r.code != 6 {
		t.Fatalf("check after changing the inventory's taint exited %d, want 6", r.code)
	}
	r = c.k3strap(3*time.Minute, "apply", "--reconcile-taints", "--timeout", "90s")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply --reconcile-taints after the inventory change exited %d", r.code)
	}
	n = c.node("cp1")
	if !hasTaint(n, "dedicated=core:NoSchedule") || hasTaint(n, "dedicated=edge:NoExecute") {
		t.Errorf("taints after the inventory change: %v", n.Spec.Taints)
	}
	if p := c.dsPodNodes("kube-flannel", "kube-flannel-ds"); p["cp1"] != corev1.PodRunning {
		t.Errorf("kube-flannel-ds after the change: %v", p)
	}
	r = c.k3strap(time.Minute, "check")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("final check exited %d", r.code)
	}
}
