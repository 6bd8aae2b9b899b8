// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/events"
)

// TestRealTrixie (real K3s): the 1 server + 2 agents acceptance on Debian 13 hosts (systemd 257,
// iptables 1.8.11 defaulting to its nf_tables backend; harness.KindTrixie):
//   - the hosts are what they claim: /etc/debian_version 13.x, systemd 257 as PID 1, `iptables`
//     reporting "(nf_tables)";
//   - `apply` exits 0 and every node is Ready in the Kubernetes API, a1 with its label and its
//     taint from registration on, a2 with neither;
//   - K3s's packet filtering went into nftables: kube-proxy's KUBE-SERVICES chain and flannel's
//     FLANNEL-FWD chain are in the server's `nft list ruleset`, and no KUBE- or FLANNEL rule is
//     in the legacy (x_tables) tables that trixie's iptables-legacy still reads;
//   - an immediate re-run is `unchanged` for every host and restarts no unit;
//   - `doctor` exits 0 on the healthy cluster (systemd 257's unit state and journal read);
//   - `reset` leaves no K3s binary, unit, data directory or network interface behind.
func TestRealTrixie(t *testing.T) {
	c := newRealClusterOpts(t, 3, clusterOpts{kind: harness.KindTrixie})
	for i, host := range c.hosts {
		got := c.exec(i, "sh", "-c", `cat /etc/debian_version; systemctl --version | head -n 1; iptables --version`)
		t.Logf("%s: %s", host.Name, strings.ReplaceAll(strings.TrimSpace(got), "\n", "; "))
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "13.") || !strings.HasPrefix(lines[1], "systemd 257") ||
			!strings.Contains(lines[2], "(nf_tables)") {
			t.Fatalf("%s is not a Debian 13 host with systemd 257 and iptables-nft only:\n%s", host.Name, got)
		}
	}
	c.writeInventory(realServerAgents, nil)

	r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", c.dir+"/real.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	t.Logf("apply on Debian 13: %s", r.duration.Round(time.Second))
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
	if a1 := nodes["a1"]; a1.Labels["site"] != "plant-7" || !hasTaint(&a1, "dedicated=edge:NoSchedule") {
		t.Errorf("a1 has taints %v, site=%q; want dedicated=edge:NoSchedule and plant-7", a1.Spec.Taints, a1.Labels["site"])
	}
	if a2 := nodes["a2"]; hasTaint(&a2, "dedicated=edge:NoSchedule") {
		t.Error("a2 carries a1's taint")
	}
	ruleset := c.exec(0, "nft", "list", "ruleset")
	for _, chain := range []string{"chain KUBE-SERVICES", "chain FLANNEL-FWD"} {
		if !strings.Contains(ruleset, chain) {
			t.Errorf("cp1's nftables ruleset has no %s", chain)
		}
	}
	if legacy := c.exec(0, "sh", "-c", "iptables-legacy-save 2>/dev/null | grep -E -- '-A (KUBE|FLANNEL)' || true"); strings.TrimSpace(legacy) != "" {
		t.Errorf("cp1 has K3s rules in the legacy iptables tables:\n%s", legacy)
	}

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

	d := c.k3strap(3*time.Minute, "doctor")
	defer d.dump(t)
	if d.code != 0 {
		t.Errorf("doctor on the healthy Debian 13 cluster exited %d, findings %v", d.code, keys(d.findings()))
	}

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
