// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// fixtures is the real K3s v1.36.3 captures in the repository, relative to this package (go
// test runs in the package directory).
const fixtures = "../../../../testdata/real-k3s-v1.36.3/"

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtures + name)
	if err != nil {
		t.Fatalf("real K3s fixture: %v", err)
	}
	return b
}

// rootWith writes files (logical path -> content) under a temporary root.
func rootWith(t *testing.T, files map[string][]byte) paths.Root {
	t.Helper()
	root := paths.Root(t.TempDir())
	for p, c := range files {
		full := root.Path(p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func defaultFixtureRoot(t *testing.T) paths.Root {
	return rootWith(t, map[string][]byte{
		"/etc/rancher/k3s/config.yaml":                 readFixture(t, "config-default.yaml"),
		"/etc/rancher/k3s/config.yaml.d/10-extra.yaml": readFixture(t, "config-default.d-10-extra.yaml"),
	})
}

func TestReadFilesFixtureDefault(t *testing.T) {
	root := defaultFixtureRoot(t)
	got, err := ReadFiles(root.Path(paths.DefaultConfig), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--data-dir=/var/lib/rancher/k3s", "--write-kubeconfig-mode=0600", "--node-taint=dedicated=edge:NoExecute",
		"--node-label=site=lab", "--node-label=tier=edge", // node-label+ in the drop-in appends
		"--disable=traefik", "--disable=servicelb", "--disable=metrics-server", "--disable=local-storage",
		"--kubelet-arg=fail-cgroupv1=false", "--flanel-backend=vxlan",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("args\n got %q\nwant %q", got, want)
	}
}

// The node-args annotation of the real run (node-default.json) is the subcommand plus the
// merged config arguments, the misspelt key included.
func TestLoadFixtureDefaultNodeArgsAndWarning(t *testing.T) {
	root := defaultFixtureRoot(t)
	res, err := Load(Input{Role: flags.Server, Root: root}, flags.Load())
	if err != nil {
		t.Fatal(err)
	}
	var node struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(readFixture(t, "node-default.json"), &node); err != nil {
		t.Fatal(err)
	}
	if want := node.Metadata.Annotations["k3s.io/node-args"]; res.NodeArgs != want {
		t.Errorf("node-args\n got %s\nwant %s", res.NodeArgs, want)
	}
	if res.NodeEnv != node.Metadata.Annotations["k3s.io/node-env"] {
		t.Errorf("node-env %s, want %s", res.NodeEnv, node.Metadata.Annotations["k3s.io/node-env"])
	}
	// The warning text, as the fixture's first log line carries it inside msg="...".
	first := strings.SplitN(string(readFixture(t, "log-lines-default.txt")), "\n", 2)[0]
	if len(res.Warnings) != 1 {
		t.Fatalf("warnings %q, want exactly one", res.Warnings)
	}
	if q := strings.ReplaceAll(res.Warnings[0], "\n", `\n`); !strings.Contains(first, `msg="`+q+`"`) {
		t.Errorf("warning %q does not match fixture line %s", res.Warnings[0], first)
	}
	s, err := res.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.NodeLabels, []string{"site=lab", "tier=edge"}) {
		t.Errorf("node labels %q", s.NodeLabels)
	}
	if s.FlannelBackend != "vxlan" || s.ClusterCIDR != "10.42.0.0/16" || s.WriteKubeconfigMode != 0o600 || s.HTTPSListenPort != 6443 {
		t.Errorf("defaults wrong: %+v", s)
	}
	if !s.Disabled("traefik") || s.Disabled("coredns") {
		t.Errorf("disable list %q", s.Disable)
	}
}

func TestMergeRules(t *testing.T) {
	root := rootWith(t, map[string][]byte{
		"/etc/rancher/k3s/config.yaml": []byte("node-label: a=1\ntoken: fromfile\nflannel-backend: vxlan\ndisable: traefik,servicelb\n"),
		// lexical order: 05 before 20; 20's flannel-backend wins; scalar append
		"/etc/rancher/k3s/config.yaml.d/20-b.yaml":   []byte("flannel-backend: host-gw\nnode-label+: c=3\n"),
		"/etc/rancher/k3s/config.yaml.d/05-a.yml":    []byte("node-label+:\n  - b=2\ncluster-init: true\n"),
		"/etc/rancher/k3s/config.yaml.d/ignored.txt": []byte("flannel-backend: none\n"),
	})
	env := map[string]string{"K3S_TOKEN": "fromenv", "K3S_NODE_NAME": "envnode"}
	res, err := Load(Input{Role: flags.Server, Root: root, Getenv: func(k string) string { return env[k] },
		Args: []string{"--node-label", "d=4", "--flannel-backend=wireguard-native", "--disable-network-policy"}}, flags.Load())
	if err != nil {
		t.Fatal(err)
	}
	s, err := res.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=1", "b=2", "c=3", "d=4"}; !reflect.DeepEqual(s.NodeLabels, want) {
		t.Errorf("labels %q, want %q", s.NodeLabels, want)
	}
	if s.FlannelBackend != "wireguard-native" {
		t.Errorf("command line must override the config: %s", s.FlannelBackend)
	}
	if s.Token != "fromfile" {
		t.Errorf("config file must beat K3S_TOKEN (urfave env is the fallback): %q", s.Token)
	}
	if s.NodeName != "envnode" {
		t.Errorf("K3S_NODE_NAME fallback not used: %q", s.NodeName)
	}
	if !s.ClusterInit || !s.DisableNetworkPolicy {
		t.Errorf("bools: %+v", s)
	}
	if want := []string{"traefik", "servicelb"}; !reflect.DeepEqual(s.Disable, want) {
		t.Errorf("disable %q", s.Disable)
	}
	if strings.Contains(res.NodeArgs, "fromfile") || !strings.Contains(res.NodeArgs, `"--token","********"`) {
		t.Errorf("token not redacted in node-args: %s", res.NodeArgs)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("unexpected warnings %q", res.Warnings)
	}
}

func TestUnknownCommandLineFlagIsAnError(t *testing.T) {
	_, err := Load(Input{Role: flags.Agent, Root: paths.Root(t.TempDir()), Args: []string{"--cluster-init"}}, flags.Load())
	if err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -cluster-init") {
		t.Fatalf("got %v", err)
	}
}

