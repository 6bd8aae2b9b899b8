// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEdgeValidation: every edge and enterprise field is validated with the position of the offending
// value or key.
func TestEdgeValidation(t *testing.T) {
	f := "testdata/edge/bad.yaml"
	got := loadErrors(t, f, LoadOptions{SkipFileChecks: true})
	checkErrors(t, f, got, []wantErr{
		{8, 23, "", `installScriptURL "get.k3s.io" is not an http(s) URL`, "https://get.k3s.io"},
		{9, 26, "", "not a sha256", "sha256sum"},
		{11, 12, "", "selinuxRPMs are for airgap installs", "install: airgap"},
		{13, 16, "", `apiEndpoint address "https://vip:6443" is not a DNS name`, "bare name"},
		{15, 9, "", "kubeVIP has no interface", "interface"},
		{15, 18, "", "kube-vip needs an IP address", "kubeVIP.address"},
		{19, 20, "", `mirror endpoint "mirror.example:5000" is not an http(s) URL`, "scheme"},
		{21, 11, "", "not a regular expression", "Go regular expression"},
		{25, 11, "", "both passwordFile and passwordEnv", "keep one"},
	})
}

// TestHostRegistriesValidation: a host's own registries are checked by the same rules as
// spec.registries, at their own positions, naming the host; unknown fields are refused there
// too.
func TestHostRegistriesValidation(t *testing.T) {
	f := "testdata/edge/host-registries.yaml"
	got := loadErrors(t, f, LoadOptions{SkipFileChecks: true})
	checkErrors(t, f, got, []wantErr{
		{22, 24, "site-a", `mirror endpoint "site-a.example:5000" is not an http(s) URL`, "scheme"},
		{24, 11, "site-a", `configs key "site a" is not a registry host`, "without scheme"},
		{26, 15, "site-a", "auth has no username", "username"},
		{26, 28, "site-a", `passwordEnv "$SITE_PW" is not an environment variable name`, "not $REGISTRY_PASSWORD"},
		{31, 9, "site-b", `unknown field "mirror"`, "mirrors"},
	})
}

// TestHostRegistriesPrivateFile: a host's registry password file must be private, like the
// spec's (one rule, one message), and the error names the host's field.
func TestHostRegistriesPrivateFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "cluster.yaml")
	body := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: edge
spec:
  k3s:
    version: v1.36.3+k3s1
  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
      registries:
        configs:
          mirror.example:5000:
            auth:
              username: u
              passwordFile: ./pw
`
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got := loadErrors(t, inv, LoadOptions{})
	checkErrors(t, inv, got, []wantErr{
		{17, 29, "cp1", "registry password file ./pw is readable by group or others (mode 0644)", "chmod 600"},
	})
	if got[0].Path != "spec.hosts[0].registries.configs.mirror.example:5000.auth.passwordFile" {
		t.Errorf("path %q", got[0].Path)
	}
	if err := os.Chmod(filepath.Join(dir, "pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(inv, LoadOptions{}); err != nil {
		t.Errorf("a private password file is refused: %v", err)
	}
}

// TestRegistriesOf: a host's own registries replace spec.registries entirely (no merge);
// hosts without them get the spec's; `registries: {}` is an empty file, not the spec's.
func TestRegistriesOf(t *testing.T) {
	spec := &Registries{Mirrors: map[string]RegistryMirror{"docker.io": {Endpoint: []string{"https://central:5000"}}}}
	own := &Registries{Mirrors: map[string]RegistryMirror{"quay.io": {Endpoint: []string{"https://site:5000"}}}}
	c := &Cluster{Spec: Spec{Registries: spec, Hosts: []Host{
		{Name: "cp1", Role: RoleServer},
		{Name: "a1", Role: RoleAgent, Registries: own},
		{Name: "a2", Role: RoleAgent, Registries: &Registries{}},
	}}}
	if r, field := c.RegistriesOf(c.Host("cp1")); r != spec || field != "spec.registries" {
		t.Errorf("cp1: %v from %q", r, field)
	}
	r, field := c.RegistriesOf(c.Host("a1"))
	if r != own || field != "spec.hosts[1].registries" {
		t.Errorf("a1: %v from %q", r, field)
	}
	if _, merged := r.Mirrors["docker.io"]; merged {
		t.Error("a1's registries were merged with the spec's")
	}
	if r, field := c.RegistriesOf(c.Host("a2")); r == nil || len(r.Mirrors) != 0 || field != "spec.hosts[2].registries" {
		t.Errorf("a2 (registries: {}): %v from %q", r, field)
	}
	c.Spec.Registries = nil
	if r, field := c.RegistriesOf(c.Host("cp1")); r != nil || field != "" {
		t.Errorf("no registries anywhere: %v from %q", r, field)
	}
}
