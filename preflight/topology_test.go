// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

func TestServerCount(t *testing.T) {
	two := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("w1", inventory.RoleAgent))
	three := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("cp3", inventory.RoleServer))
	runCases(t, "ServerCount", []checkCase{
		{"single server", input(cp1w1(), nil), nil},
		{"three servers", input(three, nil), nil},
		{"two servers", input(two, nil), []want{
			warnW("cp1", "2 servers", "majority (2)").withFix("1 or 3 servers"),
			warnW("cp2", "2 servers"),
		}},
	})
}

func TestCriticalConfig(t *testing.T) {
	ok := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("cp3", inventory.RoleServer))
	ok.Spec.K3s.Config.ClusterCIDR = inventory.StringList{"10.50.0.0/16"}
	bad := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer), host("cp3", inventory.RoleServer))
	bad.Spec.Hosts[2].K3s.Config.ClusterCIDR = inventory.StringList{"10.99.0.0/16"}
	bad.Spec.Hosts[2].K3s.Config.Disable = inventory.StringList{"traefik"} // only servicelb is critical
	lb := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer))
	lb.Spec.Hosts[1].K3s.Config.Disable = inventory.StringList{"traefik", "servicelb"}
	// disable-scheduler is not one of K3s's CriticalControlArgs: servers may differ.
	sched := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer))
	sched.Spec.Hosts[1].K3s.Config.Extra = map[string]any{"disable-scheduler": true}
	reg := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer))
	reg.Spec.Hosts[1].K3s.Config.EmbeddedRegistry = inventory.Bool(true)
	// Explicit K3s defaults equal absent keys.
	defaults := newCluster(host("cp1", inventory.RoleServer), host("cp2", inventory.RoleServer))
	defaults.Spec.Hosts[1].K3s.Config.FlannelBackend = "vxlan"
	defaults.Spec.Hosts[1].K3s.Config.ServiceCIDR = inventory.StringList{"10.43.0.0/16"}
	defaults.Spec.Hosts[1].K3s.Config.Extra = map[string]any{"egress-selector-mode": "agent"}
	runCases(t, "CriticalConfig", []checkCase{
		{"cluster-wide values", input(ok, nil), nil},
		{"per-server override", input(bad, nil), []want{
			errW("cp3", `cluster-cidr: "10.99.0.0/16" here, "10.42.0.0/16" (K3s's default) on cp1`, "critical configuration value mismatch").withFix("spec.k3s.config"),
		}},
		{"servicelb", input(lb, nil), []want{errW("cp2", `disable: "servicelb disabled" here, "servicelb enabled" (K3s's default) on cp1`)}},
		{"disable-scheduler differs", input(sched, nil), nil},
		{"embedded-registry differs", input(reg, nil), []want{errW("cp2", `embedded-registry: "true" here, "false" (K3s's default) on cp1`)}},
		{"explicit defaults", input(defaults, nil), nil},
	})
}
