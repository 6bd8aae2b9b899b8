// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/airgapbundle"
	"github.com/k3strap/k3strap/events"
)

// bundleSource is singleServer's airgap section plus the user's install.sh (templated as
// .Extra.userScript), written to bundle.yaml: what the operator bundles where the artifacts are.
const bundleSource = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
{{template "k3s-airgap" .}}
    airgapInstallScript: {{.Extra.userScript}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// bundleSite is the inventory at the site: the bundle only (no version, no install mode, no
// artifact paths).
const bundleSite = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
    airgapBundle: site/site.tar
    config:
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// TestBundleApply: `k3strap bundle` packs the simulator's airgap artifacts and an
// install.sh into one tar with a manifest; a fresh host is installed from an inventory that
// names only that bundle (extracted into an empty cache), and the user's install.sh from the
// bundle is what ran.
func TestBundleApply(t *testing.T) {
	c := newCluster(t, 1)
	t.Setenv(airgapbundle.CacheDirEnv, filepath.Join(c.dir, "cache"))

	tmpl, err := os.ReadFile(filepath.Join(repoRoot(), "templates/install/k3s-install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(c.dir, "install.sh")
	user := strings.Replace(string(tmpl), "set -e\n", "set -e\nmkdir -p /var/lib/k3strap-e2e && touch "+userScriptMarker+" # the user's install.sh (e2e)\n", 1)
	if err := os.WriteFile(script, []byte(user), 0o755); err != nil {
		t.Fatal(err)
	}
	src := c.writeInventory(bundleSource, map[string]any{"userScript": script})
	if err := os.Rename(src, filepath.Join(c.dir, "bundle.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.dir, "site"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(c.dir, "site", "site.tar")
	r := c.k3strap(time.Minute, "bundle", "-f", filepath.Join(c.dir, "bundle.yaml"), "-O", out, "--output", "plain")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("bundle exited %d", r.code)
	}
	if !strings.Contains(r.stdout, "wrote "+out) || !strings.Contains(r.stdout, "K3s v1.36.3+k3s1, amd64, 4 files") {
		t.Errorf("bundle output:\n%s", r.stdout)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("bundle %v %v", st, err)
	}
	m := readBundleManifest(t, out)
	roles := map[airgapbundle.Role]string{}
	for _, f := range m.Files {
		roles[f.Role] = f.Path
	}
	for role, p := range map[airgapbundle.Role]string{airgapbundle.RoleBinary: "amd64/k3s", airgapbundle.RoleImages: "amd64/k3s-airgap-images-amd64.tar.zst",
		airgapbundle.RoleChecksums: "amd64/sha256sum-amd64.txt", airgapbundle.RoleInstallScript: "install.sh"} {
		if roles[role] != p {
			t.Errorf("manifest: %s is %q, want %q (%+v)", role, roles[role], p, m.Files)
		}
	}

	// The site: only the bundle, next to the inventory; the artifacts are gone.
	c.writeInventory(bundleSite, nil)
	if err := os.Remove(script); err != nil {
		t.Fatal(err)
	}
	a := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", filepath.Join(c.dir, "e2e.kubeconfig"))
	defer a.dump(t)
	if a.code != 0 {
		t.Fatalf("apply from the bundle exited %d", a.code)
	}
	ready := false
	for _, e := range a.ofType(events.Milestone) {
		ready = ready || e.Milestone.Name == "node-ready"
	}
	if !ready {
		t.Error("no node-ready milestone")
	}
	if got := c.exec(0, "sh", "-c", "test -f "+userScriptMarker+" && echo ran"); got != "ran" {
		t.Error("the bundle's install.sh did not run")
	}
	if got := c.exec(0, "/usr/local/bin/k3s", "--version"); !strings.Contains(got, "v1.36.3+k3s1") {
		t.Errorf("k3s --version: %s", got)
	}
	ents, err := os.ReadDir(filepath.Join(c.dir, "cache", "bundles"))
	if err != nil || len(ents) != 1 {
		t.Errorf("bundle cache: %v %v", ents, err)
	}
}

func readBundleManifest(t *testing.T, p string) *airgapbundle.Manifest {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	h, err := tr.Next()
	if err != nil || h.Name != airgapbundle.ManifestName {
		t.Fatalf("first entry %v %v", h, err)
	}
	var m airgapbundle.Manifest
	if err := json.NewDecoder(tr).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.FormatVersion != 1 || m.Cluster != "e2e" || m.K3sVersion != "v1.36.3+k3s1" {
		t.Errorf("manifest header %+v", m)
	}
	return &m
}
