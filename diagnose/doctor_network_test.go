// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
)

// TestDoctorVXLANBlocked judges evidence captured from a real K3s v1.36.3 cluster (cp1, a1,
// a2 on throw-away hosts) in which a1's network namespace has an nftables rule dropping UDP
// 8472: doctor names the rule, the nodes it cuts a1 off from, the command that removes it,
// and flannel's state on the others (their FDB entries point at a1's public-ip).
func TestDoctorVXLANBlocked(t *testing.T) {
	var nodes corev1.NodeList
	b, err := os.ReadFile("testdata/vxlan-blocked/nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &nodes); err != nil {
		t.Fatal(err)
	}
	in := Input{View: facts.ClusterView{Nodes: nodes.Items}}
	for i, n := range []string{"cp1", "a1", "a2"} {
		out, err := os.ReadFile(fmt.Sprintf("testdata/vxlan-blocked/node-h%d.txt", i+1))
		if err != nil {
			t.Fatal(err)
		}
		f := facts.ParseDoctorNode(out)
		in.Nodes = append(in.Nodes, NodeEvidence{Host: n, Node: n, Address: fmt.Sprintf("10.129.0.%d", 11+i), Facts: &f})
	}
	fs := checkNetwork(&in)
	if len(fs) != 1 {
		for _, f := range fs {
			t.Logf("%s %s %s: %s", f.Severity, f.ID, f.Host, f.Title)
		}
		t.Fatalf("%d findings, want one", len(fs))
	}
	f := fs[0]
	if f.ID != "NodePaths" || f.Severity != finding.Error || f.Host != "a1" {
		t.Errorf("%s %s %s", f.ID, f.Severity, f.Host)
	}
	for _, want := range []string{"from a2 and cp1 to a1", "UDP 8472 (flannel VXLAN)", "`udp dport 8472 counter packets 0 bytes 0 drop` (nftables table inet k3i3block chain input, handle 2)"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, f.Message)
		}
	}
	if !slices.Equal(f.Commands, []string{"nft delete rule inet k3i3block input handle 2"}) {
		t.Errorf("commands %q", f.Commands)
	}
	var ev []string
	for _, e := range f.Evidence {
		ev = append(ev, e.Source+" | "+e.Text)
	}
	all := strings.Join(ev, "\n")
	for _, want := range []string{"kubectl get node a1 | flannel.alpha.coreos.com/public-ip: 10.129.0.12", "cp1: bridge fdb show dev flannel.1 | cp1 sends a1's VXLAN traffic to 10.129.0.12", "a2: bridge fdb show dev flannel.1 | a2 sends a1's VXLAN traffic to 10.129.0.12"} {
		if !strings.Contains(all, want) {
			t.Errorf("evidence lacks %q:\n%s", want, all)
		}
	}
}
