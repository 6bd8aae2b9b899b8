// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// pdbWorkload is Deployment default/web of one pod on node, its container the YAML flow
// mapping container (pod spec lines podSpec added, indented by six spaces), and a
// PodDisruptionBudget that allows it no disruption: draining node is blocked until the budget
// goes.
func pdbWorkload(node, container, podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: ` + node + `}
      containers: [` + container + `]
` + podSpec + `---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
`
}

// TestUpgradeSUC: 1 server + 3 agents (a1 with the custom taint
// dedicated=edge:NoExecute) upgraded by the simulator's stand-in for system-upgrade-controller:
// `upgrade --via suc` deploys SUC and the Plans and watches; Ctrl-C leaves the upgrade running
// and says how to watch it; `upgrade --watch` resumes and names the PodDisruptionBudget that
// blocks a2's drain; once the budget is gone, `upgrade --watch` ends with every node on the new
// version — the server first, at most 2 agents (--upgrade-batch 67 of 3) at a time, a1
// upgraded because the Plan tolerates its taint.
func TestUpgradeSUC(t *testing.T) {
	c := newCluster(t, 4)
	c.writeInventory(clusterInv, clusterExtra(1, 3, nil))
	r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.WriteFile(ctx, c.hosts[0].Index, "/root/web.yaml", []byte(pdbWorkload("a2", "{name: web, image: nginx}", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	c.exec(0, "k3s", "kubectl", "apply", "-f", "/root/web.yaml")

	c.writeInventory(clusterInv, clusterExtra(1, 3, map[string]any{"version": "v1.36.4+k3s1"}))
	// 1. Start, and Ctrl-C once the server is done: the upgrade goes on in the cluster.
	a := c.start(3*time.Minute, "upgrade", "--via", "suc", "--upgrade-batch", "67", "--stall-grace", "5s")
	a.waitFor(t, 2*time.Minute, "cp1 uncordoned", func(e events.Event) bool {
		return e.Host == "cp1" && e.Phase == events.PhaseSUCWatch && e.Step == events.SUCStepUncordon
	})
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r1 := a.wait(t)
	defer r1.dump(t)
	if r1.code != 130 || !strings.Contains(r1.stdout, "k3strap upgrade --watch") {
		t.Errorf("Ctrl-C: exit %d, want 130 and a hint to `k3strap upgrade --watch`", r1.code)
	}
	plans := c.exec(0, "k3s", "kubectl", "get", "plans.upgrade.cattle.io", "-n", "system-upgrade", "-o", "json")
	compact := strings.Join(strings.Fields(plans), "")
	for _, want := range []string{`"name":"k3s-server"`, `"name":"k3s-agent"`, `"concurrency":2`, `"key":"dedicated"`, `"value":"edge"`,
		`"effect":"NoExecute"`, `"args":["prepare","k3s-server"]`, `"serviceAccountName":"system-upgrade"`, `"cordon":true`} {
		if !strings.Contains(compact, want) {
			t.Errorf("Plans lack %s:\n%s", want, plans)
		}
	}

	// 2. Resume watching: a2's drain is blocked by the PodDisruptionBudget, which is named.
	r2 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "5s")
	defer r2.dump(t)
	var diag *events.ErrorInfo
	for _, e := range r2.ofType(events.Error) {
		if e.Host == "a2" && e.Error != nil {
			diag = e.Error
		}
	}
	if r2.code != 4 || diag == nil || diag.Diagnosis != "suc-drain-blocked-pdb" || !strings.Contains(diag.Message, "default/web") {
		t.Fatalf("blocked drain: exit %d, diagnosis %+v; want exit 4 naming PodDisruptionBudget default/web", r2.code, diag)
	}
	if !strings.Contains(strings.Join(diag.Evidence, "\n"), "PodDisruptionBudget default/web") {
		t.Errorf("evidence does not name the budget: %q", diag.Evidence)
	}

	// 3. Without the budget, watching ends with every node upgraded.
	c.exec(0, "k3s", "kubectl", "delete", "pdb", "web", "-n", "default")
	r3 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "20s")
	defer r3.dump(t)
	if r3.code != 0 {
		t.Fatalf("upgrade --watch exited %d", r3.code)
	}
	nodes := c.exec(0, "k3s", "kubectl", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.nodeInfo.kubeletVersion},{.spec.unschedulable};{end}")
	for _, n := range []string{"cp1", "a1", "a2", "a3"} {
		if !strings.Contains(nodes, n+"=v1.36.4+k3s1,;") {
			t.Errorf("after the upgrade %s is not on v1.36.4+k3s1 and schedulable: %s", n, nodes)
		}
	}

	// Across the three runs: servers first, at most 2 agents at a time, every step per node in order.
	var all []events.Event
	for _, r := range []run{r1, r2, r3} {
		all = append(all, r.events...)
	}
	idx := func(host, step string, last bool) int {
		at := -1
		for i, e := range all {
			if e.Host == host && e.Phase == events.PhaseSUCWatch && e.Step == step && e.Type == events.HostStep {
				at = i
				if !last {
					return i
				}
			}
		}
		return at
	}
	serverDone := idx("cp1", events.SUCStepUncordon, false)
	if serverDone < 0 {
		t.Fatal("no uncordon event for cp1")
	}
	for _, n := range []string{"a1", "a2", "a3"} {
		if cord := idx(n, events.SUCStepCordon, false); cord < serverDone {
			t.Errorf("%s cordoned (event %d) before the server was done (%d)", n, cord, serverDone)
		}
		// A node that finished between two runs (after the stalled watch ended, before the
		// next started) is reported once, as upgraded before the watch: its steps were seen by
		// nobody and are not invented.
		late := false
		for _, e := range all {
			if e.Host == n && e.Step == events.SUCStepUncordon && strings.Contains(e.Message, "before this watch started") {
				late = true
			}
		}
		if late {
			continue
		}
		prev := -1
		for _, st := range []string{events.SUCStepJob, events.SUCStepCordon, events.SUCStepDrain, events.SUCStepUpgrade, events.SUCStepReady, events.SUCStepUncordon} {
			i := idx(n, st, true)
			if i < 0 || i < prev {
				t.Errorf("%s: step %s at event %d, after the previous step at %d", n, st, i, prev)
			}
			prev = i
		}
	}
	if idx("a1", events.SUCStepUncordon, false) < 0 {
		t.Error("a1 (taint dedicated=edge:NoExecute) was not upgraded")
	}
	active, most := map[string]bool{}, 0
	for _, e := range all {
		if e.Phase != events.PhaseSUCWatch || e.Type != events.HostStep || !strings.HasPrefix(e.Host, "a") {
			continue
		}
		switch e.Step {
		case events.SUCStepCordon:
			active[e.Host] = true
		case events.SUCStepUncordon:
			delete(active, e.Host)
		}
		most = max(most, len(active))
	}
	if most > 2 {
		t.Errorf("%d agents upgrading at once, want at most 2", most)
	}
}
