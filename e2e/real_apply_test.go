// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// realServerAgents is the real lane's 1 server + 2 agents: a1 with a label and a taint that it
// must carry from registration on (node-label / node-taint), a2 plain.
const realServerAgents = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: real
spec:
{{template "spec-k3s-real" .}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
      labels:
        site: plant-7
      taints:
        - dedicated=edge:NoSchedule
    - name: a2
      address: {{(index .Hosts 2).Address}}
      role: agent
`

// unitState is what systemd says of a unit: the fields a restart would change.
func (c *testCluster) unitState(i int, unit string) string {
	c.t.Helper()
	return c.exec(i, "systemctl", "show", "-p", "InvocationID", "-p", "NRestarts", "-p", "ExecMainStartTimestampMonotonic", unit)
}

// TestRealApply (real K3s): 1 server + 2 agents from an airgap inventory.
//   - every milestone of the first server is reported once, in the order reached, and the
//     causal order of K3s holds (registered after the API, PodCIDR before subnet.env, ...);
//   - the nodes are Ready in the Kubernetes API with the declared label and taint;
//   - an immediate re-run is `unchanged` for every host and restarts no unit (InvocationID,
//     NRestarts and the main process start stay), whatever systemd says of an agent that has
//     not sent READY yet;
//   - drift: the taint and label removed with kubectl → `check` exits 6 naming both →
//     `apply --reconcile-taints` puts both back;
//   - `reset` leaves no binary, unit, data directory or network interface of K3s behind;
//   - `k3strap timeline` draws the apply's JSON events as a page that headless Chromium renders
//     with every host and every milestone reached on it.
func TestRealApply(t *testing.T) {
	c := newRealCluster(t, 3)
	c.writeInventory(realServerAgents, nil)

	r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", c.dir+"/real.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	var order []string
	at := map[string]float64{}
	last := -1.0
	for _, e := range r.ofType(events.Milestone) {
		m := e.Milestone
		if e.Host != "cp1" {
			t.Errorf("milestone %s reported for %s, want cp1 only", m.Name, e.Host)
		}
		if _, dup := at[m.Name]; dup {
			t.Errorf("milestone %s reported twice", m.Name)
		}
		if m.Seconds < last {
			t.Errorf("milestone %s at %.1fs reported after one at %.1fs", m.Name, m.Seconds, last)
		}
		last = m.Seconds
		at[m.Name] = m.Seconds
		order = append(order, m.Name)
	}
	t.Logf("milestones of cp1: %v %v", order, at)
	for _, m := range wantMilestones {
		if _, ok := at[m]; !ok {
			t.Errorf("milestone %s missing (got %v)", m, order)
		}
	}
	for _, rule := range [][2]string{{"api-ready", "node-registered"}, {"node-registered", "uninitialized-taint-gone"},
		{"node-registered", "podcidr-set"}, {"podcidr-set", "subnet-env"}, {"node-registered", "node-ready"}} {
		if at[rule[0]] > at[rule[1]] {
			t.Errorf("%s (%.1fs) after %s (%.1fs)", rule[0], at[rule[0]], rule[1], at[rule[1]])
		}
	}

	c.timelineInChromium(r, []string{"cp1", "a1", "a2"}, order)

	// The Kubernetes API: every node Ready, a1 with its label and taint, a2 with neither.
	nodes := c.realNodes(0)
	for _, name := range []string{"cp1", "a1", "a2"} {
		n, ok := nodes[name]
		if !ok {
			t.Fatalf("node %s not in the API (have %v)", name, keys(nodes))
		}
		if !nodeReady(n) {
			t.Errorf("node %s not Ready", name)
		}
	}
	if got := nodes["a1"].Labels["site"]; got != "plant-7" {
		t.Errorf("a1 label site=%q, want plant-7", got)
	}
	if a1 := nodes["a1"]; !hasTaint(&a1, "dedicated=edge:NoSchedule") {
		t.Errorf("a1 taints %v, want dedicated=edge:NoSchedule", nodes["a1"].Spec.Taints)
	}
	if a2 := nodes["a2"]; hasTaint(&a2, "dedicated=edge:NoSchedule") {
		t.Error("a2 carries a1's taint")
	}

	// Re-run: unchanged everywhere, no unit restarted.
	units := map[int]string{0: "k3s", 1: "k3s-agent", 2: "k3s-agent"}
	before := map[int]string{}
	for i, u := range units {
		before[i] = c.unitState(i, u)
	}
	r2 := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/real.kubeconfig")
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("re-run exited %d", r2.code)
	}
	for _, h := range r2.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("re-run: %s %s (%s), want unchanged", h.Host, h.Status, h.Message)
		}
	}
	for i, u := range units {
		if after := c.unitState(i, u); after != before[i] {
			t.Errorf("re-run restarted %s on %s: %q -> %q", u, c.hosts[i].Name, before[i], after)
		}
	}

	// Drift: a taint and a label removed behind k3strap's back.
	c.kubectl("", "taint", "nodes", "a1", "dedicated-")
	c.kubectl("", "label", "nodes", "a1", "site-")
	chk := c.k3strap(2*time.Minute, "check")
	defer chk.dump(t)
	if chk.code != 6 {
		t.Fatalf("check after drift exited %d, want 6", chk.code)
	}
	for _, want := range []string{"dedicated=edge:NoSchedule", "site"} {
		if !strings.Contains(chk.stdout, want) {
			t.Errorf("check output does not name %s", want)
		}
	}
	rec := c.k3strap(3*time.Minute, "apply", "--reconcile-taints")
	defer rec.dump(t)
	if rec.code != 0 {
		t.Fatalf("apply --reconcile-taints exited %d", rec.code)
	}
	nodes = c.realNodes(0)
	if a1 := nodes["a1"]; !hasTaint(&a1, "dedicated=edge:NoSchedule") || a1.Labels["site"] != "plant-7" {
		t.Errorf("after --reconcile-taints a1 has taints %v, site=%q", nodes["a1"].Spec.Taints, nodes["a1"].Labels["site"])
	}
	if chk := c.k3strap(2*time.Minute, "check"); chk.code != 0 {
		t.Errorf("check after the repair exited %d", chk.code)
	}

	// Reset: nothing of K3s is left on any host.
	rs := c.k3strap(5*time.Minute, "reset", "--yes")
	defer rs.dump(t)
	if rs.code != 0 {
		t.Fatalf("reset exited %d", rs.code)
	}
	for i, host := range c.hosts {
		left := c.exec(i, "sh", "-c", `for p in /usr/local/bin/k3s /etc/systemd/system/k3s.service /etc/systemd/system/k3s-agent.service \
			/var/lib/rancher/k3s /etc/rancher/k3s /run/flannel /var/lib/kubelet; do [ -e "$p" ] && echo "$p"; done
			ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^(flannel|cni|veth|kube-ipvs)' || true
			systemctl list-unit-files --no-legend k3s.service k3s-agent.service | awk '{print $1}'`)
		if strings.TrimSpace(left) != "" {
			t.Errorf("%s after reset still has:\n%s", host.Name, left)
		}
	}
}

// realNodes reads every Node through host i's k3s kubectl.
func (c *testCluster) realNodes(i int) map[string]corev1.Node {
	c.t.Helper()
	var l corev1.NodeList
	out := c.exec(i, "k3s", "kubectl", "get", "nodes", "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		c.t.Fatalf("decoding nodes: %v", err)
	}
	m := map[string]corev1.Node{}
	for _, n := range l.Items {
		m[n.Name] = n
	}
	return m
}

func nodeReady(n corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
