// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// wizardCluster is an inventory as `k3strap init` builds it in code, with every section the
// wizard can fill, and local files that exist.
func wizardCluster(t *testing.T, dir string) *Cluster {
	t.Helper()
	for _, f := range []string{"k3s", "images.tar.zst", "sha256sum-amd64.txt", "id_test"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &Cluster{
		APIVersion: APIVersion, Kind: Kind,
		Metadata: Metadata{Name: "lab"},
		Spec: Spec{
			K3s: K3s{
				Version: "v1.36.3+k3s1",
				Install: Airgap,
				Airgap: map[string]AirgapArtifacts{"amd64": {
					Binary: filepath.Join(dir, "k3s"), Images: filepath.Join(dir, "images.tar.zst"), Checksums: filepath.Join(dir, "sha256sum-amd64.txt"),
				}},
				Config: K3sConfig{TLSSAN: StringList{"k3s.lab.example"}, Extra: map[string]any{"etcd-snapshot-retention": 10}},
			},
			SSH:     SSH{User: "ubuntu", KeyPath: filepath.Join(dir, "id_test"), KnownHosts: filepath.Join(dir, "known_hosts")},
			CNI:     CNI{Type: CNICalico, Backend: "VXLAN"},
			Rancher: &Rancher{Install: &RancherInstall{Hostname: "rancher.lab.example"}},
			Hosts: []Host{
				{Name: "cp1", Address: "192.0.2.10", Role: RoleServer,
					Taints: []Taint{{Key: "dedicated", Value: "control-plane", Effect: corev1.TaintEffectNoSchedule}}},
				{Name: "edge-1", Address: "192.0.2.20", Role: RoleAgent,
					Labels: map[string]string{"topology.kubernetes.io/zone": "edge"},
					Taints: []Taint{{Key: "edge", Effect: corev1.TaintEffectNoExecute}},
					SSH:    SSH{User: "pi", Port: 2222}},
			},
		},
	}
}

// writeAndLoad marshals c into dir/cluster.yaml and loads it back with file checks on.
func writeAndLoad(t *testing.T, dir string, c *Cluster, opts WriteOptions) (*Cluster, string) {
	t.Helper()
	b, err := Marshal(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatalf("Load of the written inventory: %v\n%s", err, b)
	}
	return got, string(b)
}

func TestMarshalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := wizardCluster(t, dir)
	got, text := writeAndLoad(t, dir, want, WriteOptions{})
	want.ApplyDefaults()
	if !reflect.DeepEqual(got.Spec, want.Spec) || got.Metadata != want.Metadata {
		t.Fatalf("round trip changed the cluster\nwant %#v\n got %#v\n%s", want.Spec, got.Spec, text)
	}
	for _, s := range []string{
		"# k3strap inventory:", "# The machines.", "# key[=value]:Effect", "# online: each host downloads",
		"- dedicated=control-plane:NoSchedule", "backend: VXLAN", "hostname: rancher.lab.example",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("the written inventory lacks %q\n%s", s, text)
		}
	}
	// Per-host explanations are written once (at the first host that has the field).
	if n := strings.Count(text, "# server (control plane) or agent"); n != 1 {
		t.Errorf("role comment written %d times, want 1\n%s", n, text)
	}
	if strings.Contains(text, "{}") || strings.Contains(text, "[]") {
		t.Errorf("empty sections written\n%s", text)
	}
}

func TestMarshalLoadedFileRoundTrip(t *testing.T) {
	orig, err := Load("testdata/full.yaml", LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if orig.Spec.K3s.Token == "" {
		t.Fatal("testdata/full.yaml has no token: the secret part of this test would prove nothing")
	}
	b, err := Marshal(orig, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), orig.Spec.K3s.Token.Reveal()) {
		t.Fatalf("the token was written\n%s", b)
	}
	if !strings.Contains(string(b), "# token: left out") {
		t.Errorf("no note where the token was\n%s", b)
	}
	got, err := Parse(filepath.Join(t.TempDir(), "c.yaml"), b, LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := orig.Spec
	want.K3s.Token = ""
	if !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("round trip changed the cluster\nwant %#v\n got %#v\n%s", want, got.Spec, b)
	}

	// KeepSecrets writes the token, and it comes back.
	b, err = Marshal(orig, WriteOptions{KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err = Parse(filepath.Join(t.TempDir(), "c.yaml"), b, LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Spec, orig.Spec) {
		t.Fatalf("round trip with secrets changed the cluster\n%s", b)
	}
}

func TestMarshalHeader(t *testing.T) {
	c := &Cluster{APIVersion: APIVersion, Kind: Kind, Metadata: Metadata{Name: "x"},
		Spec: Spec{Hosts: []Host{{Name: "a", Address: "192.0.2.1", Role: RoleServer}}}}
	b, err := Marshal(c, WriteOptions{Header: []string{"written by a test", "second line"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# written by a test\n# second line\napiVersion: "+APIVersion+"\n") {
		t.Fatalf("header:\n%s", b)
	}
	if _, err := Parse("", b, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}
