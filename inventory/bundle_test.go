// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/airgapbundle"
)

const bundleHosts = `  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
`

// writeBundleFixture writes artifacts, a source inventory naming them and the bundle made
// from it; it returns the directory and the bundle's path.
func writeBundleFixture(t *testing.T) (string, string) {
	t.Helper()
	t.Setenv(airgapbundle.CacheDirEnv, t.TempDir())
	dir := t.TempDir()
	w := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	bin, img := "k3s binary v1.36.3+k3s1", "images"
	w("art/k3s", bin, 0o755)
	w("art/k3s-airgap-images-amd64.tar.zst", img, 0o644)
	w("art/sha256sum-amd64.txt", fmt.Sprintf("%s  k3s\n%s  k3s-airgap-images-amd64.tar.zst\n", sum(bin), sum(img)), 0o644)
	w("art/install.sh", "#!/bin/sh\n", 0o644)
	w("art/k3s-selinux-1.6-1.el9.noarch.rpm", "rpm", 0o644)
	w("art/tigera-operator.yaml", "kind: List\n", 0o644)
	w("src.yaml", `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: edge
spec:
  k3s:
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64:
        binary: art/k3s
        images: art/k3s-airgap-images-amd64.tar.zst
        checksums: art/sha256sum-amd64.txt
    airgapInstallScript: art/install.sh
    selinuxRPMs:
      el9: art/k3s-selinux-1.6-1.el9.noarch.rpm
  cni:
    type: calico
    calico:
      manifest: art/tigera-operator.yaml
`+bundleHosts, 0o644)
	c, err := Load(filepath.Join(dir, "src.yaml"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := c.BundleSources()
	if err != nil {
		t.Fatal(err)
	}
	roles := map[airgapbundle.Role]int{}
	for _, s := range srcs {
		roles[s.Role]++
	}
	for _, r := range []airgapbundle.Role{airgapbundle.RoleBinary, airgapbundle.RoleImages, airgapbundle.RoleChecksums, airgapbundle.RoleInstallScript, airgapbundle.RoleSELinuxRPM, airgapbundle.RoleManifest} {
		if roles[r] != 1 {
			t.Errorf("sources have %d files of role %s, want 1: %+v", roles[r], r, srcs)
		}
	}
	out := filepath.Join(dir, "site.tar")
	if _, err := airgapbundle.Write(out, airgapbundle.Manifest{Cluster: c.Metadata.Name, K3sVersion: c.Spec.K3s.Version}, srcs); err != nil {
		t.Fatal(err)
	}
	return dir, out
}

// TestBundleInventory: an inventory that names only the bundle gets the bundle's files in
// place of every path, install airgap and the bundle's K3s version.
func TestBundleInventory(t *testing.T) {
	dir, _ := writeBundleFixture(t)
	site := filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(site, []byte(`apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: edge
spec:
  k3s:
    airgapBundle: site.tar
  cni:
    type: calico
`+bundleHosts), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(site, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Spec.K3s
	if k.Install != Airgap || k.Version != "v1.36.3+k3s1" || c.Bundle == nil {
		t.Fatalf("install %q version %q bundle %v", k.Install, k.Version, c.Bundle)
	}
	in := func(p string) {
		t.Helper()
		if !strings.HasPrefix(p, c.Bundle.Dir+string(filepath.Separator)) {
			t.Errorf("%q is not in the bundle's cache directory %s", p, c.Bundle.Dir)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	a := k.Airgap["amd64"]
	in(a.Binary)
	in(a.Images)
	in(a.Checksums)
	in(k.AirgapInstallScript)
	in(k.SELinuxRPMs["el9"])
	in(c.Spec.CNI.Calico.Manifest)
	if filepath.Base(a.Images) != "k3s-airgap-images-amd64.tar.zst" {
		t.Errorf("images archive renamed: %s", a.Images)
	}
}

func TestBundleInventoryErrors(t *testing.T) {
	dir, bundle := writeBundleFixture(t)
	inv := func(name, k3s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge\nspec:\n  k3s:\n"+k3s+bundleHosts), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := inv("missing.yaml", "    airgapBundle: nope.tar\n")
	checkErrors(t, f, loadErrors(t, f, LoadOptions{}), []wantErr{{7, 19, "", "airgap bundle " + filepath.Join(dir, "nope.tar") + " does not exist", "k3strap bundle"}})

	f = inv("version.yaml", "    version: v1.35.0+k3s1\n    airgapBundle: site.tar\n")
	checkErrors(t, f, loadErrors(t, f, LoadOptions{}), []wantErr{{7, 14, "", "spec.k3s.version is v1.35.0+k3s1 but the airgap bundle", "set version: v1.36.3+k3s1"}})

	f = inv("online.yaml", "    version: v1.36.3+k3s1\n    install: online\n    airgapBundle: site.tar\n")
	checkErrors(t, f, loadErrors(t, f, LoadOptions{}), []wantErr{{9, 19, "", "only used with install: airgap", "install: airgap"}})

	b, _ := os.ReadFile(bundle)
	i := strings.Index(string(b), "k3s binary v1.36.3")
	b[i] ^= 1
	if err := os.WriteFile(filepath.Join(dir, "bad.tar"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f = inv("corrupt.yaml", "    airgapBundle: bad.tar\n")
	checkErrors(t, f, loadErrors(t, f, LoadOptions{}), []wantErr{{7, 19, "", "is not usable: corrupt airgap bundle: amd64/k3s", "copy the bundle again"}})
}

// TestBundleRefusesSecrets: a file the inventory names as a secret never goes into a bundle.
func TestBundleRefusesSecrets(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	_ = os.WriteFile(key, []byte("secret"), 0o600)
	c := &Cluster{Source: filepath.Join(dir, "c.yaml")}
	c.Metadata.Name = "x"
	c.Spec.SSH.KeyPath = key
	c.Spec.K3s = K3s{Version: "v1.36.3+k3s1", Install: Airgap, Airgap: map[string]AirgapArtifacts{"amd64": {Binary: "id_ed25519"}}}
	if _, err := c.BundleSources(); err == nil || !strings.Contains(err.Error(), "spec.ssh.keyPath") {
		t.Fatalf("err = %v", err)
	}
}

// TestBundleRefusesHostRegistrySecrets: a host's own registry password file is a secret too.
func TestBundleRefusesHostRegistrySecrets(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "site-pw")
	_ = os.WriteFile(pw, []byte("secret"), 0o600)
	c := &Cluster{Source: filepath.Join(dir, "c.yaml")}
	c.Metadata.Name = "x"
	c.Spec.K3s = K3s{Version: "v1.36.3+k3s1", Install: Airgap, Airgap: map[string]AirgapArtifacts{"amd64": {Binary: "site-pw"}}}
	c.Spec.Hosts = []Host{{Name: "cp1", Role: RoleServer, Registries: &Registries{Configs: map[string]RegistryConfig{
		"site.example:5000": {Auth: &RegistryAuth{Username: "u", PasswordFile: "site-pw"}}}}}}
	if _, err := c.BundleSources(); err == nil || !strings.Contains(err.Error(), "spec.hosts[0].registries.configs.site.example:5000.auth.passwordFile") {
		t.Fatalf("err = %v", err)
	}
}
