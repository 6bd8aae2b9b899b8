// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const fullToken = "Sup3rS3cretJoinT0ken"

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The full example inventory loads, with defaults applied, paths resolved relative to the file
// and "~" expanded, positions recorded, and labels' case kept.
func TestLoadFull(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c, err := Load("testdata/full.yaml", LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	dir := mustAbs(t, "testdata")
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", c.Metadata.Name, "edge-prod"},
		{"version", c.Spec.K3s.Version, "v1.31.4+k3s1"},
		{"install", c.Spec.K3s.Install, Airgap},
		{"cloudController default", c.Spec.K3s.CloudController, CloudControllerEmbedded},
		{"cni type", c.Spec.CNI.Type, CNIFlannel},
		{"kernelPolicy default", c.Spec.CNI.KernelPolicy, KernelPolicyStrict},
		{"ssh user", c.Spec.SSH.User, "ubuntu"},
		{"ssh port default", c.HostSSH(&c.Spec.Hosts[0]).Port, 22},
		{"connectTimeout", c.Spec.SSH.ConnectTimeout.D(), 15 * time.Second},
		{"keyPath ~", c.Spec.SSH.KeyPath, filepath.Join(home, ".ssh/id_ed25519")},
		{"knownHosts default", c.HostSSH(&c.Spec.Hosts[0]).KnownHosts, filepath.Join(home, ".ssh/known_hosts")},
		{"amd64 binary", c.Spec.K3s.Airgap["amd64"].Binary, filepath.Join(dir, "artifacts/k3s")},
		{"amd64 images", c.Spec.K3s.Airgap["amd64"].Images, filepath.Join(dir, "artifacts/k3s-airgap-images-amd64.tar.zst")},
		{"amd64 checksums", c.Spec.K3s.Airgap["amd64"].Checksums, filepath.Join(dir, "artifacts/sha256sum-amd64.txt")},
		{"arm64 binary", c.Spec.K3s.Airgap["arm64"].Binary, filepath.Join(dir, "artifacts/k3s-arm64")},
		{"host keyPath", c.Spec.Hosts[2].SSH.KeyPath, filepath.Join(dir, "keys/cp3")},
		{"token", c.Spec.K3s.Token.Reveal(), fullToken},
		{"hosts", len(c.Spec.Hosts), 5},
		{"first server", c.FirstServer().Name, "cp1"},
		{"servers", len(c.Servers()), 3},
		{"agents", len(c.Agents()), 2},
		{"label case kept", c.Spec.Hosts[3].Labels["node.example.com/Tier"], "Edge"},
		{"taint", c.Spec.Hosts[3].Taints[1], Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		{"config disable", fmt.Sprint(c.Spec.K3s.Config.Disable), "[traefik]"},
		{"config extra int", c.Spec.K3s.Config.Extra["etcd-snapshot-retention"], 10},
		{"host config node-ip", fmt.Sprint(c.Spec.Hosts[3].K3s.Config.NodeIP), "[192.168.10.5]"},
		{"cp3 port", c.HostSSH(&c.Spec.Hosts[2]).Port, 2222},
		{"cp3 user", c.HostSSH(&c.Spec.Hosts[2]).User, "admin"},
		{"edge-2 port", c.HostSSH(&c.Spec.Hosts[4]).Port, 2201},
		{"pos taint", c.Positions["spec.hosts[3].taints[1]"], Position{60, 11}},
		{"pos label value", c.Positions["spec.hosts[3].labels.node.example.com/Tier"], Position{57, 32}},
		{"keypos label", c.KeyPositions["spec.hosts[3].labels.node.example.com/Tier"], Position{57, 9}},
		{"keypos config key", c.KeyPositions["spec.k3s.config.tls-san"], Position{20, 7}},
		{"pos host item", c.Positions["spec.hosts[4]"], Position{66, 7}},
		{"PositionOf missing field", c.PositionOf("spec.hosts[1].labels"), Position{43, 7}},
		{"source", c.Source, "testdata/full.yaml"},
		{"not overridden", len(c.Overridden), 0},
	}
	for _, ch := range checks {
		if fmt.Sprintf("%#v", ch.got) != fmt.Sprintf("%#v", ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadMinimalDefaults(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	c, err := Load("testdata/minimal.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// User, port and known_hosts stay unset in the document (~/.ssh/config may fill them);
	// HostSSH applies the defaults.
	if s := c.Spec.SSH; s.User != "" || s.Port != 0 || s.ConnectTimeout.D() != 10*time.Second || s.KnownHosts != "" {
		t.Errorf("ssh as loaded = %+v", s)
	}
	s := c.HostSSH(&c.Spec.Hosts[0])
	if s.User != "root" || s.Port != 22 || s.ConnectTimeout.D() != 10*time.Second || s.KnownHosts != "/home/tester/.ssh/known_hosts" || s.KeyPath != "" {
		t.Errorf("ssh defaults = %+v", s)
	}
	k := c.Spec.K3s
	if k.Install != Online || k.CloudController != CloudControllerEmbedded || k.Token != "" || k.Version != "" || k.Channel != "" {
		t.Errorf("k3s defaults = %+v", k)
	}
	if c.Spec.CNI.Type != CNIFlannel || c.Spec.CNI.KernelPolicy != KernelPolicyStrict || c.Spec.CNI.Backend != "" {
		t.Errorf("cni defaults = %+v", c.Spec.CNI)
	}
	if h := c.HostSSH(&c.Spec.Hosts[0]); h.User != "root" || h.Port != 22 {
		t.Errorf("host ssh = %+v", h)
	}
}

func TestResolvePath(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		source, in, want string
	}{
		{"/etc/k3strap/cluster.yaml", "", ""},
		{"/etc/k3strap/cluster.yaml", "~", "/home/tester"},
		{"/etc/k3strap/cluster.yaml", "~/.ssh/id", "/home/tester/.ssh/id"},
		{"/etc/k3strap/cluster.yaml", "artifacts/k3s", "/etc/k3strap/artifacts/k3s"},
		{"/etc/k3strap/cluster.yaml", "../.artifacts/k3s", "/etc/.artifacts/k3s"},
		{"/etc/k3strap/cluster.yaml", "/opt//k3s/../k3s/bin", "/opt/k3s/bin"},
		{"/etc/k3strap/cluster.yaml", "~other/x", "/etc/k3strap/~other/x"},
		{"inv/cluster.yaml", "k3s", filepath.Join(cwd, "inv/k3s")},
		{"", "k3s", filepath.Join(cwd, "k3s")},
	}
	for _, tt := range tests {
		c := &Cluster{Source: tt.source}
		if got := c.ResolvePath(tt.in); got != tt.want {
			t.Errorf("ResolvePath(%q) with source %q = %q, want %q", tt.in, tt.source, got, tt.want)
		}
	}
}

func TestLoadReadError(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml", LoadOptions{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestParseDocumentShape(t *testing.T) {
	tests := []struct {
		name, data string
		line       int
		msg        string
	}{
		{"empty", "", 0, "the inventory is empty"},
		{"comments only", "# nothing\n", 0, "the inventory is empty"},
		{"two documents", "apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: a}\nspec:\n  hosts: [{name: a, address: 192.0.2.1, role: server}]\n---\nkind: Cluster\n", 6, "more than one YAML document"},
		{"not a mapping", "- a\n- b\n", 1, "the document must be a mapping, not a list"},
		{"tab", "apiVersion: x\n\tkind: y\n", 2, "YAML syntax error"},
		{"bad indent deep", "a:\n  b:\n    - c: 1\n      d: 2\n    - e: 3\n     f: 4\n    - g: 5\n", 6, "YAML syntax error: did not find expected '-' indicator"},
		{"unclosed quote", "a: 1\nb: \"x\nc: 2\n", 2, "YAML syntax error: found unexpected end of stream"},
		{"mapping in scalar", "a: 1\nb: c: d\n", 2, "YAML syntax error: mapping values are not allowed in this context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("mem.yaml", []byte(tt.data), LoadOptions{})
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("err = %v, want an ErrorList", err)
			}
			if list[0].Line != tt.line || !strings.Contains(list[0].Message, tt.msg) {
				t.Errorf("first problem = %v (line %d), want line %d and %q", list[0], list[0].Line, tt.line, tt.msg)
			}
		})
	}
}

// Anchors, aliases and merge keys decode like plain YAML, with unknown fields still caught.
func TestParseAnchorsAndMerge(t *testing.T) {
	data := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: anchors}
spec:
  hosts:
    - &base
      name: cp1
      address: 192.0.2.1
      role: server
      labels: &labels {tier: core}
    - <<: *base
      name: cp2
      address: 192.0.2.2
      labels: *labels
`
	c, err := Parse("", []byte(data), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Spec.Hosts[1]
	if h.Name != "cp2" || h.Role != RoleServer || h.Address != "192.0.2.2" || h.Labels["tier"] != "core" {
		t.Errorf("merged host = %+v", h)
	}
	bad := strings.Replace(data, "labels: *labels", "lables: *labels", 1)
	_, err = Parse("", []byte(bad), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "14:7: host cp2: unknown field \"lables\" in spec.hosts[1] — fix: did you mean labels?") {
		t.Errorf("err = %v", err)
	}
}

// The token never appears in any rendering of a cluster or of an error.
func TestSecretNeverPrinted(t *testing.T) {
	c, err := Load("testdata/full.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.K3s.Config.Token = Secret(fullToken)
	c.Spec.Hosts[0].K3s.Config.AgentToken = Secret(fullToken)
	for _, verb := range []string{"%v", "%+v", "%s", "%#v", "%q"} {
		for _, x := range []any{c, *c, c.Spec, c.Spec.K3s, c.Spec.K3s.Token, c.HostConfig(&c.Spec.Hosts[0])} {
			if s := fmt.Sprintf(verb, x); strings.Contains(s, fullToken) {
				t.Errorf("%s of %T shows the token", verb, x)
			}
		}
	}
	if c.Spec.K3s.Token.Reveal() != fullToken || c.Spec.K3s.Token.String() != "********" {
		t.Errorf("Reveal/String broken")
	}

	const envToken = "EnvT0kenValue42"
	t.Setenv("K3STRAP_K3S_TOKEN", envToken)
	secrets := map[string][]string{
		"testdata/errors/types.yaml":     {"NeverShowThisToken", envToken},
		"testdata/errors/k3sconfig.yaml": {"TopSecretToken", envToken},
		"testdata/errors/hosts.yaml":     {envToken},
	}
	for file, values := range secrets {
		_, err := Load(file, LoadOptions{})
		if err == nil {
			t.Fatalf("%s loaded", file)
		}
		var list ErrorList
		errors.As(err, &list)
		renderings := []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%s", err)}
		for _, e := range list {
			renderings = append(renderings, fmt.Sprintf("%#v", *e), fmt.Sprintf("%+v", *e))
		}
		for _, r := range renderings {
			for _, v := range values {
				if strings.Contains(r, v) {
					t.Errorf("%s: an error rendering shows a secret: %s", file, r)
				}
			}
		}
	}
}

// The examples validate, apart from artifact files that `make` builds (not present in a
// fresh checkout): with SkipFileChecks they load; without, the only problems are missing files.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"../examples/single-server.yaml": false, "../examples/ha-edge.yaml": false}
	for _, f := range files {
		if _, ok := want[f]; ok {
			want[f] = true
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f, LoadOptions{SkipFileChecks: true}); err != nil {
				t.Fatalf("Load with SkipFileChecks: %v", err)
			}
			_, err := Load(f, LoadOptions{})
			var list ErrorList
			if err != nil && !errors.As(err, &list) {
				t.Fatalf("Load: %v", err)
			}
			for _, e := range list {
				if !strings.Contains(e.Message, "does not exist") {
					t.Errorf("unexpected problem: %v", e)
				}
			}
		})
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("example %s is missing", f)
		}
	}
	c, err := Load("../examples/single-server.yaml", LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Name != "demo" || c.Spec.K3s.Version != "v1.36.3+k3s1" || c.Spec.K3s.Install != Airgap ||
		c.Spec.K3s.Airgap["amd64"].Binary != mustAbs(t, "../.artifacts/k3s") ||
		c.Spec.SSH.KeyPath != "/var/tmp/k3strap-e2e/id_ed25519" || c.Spec.SSH.KnownHosts != "/var/tmp/k3strap-e2e/demo_known_hosts" ||
		len(c.Spec.Hosts) != 1 || c.Spec.Hosts[0].Address != "10.123.0.11" || fmt.Sprint(c.Spec.K3s.Config.Disable) != "[traefik]" {
		t.Errorf("single-server example = %+v", c.Spec)
	}
}
