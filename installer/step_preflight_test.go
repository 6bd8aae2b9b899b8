// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"slices"
	"testing"

	"github.com/k3strap/k3strap/finding"
)

// A host that fails several preflight checks is summarised with every one of them, not the
// last; the failure names every check once.
func TestFailedChecksNamesEveryCheck(t *testing.T) {
	errs := []finding.Finding{
		{ID: "Swap", Host: "cp1"},
		{ID: "DiskSpace", Host: "w1"},
		{ID: "Ports", Host: "cp1"},
		{ID: "Swap", Host: "w1"},
		{ID: "Ports", Host: "cp1"}, // a second finding of the same check
	}
	checks, hosts, byHost := failedChecks(errs)
	if want := []string{"Swap", "DiskSpace", "Ports"}; !slices.Equal(checks, want) {
		t.Errorf("checks %v, want %v", checks, want)
	}
	if want := []string{"cp1", "w1"}; !slices.Equal(hosts, want) {
		t.Errorf("hosts %v, want %v", hosts, want)
	}
	if want := []string{"Swap", "Ports"}; !slices.Equal(byHost["cp1"], want) {
		t.Errorf("cp1 %v, want %v", byHost["cp1"], want)
	}
	if want := []string{"DiskSpace", "Swap"}; !slices.Equal(byHost["w1"], want) {
		t.Errorf("w1 %v, want %v", byHost["w1"], want)
	}
}
