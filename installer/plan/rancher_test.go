// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/rancher"
)

func rancherTestCluster(t *testing.T, in *inventory.RancherInstall) *inventory.Cluster {
	t.Helper()
	c := &inventory.Cluster{APIVersion: inventory.APIVersion, Kind: inventory.Kind, Metadata: inventory.Metadata{Name: "lab"},
		Spec: inventory.Spec{K3s: inventory.K3s{Version: "v1.36.3+k3s1"}, Rancher: &inventory.Rancher{Install: in}, Hosts: []inventory.Host{
			{Name: "cp1", Address: "10.0.0.1", Role: inventory.RoleServer},
			{Name: "cp2", Address: "10.0.0.2", Role: inventory.RoleServer},
			{Name: "w1", Address: "10.0.0.3", Role: inventory.RoleAgent},
		}}}
	c.ApplyDefaults()
	return c
}

// TestRancherManifestsPlanned: the first server gets the bootstrap Secret (secret, generated
// and kept) and the two HelmCharts, all 0600 in the manifests folder; the HelmCharts hold no
// password; other hosts get none of them.
func TestRancherManifestsPlanned(t *testing.T) {
	c := rancherTestCluster(t, &inventory.RancherInstall{Version: "2.11.3"})
	pl := &Planner{Cluster: c}
	p, err := pl.Plan(&c.Spec.Hosts[0], "amd64")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ManifestRancherBootstrap, ManifestCertManager, ManifestRancher}
	var pw string
	for _, name := range want {
		f := p.File(RancherManifestPath(name))
		if f == nil {
			t.Fatalf("no %s in the first server's plan", name)
		}
		if f.Mode != 0o600 || !strings.HasPrefix(f.Path, k3s.DirManifests+"/k3strap-") {
			t.Errorf("%s: mode %o path %s", name, f.Mode, f.Path)
		}
		if name == ManifestRancherBootstrap {
			if !f.Secret || !f.Keep {
				t.Errorf("bootstrap Secret: secret %v keep %v, want both", f.Secret, f.Keep)
			}
			if pw, err = rancher.ParseBootstrapSecret(f.Content); err != nil || len(pw) < 12 {
				t.Fatalf("generated password %q: %v", pw, err)
			}
		} else if f.Secret {
			t.Errorf("%s is marked secret: render would hide a file that holds none", name)
		}
	}
	for _, name := range []string{ManifestCertManager, ManifestRancher} {
		if strings.Contains(string(p.File(RancherManifestPath(name)).Content), pw) {
			t.Errorf("%s holds the password", name)
		}
	}
	hc := string(p.File(RancherManifestPath(ManifestRancher)).Content)
	for _, s := range []string{"hostname: 10.0.0.1.sslip.io", "replicas: 2", `version: "2.11.3"`, "name: " + rancher.BootstrapSecretName} {
		if !strings.Contains(hc, s) {
			t.Errorf("rancher HelmChart lacks %q:\n%s", s, hc)
		}
	}
	if p2, _ := pl.Plan(&c.Spec.Hosts[1], "amd64"); p2.File(RancherManifestPath(ManifestRancher)) != nil {
		t.Error("a joining server got the Rancher manifests")
	}
	// A password from the inventory is used as is and not kept.
	c.Spec.Rancher.Install.BootstrapPassword = "inventory-password-123"
	pl = &Planner{Cluster: c} // a planner renders the add-ons once per run
	p, _ = pl.Plan(&c.Spec.Hosts[0], "amd64")
	f := p.File(RancherManifestPath(ManifestRancherBootstrap))
	if got, _ := rancher.ParseBootstrapSecret(f.Content); got != "inventory-password-123" || f.Keep {
		t.Errorf("inventory password: %q keep %v", got, f.Keep)
	}
	// tlsSource secret: no cert-manager; the TLS Secret from local files is a secret file.
	dir := t.TempDir()
	for _, n := range []string{"tls.crt", "tls.key"} {
		_ = os.WriteFile(filepath.Join(dir, n), []byte(n), 0o600)
	}
	c.Spec.Rancher.Install.TLSSource = inventory.TLSSecret
	c.Spec.Rancher.Install.TLSSecret = &inventory.RancherTLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	pl = &Planner{Cluster: c}
	p, err = pl.Plan(&c.Spec.Hosts[0], "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if p.File(RancherManifestPath(ManifestCertManager)) != nil {
		t.Error("cert-manager planned for tlsSource secret")
	}
	if f := p.File(RancherManifestPath(ManifestRancherTLS)); f == nil || !f.Secret {
		t.Errorf("TLS Secret file %+v", f)
	}
}

func TestGenerateBootstrapPassword(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		pw, err := GenerateBootstrapPassword()
		if err != nil || len(pw) != bootstrapPasswordLength {
			t.Fatalf("%q %v", pw, err)
		}
		if seen[pw] {
			t.Fatal("a password repeated")
		}
		seen[pw] = true
	}
}