func TestServerOnlyKeyInAgentConfigWarns(t *testing.T) {
	root := rootWith(t, map[string][]byte{"/etc/rancher/k3s/config.yaml": []byte("disable: [traefik]\nnode-label: [x=y]\n")})
	res, err := Load(Input{Role: flags.Agent, Root: root}, flags.Load())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != "Unknown flag --disable found in config.yaml, skipping\n" {
		t.Fatalf("warnings %q", res.Warnings)
	}
}

func TestExplicitMissingConfigIsAnError(t *testing.T) {
	_, err := Load(Input{Role: flags.Server, Root: paths.Root(t.TempDir()), Args: []string{"--config", "/nope.yaml"}}, flags.Load())
	if err == nil {
		t.Fatal("want an error for a missing explicit config file")
	}
}

func TestCriticalMismatch(t *testing.T) {
	a := Settings{ClusterCIDR: "10.42.0.0/16", Disable: []string{"traefik", "servicelb"}}.Critical()
	b := Settings{ClusterCIDR: "10.42.0.0/16", Disable: []string{"servicelb", "traefik"}}.Critical()
	if mm := CriticalMismatch(a, b); len(mm) != 0 {
		t.Errorf("order of disable must not matter: %q", mm)
	}
	c := Settings{ClusterCIDR: "10.52.0.0/16", Disable: []string{"traefik"}}.Critical()
	if mm := CriticalMismatch(a, c); !reflect.DeepEqual(mm, []string{"cluster-cidr", "disable"}) {
		t.Errorf("mismatch %q", mm)
	}
}

func TestAllocateNodeCIDRs(t *testing.T) {
	if !(Settings{}).AllocateNodeCIDRs() {
		t.Error("default must allocate")
	}
	if (Settings{KubeControllerArgs: []string{"allocate-node-cidrs=false"}}).AllocateNodeCIDRs() {
		t.Error("allocate-node-cidrs=false ignored")
	}
}
