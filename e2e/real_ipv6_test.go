// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// dualStackConfig is the K3s dual-stack setting of docs/ipv6.md: a range of each family for
// pods and for services, IPv4 first (the primary family).
const dualStackConfig = "      cluster-cidr: 10.42.0.0/16,fd00:42::/56\n      service-cidr: 10.43.0.0/16,fd00:43::/112"

// TestRealDualStack (real K3s): 1 server + 1 agent on hosts with an IPv4 and an IPv6 address
// (the harness's opt-in ULA), cluster-cidr and service-cidr of both families and node-ip with
// both addresses. Preflight passes; apply brings every node Ready; each node carries a PodCIDR
// of each family and an InternalIP of each family, the ones node-ip named. A node-ip without
// the IPv6 address is refused by preflight first, naming the host and the setting.
func TestRealDualStack(t *testing.T) {
	c := newRealCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := []string{"cp1", "a1"}
	nodeIP := map[string]string{}
	want := map[string][2]string{}
	for i, h := range c.hosts {
		if err := c.h.IPv6(ctx, h.Index); err != nil {
			t.Fatal(err)
		}
		v6 := c.h.IPv6Addr(h.Index)
		nodeIP[names[i]] = "          node-ip: [" + h.Address + ", \"" + v6 + "\"]"
		want[names[i]] = [2]string{h.Address, v6}
	}

	// node-ip of one family on a dual-stack cluster: refused before anything is installed.
	c.writeInventory(netInv, map[string]any{"config": dualStackConfig, "hostConfig": map[string]string{
		"cp1": nodeIP["cp1"], "a1": "          node-ip: " + c.hosts[1].Address}})
	bad := c.k3strap(2*time.Minute, "preflight")
	if f := bad.findingsOf("IPFamilies"); bad.code != 3 || len(f) != 1 || f[0].Host != "a1" ||
		!strings.Contains(findingText(f[0]), "spec.hosts[1].k3s.config.node-ip") {
		bad.dump(t)
		t.Fatalf("node-ip without IPv6: exit %d, IPFamilies %v", bad.code, f)
	}

	c.writeInventory(netInv, map[string]any{"config": dualStackConfig, "hostConfig": nodeIP})
	start := time.Now()
	r := c.k3strap(10*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	t.Logf("dual-stack apply, 1 server + 1 agent: %s", time.Since(start).Round(time.Second))

	c.waitDualStack(t, names, want)
}

// nodeDualStack reports whether n is Ready with a PodCIDR of each family and InternalIPs
// equal to want (IPv4, IPv6); report logs what is missing.
func nodeDualStack(t *testing.T, n *corev1.Node, want [2]string, report bool) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	fams := map[string]bool{}
	for _, s := range n.Spec.PodCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			fams[map[bool]string{true: "4", false: "6"}[p.Addr().Is4()]] = true
		}
	}
	var internal []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	ok := ready && fams["4"] && fams["6"] && len(internal) == 2 && internal[0] == want[0] && internal[1] == want[1]
	if ok {
		t.Logf("%s: Ready, PodCIDRs %v, InternalIPs %v", n.Name, n.Spec.PodCIDRs, internal)
	} else if report {
		t.Errorf("%s: ready %v, PodCIDRs %v, InternalIPs %v (want %v)", n.Name, ready, n.Spec.PodCIDRs, internal, want)
	}
	return ok
}

// TestRealDualStackAutoNodeIP (real K3s): the same dual-stack cluster without node-ip: K3s
// picks an address of each family from the default routes' interface itself, which is why
// preflight IPFamilies only asks such hosts for an address of each family.
func TestRealDualStackAutoNodeIP(t *testing.T) {
	c := newRealCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := []string{"cp1", "a1"}
	want := map[string][2]string{}
	for i, h := range c.hosts {
		if err := c.h.IPv6(ctx, h.Index); err != nil {
			t.Fatal(err)
		}
		want[names[i]] = [2]string{h.Address, c.h.IPv6Addr(h.Index)}
	}
	c.writeInventory(netInv, map[string]any{"config": dualStackConfig})
	r := c.k3strap(10*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	c.waitDualStack(t, names, want)
}

// waitDualStack waits (at most 3 minutes) until every node in names is Ready with the PodCIDR
// and InternalIP pair want gives it (nodeDualStack), read through the first server's kubectl.
func (c *testCluster) waitDualStack(t *testing.T, names []string, want map[string][2]string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for _, name := range names {
		for {
			var n corev1.Node
			err := json.Unmarshal([]byte(c.exec(0, "k3s", "kubectl", "get", "node", name, "-o", "json")), &n)
			if err == nil && nodeDualStack(t, &n, want[name], time.Now().After(deadline)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not Ready with both families by the deadline (%v)", name, err)
			}
			time.Sleep(2 * time.Second)
		}
	}
}
