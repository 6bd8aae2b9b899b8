// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestProxyValidation: every proxy field is validated at the position of its value or key,
// naming the host for a host's override; a password written into a URL is refused and never
// quoted.
func TestProxyValidation(t *testing.T) {
	f := "testdata/proxy/bad.yaml"
	got := loadErrors(t, f, LoadOptions{SkipFileChecks: true})
	checkErrors(t, f, got, []wantErr{
		{8, 3, "", "no proxy URL names a user", "http://USER@"},
		{9, 11, "", "the proxy URL has no scheme", "http://"},
		{10, 12, "", `scheme "socks5" is not supported`, "http://"},
		{11, 18, "", "not an environment variable name", "PROXY_PASSWORD"},
		{13, 9, "", "holds a comma or a space", "one host"},
		{14, 9, "", "the noProxy entry is a URL", "without scheme"},
		{23, 15, "a1", "port", "http://proxy.example.com:3128"},
		{23, 15, "a1", "has a path or query", "scheme://host:port"},
		{23, 15, "a1", "holds a password in clear", "passwordEnv"},
	})
	for _, e := range got {
		if strings.Contains(e.Error(), "hunter2") {
			t.Errorf("a message quotes the password: %v", e)
		}
	}
}

// TestProxyUserWithoutPassword: a user in the URL needs a password source; a password file
// must be private (the same rule as every secret file).
func TestProxyUserWithoutPassword(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "proxy-pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "cluster.yaml")
	body := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: proxied
spec:
  k3s:
    version: v1.36.3+k3s1
  proxy:
    http: http://alice@proxy.example.com:3128
  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
    - name: a1
      address: 10.0.0.2
      role: agent
      proxy:
        passwordFile: proxy-pw
`
	if err := os.WriteFile(inv, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got := loadErrors(t, inv, LoadOptions{})
	checkErrors(t, inv, got, []wantErr{
		{11, 7, "cp1", "names a user but no password source", "passwordEnv"},
		{18, 23, "a1", "proxy password file " + pw + " is readable by others", "chmod 600"},
	})
	if err := os.Chmod(pw, 0o600); err != nil {
		t.Fatal(err)
	}
	got = loadErrors(t, inv, LoadOptions{})
	checkErrors(t, inv, got, []wantErr{{11, 7, "cp1", "names a user but no password source", "passwordEnv"}})
}

// TestClusterNoProxy: the cluster's NO_PROXY reads the effective config (custom and
// dual-stack CIDRs, cluster-domain, node-ip), the endpoint and VIP, the local mirrors and
// the host's own extras.
func TestClusterNoProxy(t *testing.T) {
	c := &Cluster{Spec: Spec{
		K3s: K3s{Version: "v1.36.3+k3s1",
			Config:      K3sConfig{ClusterCIDR: StringList{"10.10.0.0/16,fd10::/56"}, ServiceCIDR: StringList{"10.11.0.0/16,fd11::/112"}, ClusterDomain: "k8s.example"},
			APIEndpoint: &APIEndpoint{Address: "k3s.example.com", KubeVIP: &KubeVIP{Address: "10.0.0.100", Interface: "eth0"}}},
		Registries: &Registries{Mirrors: map[string]RegistryMirror{"docker.io": {Endpoint: []string{"https://mirror.local:5000"}}}},
		Proxy:      &Proxy{HTTP: "http://proxy:3128", NoProxy: []string{".corp.example"}, LocalMirrors: true},
		Hosts: []Host{
			{Name: "cp1", Address: "192.168.1.10", Role: RoleServer, K3s: HostK3s{Config: K3sConfig{NodeIP: StringList{"10.0.0.1,fd00::1"}}}},
			{Name: "a1", Address: "192.168.1.11", Role: RoleAgent, Proxy: &Proxy{NoProxy: []string{"git.example"}}},
		},
	}}
	want := []string{"127.0.0.0/8", "::1", "localhost", "192.168.1.10", "10.0.0.1", "fd00::1", "192.168.1.11",
		"10.10.0.0/16", "fd10::/56", "10.11.0.0/16", "fd11::/112", ".svc", ".k8s.example", "k3s.example.com", "10.0.0.100"}
	if got := c.RequiredNoProxy(); !reflect.DeepEqual(got, want) {
		t.Errorf("RequiredNoProxy =\n %v\nwant\n %v", got, want)
	}
	if got := c.NoProxy(&c.Spec.Hosts[0]); !reflect.DeepEqual(got, append(append([]string(nil), want...), "mirror.local", ".corp.example")) {
		t.Errorf("NoProxy(cp1) = %v", got)
	}
	// a1's own noProxy replaces the cluster's extras; the proxy URL is inherited.
	if got := c.NoProxy(&c.Spec.Hosts[1]); !reflect.DeepEqual(got, append(append([]string(nil), want...), "mirror.local", "git.example")) {
		t.Errorf("NoProxy(a1) = %v", got)
	}
	if p := c.HostProxy(&c.Spec.Hosts[1]); p == nil || p.HTTP != "http://proxy:3128" {
		t.Errorf("HostProxy(a1) = %+v", p)
	}
	c.Spec.Proxy = nil
	if p := c.HostProxy(&c.Spec.Hosts[0]); p != nil {
		t.Errorf("HostProxy without a proxy = %+v", p)
	}
}

// TestHostProxyWithoutURL: a host's proxy section that ends up with no proxy URL (only
// noProxy, no spec.proxy) is an error at its key, naming the host.
func TestHostProxyWithoutURL(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "cluster.yaml")
	body := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: proxied
spec:
  k3s:
    version: v1.36.3+k3s1
  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
      proxy:
        noProxy: [.corp.example]
`
	if err := os.WriteFile(inv, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got := loadErrors(t, inv, LoadOptions{})
	checkErrors(t, inv, got, []wantErr{{12, 7, "cp1", "has no http or https proxy", "noProxy alone does nothing"}})
}
