// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan_test

import (
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
)

// TestHostTaintsOneSource: for a table of hosts, the taints the plan renders into config.yaml
// (node-taint), drift's desired taints and the model's (inventory.Cluster.HostTaints) are the
// same list, in the same order; the first server's custom taints (Rancher, preflight F3) are
// the blocking, non-role ones of that list; DeclaredTaints is their sorted union. Validation
// refuses node-taint in the K3s config (hosts[].taints is where taints are declared), but a
// cluster built in code may carry it: the model takes it first, as K3s's config would.
func TestHostTaintsOneSource(t *testing.T) {
	inv := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: taints}
spec:
  k3s:
    version: v1.36.3+k3s1
  hosts:
    - {name: cp1, address: 10.0.0.1, role: server,
       taints: ["node-role.kubernetes.io/control-plane:NoSchedule", "dedicated=ingress:NoExecute", "gpu=true:NoSchedule"]}
    - {name: cp2, address: 10.0.0.2, role: server}
    - {name: a1, address: 10.0.0.3, role: agent}
    - {name: a2, address: 10.0.0.4, role: agent, taints: ["team=b:NoExecute", "team=b:NoSchedule"]}
`
	c, err := inventory.Parse("taints.yaml", []byte(inv), inventory.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What validation refuses but the model must still get right.
	c.Spec.K3s.Config.NodeTaint = inventory.StringList{"zone=edge:PreferNoSchedule", "gpu=true:NoSchedule"}
	c.Spec.Hosts[1].K3s.Config.NodeTaint = inventory.StringList{"only=cp2:NoSchedule", "not a taint"}
	want := map[string][]string{
		"cp1": {"zone=edge:PreferNoSchedule", "gpu=true:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule", "dedicated=ingress:NoExecute"},
		"cp2": {"only=cp2:NoSchedule"},
		"a1":  {"zone=edge:PreferNoSchedule", "gpu=true:NoSchedule"},
		"a2":  {"zone=edge:PreferNoSchedule", "gpu=true:NoSchedule", "team=b:NoExecute", "team=b:NoSchedule"},
	}
	pl := &plan.Planner{Cluster: c}
	strs := func(ts []inventory.Taint) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.String())
		}
		return out
	}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		model := strs(c.HostTaints(h))
		if !slices.Equal(model, want[h.Name]) {
			t.Errorf("%s: HostTaints %q, want %q", h.Name, model, want[h.Name])
		}
		p, err := pl.Plan(h, "amd64")
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			NodeTaint []string `yaml:"node-taint"`
		}
		if err := yaml.Unmarshal(p.ConfigYAML, &cfg); err != nil {
			t.Fatal(err)
		}
		if h.Name == "cp2" {
			// rendered as configured; the entry that does not parse is not a taint
			if w := []string{"only=cp2:NoSchedule", "not a taint"}; !slices.Equal(cfg.NodeTaint, w) {
				t.Errorf("cp2: the plan renders node-taint %q, want %q", cfg.NodeTaint, w)
			}
		} else if !slices.Equal(cfg.NodeTaint, model) {
			t.Errorf("%s: the plan renders node-taint %q, the model says %q", h.Name, cfg.NodeTaint, model)
		}
		if d := strs(drift.DesiredFor(c, h, nil).Taints); !slices.Equal(d, model) {
			t.Errorf("%s: drift desires %q, the model says %q", h.Name, d, model)
		}
	}
	if got, w := strs(c.FirstServerCustomTaints()), []string{"gpu=true:NoSchedule", "dedicated=ingress:NoExecute"}; !slices.Equal(got, w) {
		t.Errorf("first server's custom taints %q, want %q", got, w)
	}
	decl := strs(c.DeclaredTaints())
	wantDecl := []string{"dedicated=ingress:NoExecute", "gpu=true:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule",
		"only=cp2:NoSchedule", "team=b:NoExecute", "team=b:NoSchedule", "zone=edge:PreferNoSchedule"}
	if !slices.Equal(decl, wantDecl) {
		t.Errorf("DeclaredTaints %q, want %q", decl, wantDecl)
	}
}
