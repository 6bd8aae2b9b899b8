// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package templates

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
)

// TestIPv6ConfigThroughRender takes IPv6-only and dual-stack inventories (addresses with and
// without brackets) through load, HostConfig and the config.yaml render: the join URL has the
// brackets once, tls-san the bare address, and node-ip, cluster-cidr and service-cidr reach
// K3s as lists of both families (docs/ipv6.md).
func TestIPv6ConfigThroughRender(t *testing.T) {
	cases := []struct {
		name, inv string
		// per host: wanted keys of the rendered config.yaml (a list value joined with ",")
		want map[string]map[string]string
	}{
		{"ipv6-only", `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: v6}
spec:
  k3s:
    config:
      cluster-cidr: fd00:42::/56
      service-cidr: fd00:43::/112
      flannel-ipv6-masq: true
  hosts:
    - {name: cp1, address: "[fd00:123::10]", role: server}
    - {name: w1, address: "fd00:123::11", role: agent}
`, map[string]map[string]string{
			"cp1": {"tls-san": "fd00:123::10", "cluster-cidr": "fd00:42::/56", "service-cidr": "fd00:43::/112", "flannel-ipv6-masq": "true"},
			"w1":  {"server": "https://[fd00:123::10]:6443"},
		}},
		{"ipv6 api endpoint", `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: v6ep}
spec:
  k3s:
    apiEndpoint: {address: "[fd00:123::100]"}
    config:
      cluster-cidr: fd00:42::/56
      service-cidr: fd00:43::/112
  hosts:
    - {name: cp1, address: "fd00:123::10", role: server}
    - {name: w1, address: "fd00:123::11", role: agent}
`, map[string]map[string]string{
			"cp1": {"tls-san": "fd00:123::10,fd00:123::100"},
			"w1":  {"server": "https://[fd00:123::100]:6443"},
		}},
		{"dual-stack", `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: dual}
spec:
  k3s:
    config:
      cluster-cidr: 10.42.0.0/16,fd00:42::/56
      service-cidr: 10.43.0.0/16,fd00:43::/112
  hosts:
    - name: cp1
      address: 192.0.2.10
      role: server
      k3s: {config: {node-ip: [192.0.2.10, "fd00:123::10"]}}
    - name: w1
      address: "fd00:123::11"
      role: agent
      k3s: {config: {node-ip: "192.0.2.11,fd00:123::11"}}
`, map[string]map[string]string{
			"cp1": {"node-ip": "192.0.2.10,fd00:123::10", "cluster-cidr": "10.42.0.0/16,fd00:42::/56", "service-cidr": "10.43.0.0/16,fd00:43::/112", "tls-san": "192.0.2.10"},
			"w1":  {"node-ip": "192.0.2.11,fd00:123::11", "server": "https://192.0.2.10:6443"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := inventory.Parse("inv.yaml", []byte(tc.inv), inventory.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Spec.Hosts {
				h := &c.Spec.Hosts[i]
				out, err := K3sConfig(h.Role, c.HostConfig(h))
				if err != nil {
					t.Fatalf("%s: %v", h.Name, err)
				}
				if strings.Contains(string(out), "[[") || strings.Contains(string(out), "]]") {
					t.Errorf("%s: doubled brackets in\n%s", h.Name, out)
				}
				var got map[string]any
				if err := yaml.Unmarshal(out, &got); err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.want[h.Name] {
					if s := flat(got[k]); s != v {
						t.Errorf("%s: %s = %q, want %q\n%s", h.Name, k, s, v, out)
					}
				}
			}
		})
	}
}

// flat writes a YAML value as one string, lists joined with ",".
func flat(v any) string {
	switch x := v.(type) {
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, flat(e))
		}
		return strings.Join(parts, ",")
	case nil:
		return ""
	case bool:
		if x {
			return "true"
		}
		return "false"
	case string:
		return x
	}
	return strings.TrimSpace(func() string { b, _ := yaml.Marshal(v); return string(b) }())
}
