// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"testing"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
)

// A unit that is still activating (K3s has not sent READY: an agent until its network is up,
// docs/k3s.md "Readiness of the unit") runs: a converge with nothing to change neither starts it
// nor reports a change, and says what activating means; a unit that is not running is started.
func TestChangesForActivatingUnit(t *testing.T) {
	s := &session{in: &Installer{cluster: &inventory.Cluster{}}}
	for _, tc := range []struct {
		state      string
		wantVerb   string
		activating bool
	}{
		{"active", "", false},
		{"activating", "", true},
		{"inactive", "start", false},
		{"failed", "start", false},
	} {
		hs := &hostState{
			host:  &inventory.Host{Name: "a1"},
			plan:  &plan.HostPlan{Service: "k3s-agent", Airgap: true},
			facts: &facts.Host{K3s: facts.K3sInstall{Service: "k3s-agent", ServiceEnabled: "enabled", ServiceActive: tc.state}},
		}
		ch := s.changesFor(hs)
		if ch.verb != tc.wantVerb || ch.activating != tc.activating || (tc.wantVerb == "" && ch.any()) {
			t.Errorf("%s: verb %q activating %v any %v, want verb %q activating %v", tc.state, ch.verb, ch.activating, ch.any(), tc.wantVerb, tc.activating)
		}
	}
	r := convergeResult{activating: "k3s-agent"}
	if r.changed() || r.status() != "unchanged" {
		t.Errorf("an activating unit left alone counts as a change: %v", r.status())
	}
	if d := r.describe(); d == "files, unit and service already match the inventory" {
		t.Errorf("describe does not say the unit is activating: %q", d)
	}
}
