// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"slices"
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

// TestBlockingTaintsFromTheModel: the taints FirstNodeTaints judges are the model's
// (inventory.Cluster.HostTaints) that block scheduling, in its order — also for node-taint in
// the K3s config, which only a cluster built in code carries.
func TestBlockingTaintsFromTheModel(t *testing.T) {
	mustTaint := func(s string) inventory.Taint {
		x, err := inventory.ParseTaint(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	c := &inventory.Cluster{Spec: inventory.Spec{
		K3s: inventory.K3s{Config: inventory.K3sConfig{NodeTaint: inventory.StringList{"soft=1:PreferNoSchedule", "hard=1:NoExecute"}}},
		Hosts: []inventory.Host{
			{Name: "cp1", Role: inventory.RoleServer, Taints: []inventory.Taint{mustTaint("a=b:NoSchedule"), mustTaint("hard=1:NoExecute")}},
			{Name: "a1", Role: inventory.RoleAgent},
		},
	}}
	want := map[string][]string{"cp1": {"hard=1:NoExecute", "a=b:NoSchedule"}, "a1": {"hard=1:NoExecute"}}
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		var got, model []string
		for _, x := range blockingTaints(c, h) {
			got = append(got, x.String())
		}
		for _, x := range c.HostTaints(h) {
			if x.Blocks() {
				model = append(model, x.String())
			}
		}
		if !slices.Equal(got, want[h.Name]) || !slices.Equal(got, model) {
			t.Errorf("%s: preflight judges %q, the model's blocking taints are %q, want %q", h.Name, got, model, want[h.Name])
		}
	}
}
