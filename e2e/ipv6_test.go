// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ipv6OnlyConfig makes the cluster IPv6-only: pod and service ranges of the IPv6 family only
// (docs/ipv6.md), so K3s would give every node its IPv6 address.
const ipv6OnlyConfig = "      cluster-cidr: fd00:42::/56\n      service-cidr: fd00:43::/112"

// TestIPv6PathCheck: hosts addressed by IPv6 in the inventory (the harness's opt-in ULA
// addresses; SSH, known_hosts and facts go over IPv6) and an IPv6-only cluster: preflight's
// path check probes over IPv6 and passes. A rule dropping TCP 6443 for IPv6 only (an ip6
// table: IPv4 still passes) on cp1 is then named — which it can only be if the probe went
// over IPv6. With the hosts then addressed by IPv4, the IPv6-only cluster's probes still go to
// the IPv6 addresses K3s would give the nodes. Simulator lane: nothing is installed.
func TestIPv6PathCheck(t *testing.T) {
	c := newCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range c.hosts {
		if err := c.h.IPv6(ctx, c.hosts[i].Index); err != nil {
			t.Fatal(err)
		}
		c.hosts[i].Address = c.h.IPv6Addr(c.hosts[i].Index)
	}
	c.writeInventory(netInv, map[string]any{"config": ipv6OnlyConfig})
	t.Logf("hosts: %s, %s", c.hosts[0].Address, c.hosts[1].Address)

	r := c.k3strap(2*time.Minute, "preflight")
	if r.code != 0 || len(r.findingsOf("NodePaths")) > 0 || len(r.findingsOf("IPFamilies")) > 0 || len(r.findingsOf("DefaultRoute")) > 0 {
		r.dump(t)
		t.Fatalf("IPv6-only, open paths: exit %d", r.code)
	}
	t.Logf("path check over IPv6, 2 hosts, all open: %s", r.pathsPhase(t).Round(time.Millisecond))
	c.probesGone(t)
	if kh := readFile(t, c.dir+"/known_hosts"); !strings.Contains(kh, c.hosts[0].Address) {
		t.Errorf("known_hosts has no entry for %s:\n%s", c.hosts[0].Address, kh)
	}

	const block6 = "table ip6 k3strap_test_block {\n  chain input { type filter hook input priority -5; policy accept;\n    tcp dport 6443 counter drop\n  }\n}\n"
	if err := c.h.Nft(ctx, c.hosts[0].Index, block6, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("IPv6 port dropped: exit %d, want 3", r.code)
	}
	np := r.findingsOf("NodePaths")
	if len(np) != 1 || np[0].Host != "cp1" {
		t.Fatalf("NodePaths findings %v, want one for cp1", np)
	}
	text := findingText(np[0])
	// the probe's own evidence names the IPv6 address it connected to
	for _, s := range []string{"a1 cannot reach cp1 on TCP 6443", "K3s supervisor and Kubernetes API",
		"a1 → cp1 (" + c.hosts[0].Address + ") TCP 6443: no answer", "table ip6 k3strap_test_block"} {
		if !strings.Contains(text, s) {
			t.Errorf("finding lacks %q:\n%s", s, text)
		}
	}
	t.Logf("finding:\n%s", text)
	c.probesGone(t)

	// The same IPv6-only cluster with the hosts reached over IPv4: K3s would still give the
	// nodes their IPv6 addresses (the cluster's family), so that is what the path check probes
	// and the ip6-only rule is still found.
	v6cp1 := c.hosts[0].Address
	for i := range c.hosts {
		c.hosts[i].Address = c.h.PublicNet() + "." + strconv.Itoa(10+c.hosts[i].Index)
	}
	c.writeInventory(netInv, map[string]any{"config": ipv6OnlyConfig})
	r4 := c.k3strap(2*time.Minute, "preflight")
	defer r4.dump(t)
	np = r4.findingsOf("NodePaths")
	if r4.code != 3 || len(np) != 1 || !strings.Contains(findingText(np[0]), "a1 → cp1 ("+v6cp1+") TCP 6443") {
		t.Fatalf("IPv4 inventory addresses, IPv6-only cluster: exit %d, NodePaths %v", r4.code, np)
	}
	c.probesGone(t)
}
