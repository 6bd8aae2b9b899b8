package preflight

import (
	"fmt"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/inventory"
)

// checkServerCount: embedded etcd keeps quorum with a majority of servers, so an even number
// of servers tolerates no more failures than one fewer (2 servers: none) — a warning
// (docs/k3s.md#ha).
func checkServerCount(in *Input) []Finding {
	servers := in.Cluster.Servers()
	n := len(servers)
	if n < 2 || n%2 == 1 {
		return nil
	}
	var out []Finding
	for _, h := range servers {
		out = append(out, warnf(h.Name,
			fmt.Sprintf("use %d or %d servers (an odd number), or make the extra hosts agents", n-1, n+1),
			"the inventory has %d servers: embedded etcd needs a majority (%d) to work, so %d servers survive no more failures than %d",
			n, n/2+1, n, n-1))
	}
	return out
}

// criticalKeys are the K3s settings every server must share, or a joining server is refused
// with "critical configuration value mismatch" (docs/k3s.md; K3s CriticalControlArgs).
var criticalKeys = []string{"cluster-cidr", "service-cidr", "cluster-dns", "cluster-domain", "disable",
	"flannel-backend", "disable-network-policy", "disable-kube-proxy", "egress-selector-mode", "secrets-encryption",
	"disable-cloud-controller", "disable-helm-controller", "disable-scheduler"}

// criticalValues returns the rendered value of each critical key for h ("" when unset).
func criticalValues(c *inventory.Cluster, h *inventory.Host) map[string]string {
	cfg := c.HostConfig(h)
	vals := map[string]string{
		"cluster-cidr":             strings.Join(cfg.ClusterCIDR, ","),
		"service-cidr":             strings.Join(cfg.ServiceCIDR, ","),
		"cluster-dns":              strings.Join(cfg.ClusterDNS, ","),
		"cluster-domain":           cfg.ClusterDomain,
		"flannel-backend":          cfg.FlannelBackend,
		"disable-network-policy":   boolText(cfg.DisableNetworkPolicy),
		"disable-kube-proxy":       boolText(cfg.DisableKubeProxy),
		"secrets-encryption":       boolText(cfg.SecretsEncryption),
		"disable-cloud-controller": boolText(cfg.DisableCloudController),
		"disable-helm-controller":  boolText(cfg.DisableHelmController),
	}
	d := append([]string(nil), cfg.Disable...)
	sort.Strings(d)
	vals["disable"] = strings.Join(d, ",")
	for _, k := range []string{"egress-selector-mode", "disable-scheduler"} {
		if v, ok := cfg.Extra[k]; ok {
			vals[k] = fmt.Sprint(v)
		}
	}
	return vals
}

func boolText(b *bool) string {
	if b == nil {
		return ""
	}
	return fmt.Sprint(*b)
}

// checkCriticalConfig: before anything is installed, every server's critical settings are
// compared with the first server's; each differing value is shown per server.
func checkCriticalConfig(in *Input) []Finding {
	servers := in.Cluster.Servers()
	if len(servers) < 2 {
		return nil
	}
	first := servers[0]
	want := criticalValues(in.Cluster, first)
	var out []Finding
	for _, h := range servers[1:] {
		got := criticalValues(in.Cluster, h)
		var diffs []string
		for _, k := range criticalKeys {
			if got[k] != want[k] {
				diffs = append(diffs, fmt.Sprintf("%s: %q here, %q on %s", k, got[k], want[k], first.Name))
			}
		}
		if len(diffs) > 0 {
			out = append(out, errorf(h.Name,
				"set these keys in spec.k3s.config (cluster-wide), not in a server's own k3s.config",
				"critical K3s settings differ from the first server's, so K3s would refuse the join (critical configuration value mismatch): %s",
				strings.Join(diffs, "; ")))
		}
	}
	return out
}
