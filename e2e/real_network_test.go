// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// doctorText is a doctor finding with its evidence, fixes and commands, for matching.
func doctorText(f events.DoctorFinding) string {
	s := []string{f.Node + ": " + f.Title, f.Message}
	for _, e := range f.Evidence {
		s = append(s, "evidence: "+e.Text+" ["+e.Source+"]")
	}
	for _, x := range f.Fixes {
		s = append(s, "fix: "+x)
	}
	for _, c := range f.Commands {
		s = append(s, "$ "+c)
	}
	return strings.Join(s, "\n")
}

// nodeAddrs returns a node's InternalIP and flannel public-ip annotation, read on the
// first server.
func (c *testCluster) nodeAddrs(name string) (internal, public string) {
	c.t.Helper()
	var n corev1.Node
	if err := json.Unmarshal([]byte(c.exec(0, "k3s", "kubectl", "get", "node", name, "-o", "json")), &n); err != nil {
		c.t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	return internal, n.Annotations["flannel.alpha.coreos.com/public-ip"]
}

// TestRealVXLANBlocked (real K3s): 1 server + 2 agents up; then a real nftables rule in a1's
// network namespace drops UDP 8472. doctor names the rule, the nodes it cuts a1 off from and
// the command that removes it, with flannel's own state as evidence (a1's public-ip
// annotation, the others' FDB entries for a1's VTEP); the port is held by the kernel's VXLAN
// socket, so this is judged from the rulesets, not probed. Without the rule the finding is gone.
func TestRealVXLANBlocked(t *testing.T) {
	c := newRealCluster(t, 3)
	c.writeInventory(netInv, nil)
	r := c.k3strap(10*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	a1 := c.hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Nft(ctx, a1.Index, blockTable("udp", 8472), "-f", "-"); err != nil {
		t.Fatal(err)
	}
	d := c.k3strap(3*time.Minute, "doctor")
	defer d.dump(t)
	f, ok := d.findings()["NodePaths@a1"]
	if !ok {
		for k := range d.findings() {
			t.Logf("finding %s", k)
		}
		t.Fatalf("no NodePaths finding for a1 (doctor exit %d)", d.code)
	}
	text := doctorText(f)
	for _, want := range []string{
		"UDP 8472 (flannel VXLAN)", "to a1", "cp1", "a2",
		"udp dport 8472 counter packets", "nftables table inet k3strap_test_block chain input",
		"flannel.alpha.coreos.com/public-ip: " + a1.Address,
		"cp1 sends a1's VXLAN traffic to " + a1.Address, "a2 sends a1's VXLAN traffic to " + a1.Address,
		"nft delete rule inet k3strap_test_block input handle",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("finding lacks %q:\n%s", want, text)
		}
	}
	if f.Severity != "error" || d.code != 8 {
		t.Errorf("severity %s, doctor exit %d; want an error and exit 8", f.Severity, d.code)
	}
	if !strings.HasPrefix(f.Evidence[0].Source, "a1: ") {
		t.Errorf("first evidence from %q, want a1's ruleset", f.Evidence[0].Source)
	}
	if err := c.h.Nft(ctx, a1.Index, "", "delete", "table", "inet", "k3strap_test_block"); err != nil {
		t.Fatal(err)
	}
	d = c.k3strap(3*time.Minute, "doctor")
	for k := range d.findings() {
		if strings.HasPrefix(k, "NodePaths@") || strings.HasPrefix(k, "HostFirewall@") {
			t.Errorf("rule removed, still %s: %s", k, doctorText(d.findings()[k]))
		}
	}
}

// TestRealMultiHomed (real K3s): a1 has two interfaces, eth0 with its inventory address and
// wan0 with the default route. Preflight warns with the node-ip / flannel-iface keys, and its
// path check shows the other node cannot reach the address K3s would pick; installed anyway,
// the real binary registers a1 with wan0's address (InternalIP and flannel public-ip) — K3s's
// rule — and doctor says so; with the keys set preflight passes and a1 registers with its
// inventory address.
func TestRealMultiHomed(t *testing.T) {
	c := newRealCluster(t, 2)
	a1 := c.hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Uplink(ctx, a1.Index); err != nil {
		t.Fatal(err)
	}
	wan := c.h.UplinkNet() + "." + strconv.Itoa(10+a1.Index)
	c.writeInventory(netInv, nil)

	p := c.k3strap(2*time.Minute, "preflight")
	defer p.dump(t)
	na := p.findingsOf("NodeAddress")
	if len(na) != 1 || na[0].Host != "a1" || na[0].Finding.Severity != "warning" {
		t.Fatalf("NodeAddress findings %v", na)
	}
	text := findingText(na[0])
	for _, want := range []string{"InternalIP " + wan, "wan0", "node-ip: " + a1.Address + " and flannel-iface: eth0", "spec.hosts[1].k3s.config.node-ip"} {
		if !strings.Contains(text, want) {
			t.Errorf("NodeAddress lacks %q:\n%s", want, text)
		}
	}
	paths := ""
	for _, f := range p.findingsOf("NodePaths") {
		paths += findingText(f) + "\n"
	}
	if !strings.Contains(paths, "cp1 cannot reach a1") || !strings.Contains(paths, "("+wan+")") {
		t.Errorf("the path check does not show a1's wan0 address out of reach:\n%s", paths)
	}

	// Installed as it is: K3s takes the default route's interface.
	r := c.k3strap(10*time.Minute, "apply", "--ignore-preflight-errors=NodePaths")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	// The node turns Ready before its flannel has taken its lease and annotated it (seen once:
	// an empty public-ip right after apply): the annotation is waited for, bounded.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		in, pub := c.nodeAddrs("a1")
		if in == wan && pub == wan {
			break
		}
		if pub != "" || time.Now().After(deadline) {
			t.Errorf("without node-ip: InternalIP %s, public-ip %s; want wan0's %s for both (K3s's rule)", in, pub, wan)
			break
		}
	}
	d := c.k3strap(3*time.Minute, "doctor")
	defer d.dump(t)
	if f, ok := d.findings()["NodeAddress@a1"]; !ok || !strings.Contains(doctorText(f), "InternalIP "+wan) {
		t.Errorf("doctor: NodeAddress@a1 %v", ok)
	}

	// The keys preflight named.
	c.writeInventory(netInv, map[string]any{"hostConfig": map[string]string{"a1": "          node-ip: " + a1.Address + "\n          flannel-iface: eth0"}})
	p2 := c.k3strap(2*time.Minute, "preflight")
	defer p2.dump(t)
	if p2.code != 0 || len(p2.findingsOf("NodeAddress")) > 0 || len(p2.findingsOf("NodePaths")) > 0 {
		t.Fatalf("with node-ip and flannel-iface: exit %d", p2.code)
	}
	r2 := c.k3strap(10*time.Minute, "apply")
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("apply with the keys exited %d", r2.code)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		in, pub := c.nodeAddrs("a1")
		if in == a1.Address && pub == a1.Address {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the keys: InternalIP %s, public-ip %s; want %s", in, pub, a1.Address)
		}
		time.Sleep(time.Second)
	}
}
