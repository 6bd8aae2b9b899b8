// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"testing"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
)

func TestCheckSELinux(t *testing.T) {
	online := newCluster(host("cp1", inventory.RoleServer))
	airgap := newCluster(host("cp1", inventory.RoleServer))
	airgap.Spec.K3s.Install = inventory.Airgap
	airgapRPM := newCluster(host("cp1", inventory.RoleServer))
	airgapRPM.Spec.K3s.Install = inventory.Airgap
	airgapRPM.Spec.K3s.SELinuxRPMs = map[string]string{"el9": "k3s-selinux.el9.rpm"}
	rhel := func(mode, policy string) func(string, *facts.Host) {
		return func(_ string, f *facts.Host) {
			f.OS = facts.OSRelease{ID: "rocky", IDLike: "rhel centos fedora", VersionID: "9.4"}
			f.SELinux = facts.SELinux{Getenforce: mode, Policy: policy}
		}
	}
	debianEnforcing := func(_ string, f *facts.Host) { f.SELinux = facts.SELinux{Enforce: "1"} }
	runCases(t, "SELinux", []checkCase{
		{"disabled", input(online, nil), nil},
		{"enforcing with policy", input(airgap, rhel("Enforcing", "rpm")), nil},
		{"enforcing online rpm host: the script installs it", input(online, rhel("Enforcing", "")), []want{warnW("cp1", "official install script")}},
		{"enforcing airgap with RPM", input(airgapRPM, rhel("Enforcing", "")), []want{warnW("cp1", "selinuxRPMs.el9")}},
		{"enforcing airgap without RPM", input(airgap, rhel("Enforcing", "")), []want{errW("cp1", "enforcing", "getenforce says Enforcing", "no RPM for el9").withFix("spec.k3s.selinuxRPMs.el9")}},
		{"enforcing non-RPM host", input(online, debianEnforcing), []want{errW("cp1", "/sys/fs/selinux/enforce is 1").withFix("k3s-selinux")}},
		{"permissive without policy", input(airgap, rhel("Permissive", "")), []want{warnW("cp1", "permissive")}},
	})
}
