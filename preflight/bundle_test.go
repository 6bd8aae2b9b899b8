// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"testing"

	"github.com/k3strap/k3strap/airgapbundle"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
)

// TestArchBundle: a host whose architecture the airgap bundle lacks is named with the bundle
// and what it holds.
func TestArchBundle(t *testing.T) {
	air := cp1w1()
	air.Spec.K3s.Install = inventory.Airgap
	air.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: "/cache/amd64/k3s"}}
	air.Bundle = &inventory.Bundle{Path: "/site/site.tar", Manifest: &airgapbundle.Manifest{Files: []airgapbundle.File{{Role: airgapbundle.RoleBinary, Arch: "amd64", Path: "amd64/k3s"}}}}
	arm := func(f *facts.Host) { f.Machine, f.Arch = "aarch64", "arm64" }
	runCases(t, "Arch", []checkCase{
		{"bundle has the arch", input(air, nil), nil},
		{"bundle lacks the arch", input(air, only("w1", arm)), []want{
			errW("w1", "the airgap bundle /site/site.tar has no artifacts for arm64", "aarch64", "it holds amd64").withFix("k3strap bundle", "spec.k3s.airgap.arm64", "k3s-arm64", "v1.36.3+k3s1"),
		}},
	})
}
