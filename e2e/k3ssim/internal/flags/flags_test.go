// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package flags

import "testing"

func TestLoad(t *testing.T) {
	tb := Load()
	if k, ok := tb.Lookup(Server, "cluster-cidr"); !ok || k != List {
		t.Errorf("cluster-cidr: %q %v", k, ok)
	}
	if _, ok := tb.Lookup(Agent, "cluster-init"); ok {
		t.Error("cluster-init is not an agent flag")
	}
	if k, ok := tb.Lookup(Agent, "node-taint+"); !ok || k != List {
		t.Errorf("node-taint+: %q %v", k, ok)
	}
}
