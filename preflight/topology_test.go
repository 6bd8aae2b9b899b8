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
	bad.Spec.Hosts[2].K3s.Config.Disable = inventory.StringList{"traefik"}
	runCases(t, "CriticalConfig", []checkCase{
		{"cluster-wide values", input(ok, nil), nil},
		{"per-server override", input(bad, nil), []want{
			errW("cp3", `cluster-cidr: "10.99.0.0/16" here, "" on cp1`, `disable: "traefik" here, "" on cp1`, "critical configuration value mismatch").withFix("spec.k3s.config"),
		}},
	})
}
