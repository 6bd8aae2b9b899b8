// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// checkSELinux: K3s on a host that enforces SELinux needs the k3s-selinux policy (and runs
// with selinux: true, which k3strap renders): without it containerd's files get the wrong
// labels and pods fail (docs/k3s.md, SELinux). An error when SELinux enforces, the policy is
// not installed and nothing in this run will install it: online installs on RPM-based hosts
// get it from the official script (rpm.rancher.io); airgap installs get the RPM named for the
// host's distribution in spec.k3s.selinuxRPMs. Permissive without the policy is a warning.
func checkSELinux(in *Input) []finding.Finding {
	c := in.Cluster
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		mode := f.SELinux.Mode()
		if mode == "disabled" || f.SELinux.Policy != "" {
			return nil
		}
		dist := f.SELinuxDistribution()
		will, how := selinuxPolicySource(c, dist)
		if will {
			return []finding.Finding{warnf(h.Name, "nothing to do; to avoid the install-time step, install k3s-selinux on the host beforehand",
				"SELinux is %s (%s) and the k3s-selinux policy is not installed yet: %s installs it", mode, f.SELinux.Source(), how)}
		}
		fix := selinuxFix(c, dist)
		if mode == "permissive" {
			return []finding.Finding{warnf(h.Name, fix,
				"SELinux is permissive (%s) and the k3s-selinux policy is not installed: switching to enforcing later breaks K3s's containers", f.SELinux.Source())}
		}
		return []finding.Finding{errorf(h.Name, fix,
			"SELinux is enforcing (%s) but the k3s-selinux policy is not installed (rpm -q k3s-selinux and semodule -l find none), and %s: K3s's containers would run with the wrong SELinux labels",
			f.SELinux.Source(), why(c, dist))}
	})
}

// selinuxPolicySource says whether this run installs k3s-selinux on a host of distribution dist.
func selinuxPolicySource(c *inventory.Cluster, dist string) (bool, string) {
	if dist == "" {
		return false, ""
	}
	if c.Spec.K3s.Install == inventory.Airgap {
		if rpm := c.Spec.K3s.SELinuxRPMs[dist]; rpm != "" {
			return true, "k3strap uploads " + rpm + " (spec.k3s.selinuxRPMs." + dist + ") and"
		}
		return false, ""
	}
	return true, "the official install script (online) from rpm.rancher.io"
}

func why(c *inventory.Cluster, dist string) string {
	switch {
	case dist == "":
		return "this distribution has no k3s-selinux RPM that k3strap could install"
	case c.Spec.K3s.Install == inventory.Airgap:
		return fmt.Sprintf("spec.k3s.selinuxRPMs has no RPM for %s (an airgap install cannot download it)", dist)
	}
	return "nothing would install it"
}

func selinuxFix(c *inventory.Cluster, dist string) string {
	if dist != "" && c.Spec.K3s.Install == inventory.Airgap {
		return fmt.Sprintf("download k3s-selinux-*.%s.noarch.rpm from https://github.com/k3s-io/k3s-selinux/releases and name it in spec.k3s.selinuxRPMs.%s (or install it on the host: dnf install ./k3s-selinux-*.rpm)", dist, dist)
	}
	return "install the k3s-selinux policy on the host (https://github.com/k3s-io/k3s-selinux; RPM hosts: dnf install k3s-selinux from rpm.rancher.io), or set SELinux to permissive (setenforce 0 and SELINUX=permissive in /etc/selinux/config)"
}
