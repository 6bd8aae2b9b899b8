// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func edgeCluster(t *testing.T) *inventory.Cluster {
	t.Helper()
	return &inventory.Cluster{
		Metadata: inventory.Metadata{Name: "edge"},
		Spec: inventory.Spec{
			K3s: inventory.K3s{Version: "v1.36.3+k3s1", APIEndpoint: &inventory.APIEndpoint{Address: "k3s.example.com",
				KubeVIP: &inventory.KubeVIP{Address: "10.0.0.100", Interface: "eth0"}}},
			Hosts: []inventory.Host{
				{Name: "cp1", Address: "10.0.0.1", Role: inventory.RoleServer},
				{Name: "cp2", Address: "10.0.0.2", Role: inventory.RoleServer},
				{Name: "a1", Address: "10.0.0.3", Role: inventory.RoleAgent},
			},
		},
	}
}

// TestPlanAPIEndpoint: servers carry the endpoint and VIP in tls-san, joining hosts register
// through it, the first server gets the kube-vip manifest.
func TestPlanAPIEndpoint(t *testing.T) {
	c := edgeCluster(t)
	pl := &Planner{Cluster: c}
	for _, h := range c.Spec.Hosts {
		p, err := pl.Plan(c.Host(h.Name), "amd64")
		if err != nil {
			t.Fatal(err)
		}
		y := string(p.ConfigYAML)
		if h.Role == inventory.RoleServer && (!strings.Contains(y, "- k3s.example.com") || !strings.Contains(y, "- 10.0.0.100")) {
			t.Errorf("%s tls-san lacks the endpoint:\n%s", h.Name, y)
		}
		if h.Name != "cp1" && !strings.Contains(y, "server: https://k3s.example.com:6443") {
			t.Errorf("%s does not register through the endpoint:\n%s", h.Name, y)
		}
		vip := p.File(k3s.DirManifests + "/k3strap-kube-vip.yaml")
		if (h.Name == "cp1") != (vip != nil) {
			t.Errorf("%s: kube-vip manifest %v", h.Name, vip != nil)
		}
		if vip != nil && (!strings.Contains(string(vip.Content), `"10.0.0.100"`) || !strings.Contains(string(vip.Content), `"eth0"`)) {
			t.Errorf("kube-vip manifest:\n%s", vip.Content)
		}
	}
	if got := c.EndpointAddress(); got != "k3s.example.com" {
		t.Errorf("kubeconfig address %q", got)
	}
	c.APIAddress = "lb.example.com"
	if got := c.EndpointAddress(); got != "lb.example.com" {
		t.Errorf("--api-address does not win: %q", got)
	}
}

// TestPlanInstallScriptChoice: online runs the official script from its URL with the pin;
// airgap the user's install.sh, else k3strap's own.
func TestPlanInstallScriptChoice(t *testing.T) {
	c := edgeCluster(t)
	c.Spec.K3s.InstallScriptURL = "http://mirror.example/install.sh"
	c.Spec.K3s.InstallScriptSHA256 = strings.Repeat("ab", 32)
	c.Spec.K3s.ReleaseURL = "http://mirror.example/releases/"
	pl := &Planner{Cluster: c}
	p, err := pl.Plan(c.Host("cp1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	s := string(p.File(k3s.PathInstallScript).Content)
	if !strings.Contains(s, "url=http://mirror.example/install.sh") || !strings.Contains(s, "want="+strings.Repeat("ab", 32)) || !strings.HasPrefix(p.ScriptSource, ScriptOfficial) {
		t.Errorf("online script (%s):\n%s", p.ScriptSource, s)
	}
	if !contains(p.InstallEnv, "GITHUB_URL=http://mirror.example/releases") || !contains(p.InstallEnv, "INSTALL_K3S_ARTIFACT_URL=http://mirror.example/releases/download") {
		t.Errorf("install env %v lacks GITHUB_URL or INSTALL_K3S_ARTIFACT_URL", p.InstallEnv)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "k3s")
	user := filepath.Join(dir, "install.sh")
	os.WriteFile(bin, []byte("binary"), 0o755)
	os.WriteFile(user, []byte("#!/bin/sh\necho mine\n"), 0o644)
	c = edgeCluster(t)
	c.Spec.K3s.Install = inventory.Airgap
	c.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: bin}}
	pl = &Planner{Cluster: c}
	p, err = pl.Plan(c.Host("cp1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if p.ScriptSource != ScriptOwn {
		t.Errorf("airgap without a script runs %q", p.ScriptSource)
	}
	c.Spec.K3s.AirgapInstallScript = user
	pl = &Planner{Cluster: c}
	p, err = pl.Plan(c.Host("cp1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if string(p.File(k3s.PathInstallScript).Content) != "#!/bin/sh\necho mine\n" || !strings.HasPrefix(p.ScriptSource, ScriptUser) {
		t.Errorf("user script not used: %s", p.ScriptSource)
	}
}

// TestPlanRegistries: registries.yaml is a 0600 secret file that restarts K3s, with the
// password from the environment or a private file, masked in Shown; a readable password file
// is refused; render's planner never reads passwords.
func TestPlanRegistries(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("file-s3cret\n"), 0o600)
	c := edgeCluster(t)
	c.Spec.Registries = &inventory.Registries{
		Mirrors: map[string]inventory.RegistryMirror{"docker.io": {Endpoint: []string{"https://mirror.example:5000"}}},
		Configs: map[string]inventory.RegistryConfig{
			"mirror.example:5000": {Auth: &inventory.RegistryAuth{Username: "u", PasswordEnv: "K3STRAP_TEST_REG_PW"}},
			"other.example":       {Auth: &inventory.RegistryAuth{Username: "v", PasswordFile: pwFile}, TLS: &inventory.RegistryTLS{InsecureSkipVerify: true}},
		},
	}
	t.Setenv("K3STRAP_TEST_REG_PW", "env-s3cret")
	pl := &Planner{Cluster: c}
	p, err := pl.Plan(c.Host("a1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	f := p.File(k3s.PathRegistries)
	if f == nil || f.Mode != 0o600 || !f.Secret || !f.Restart {
		t.Fatalf("registries file %+v", f)
	}
	for _, s := range []string{"env-s3cret", "file-s3cret", "https://mirror.example:5000", "insecure_skip_verify: true"} {
		if !strings.Contains(string(f.Content), s) {
			t.Errorf("registries.yaml lacks %q:\n%s", s, f.Content)
		}
	}
	if strings.Contains(string(f.Shown), "s3cret") || !strings.Contains(string(f.Shown), "********") {
		t.Errorf("Shown not masked:\n%s", f.Shown)
	}
	if shown := ShownOnHost(k3s.PathRegistries, f.Content); strings.Contains(shown, "s3cret") {
		t.Errorf("host copy not masked:\n%s", shown)
	}
	if !contains(pl.ManagedPaths(c.Host("a1")), k3s.PathRegistries) {
		t.Error("registries.yaml is not a managed path")
	}
	os.Chmod(pwFile, 0o644)
	if _, err := (&Planner{Cluster: c}).Plan(c.Host("a1"), "amd64"); err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("readable password file: %v", err)
	}
	os.Unsetenv("K3STRAP_TEST_REG_PW")
	p, err = (&Planner{Cluster: c, MaskedOnly: true}).Plan(c.Host("a1"), "amd64")
	if err != nil || strings.Contains(string(p.File(k3s.PathRegistries).Content), "s3cret") {
		t.Errorf("render planner: %v", err)
	}
}

// TestPlanSELinux: an enforcing host gets selinux: true; an airgap RPM host of a named
// distribution gets the RPM and the install environment that installs it.
func TestPlanSELinux(t *testing.T) {
	dir := t.TempDir()
	bin, rpm := filepath.Join(dir, "k3s"), filepath.Join(dir, "k3s-selinux.rpm")
	os.WriteFile(bin, []byte("binary"), 0o755)
	os.WriteFile(rpm, []byte("rpm"), 0o644)
	c := edgeCluster(t)
	c.Spec.K3s.Install = inventory.Airgap
	c.Spec.K3s.Airgap = map[string]inventory.AirgapArtifacts{"amd64": {Binary: bin}}
	c.Spec.K3s.SELinuxRPMs = map[string]string{"el9": rpm}
	pl := &Planner{Cluster: c}
	f := &facts.Host{Arch: "amd64", OS: facts.OSRelease{ID: "rhel", VersionID: "9.4"}, SELinux: facts.SELinux{Getenforce: "Enforcing"}}
	p, err := pl.PlanHost(c.Host("a1"), f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p.ConfigYAML), "selinux: true") {
		t.Errorf("config lacks selinux: true:\n%s", p.ConfigYAML)
	}
	if p.File(k3s.PathSELinuxRPM) == nil || !contains(p.InstallEnv, "K3STRAP_SELINUX_RPM="+k3s.PathSELinuxRPM) {
		t.Errorf("RPM not planned: %v", p.InstallEnv)
	}
	p, _ = pl.PlanHost(c.Host("a1"), &facts.Host{Arch: "amd64"})
	if strings.Contains(string(p.ConfigYAML), "selinux") || p.File(k3s.PathSELinuxRPM) != nil {
		t.Errorf("SELinux on a host without it:\n%s", p.ConfigYAML)
	}
}

// TestPlanHostRegistries: a host's own registries replace spec.registries for that host only
// (its file holds its mirror and password, none of the spec's), with its TLS files among its
// managed paths; both render masked; a missing password names the host's field, not the value.
func TestPlanHostRegistries(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "site-ca.pem")
	os.WriteFile(ca, []byte("CA"), 0o644)
	c := edgeCluster(t)
	c.Spec.Registries = &inventory.Registries{
		Mirrors: map[string]inventory.RegistryMirror{"docker.io": {Endpoint: []string{"https://central.example:5000"}}},
		Configs: map[string]inventory.RegistryConfig{"central.example:5000": {Auth: &inventory.RegistryAuth{Username: "u", PasswordEnv: "K3STRAP_TEST_CENTRAL_PW"}}},
	}
	c.Host("a1").Registries = &inventory.Registries{
		Mirrors: map[string]inventory.RegistryMirror{"docker.io": {Endpoint: []string{"https://site.example:5000"}}},
		Configs: map[string]inventory.RegistryConfig{"site.example:5000": {
			Auth: &inventory.RegistryAuth{Username: "site", PasswordEnv: "K3STRAP_TEST_SITE_PW"},
			TLS:  &inventory.RegistryTLS{CAFile: ca}}},
	}
	t.Setenv("K3STRAP_TEST_CENTRAL_PW", "central-s3cret")
	t.Setenv("K3STRAP_TEST_SITE_PW", "site-s3cret")
	pl := &Planner{Cluster: c}
	files := map[string]*File{}
	for _, name := range []string{"cp1", "cp2", "a1"} {
		p, err := pl.Plan(c.Host(name), "amd64")
		if err != nil {
			t.Fatal(err)
		}
		f := p.File(k3s.PathRegistries)
		if f == nil || !f.Secret || !f.Restart || f.Mode != 0o600 {
			t.Fatalf("%s registries file %+v", name, f)
		}
		files[name] = f
		if strings.Contains(string(f.Shown), "s3cret") {
			t.Errorf("%s: Shown not masked:\n%s", name, f.Shown)
		}
		caFile := p.File(k3s.DirRegistryTLS + "/site.example_5000/ca.pem")
		if (name == "a1") != (caFile != nil) {
			t.Errorf("%s: site CA planned: %v", name, caFile != nil)
		}
		if (name == "a1") != contains(pl.ManagedPaths(c.Host(name)), k3s.DirRegistryTLS+"/site.example_5000/ca.pem") {
			t.Errorf("%s: managed paths %v", name, pl.ManagedPaths(c.Host(name)))
		}
	}
	if files["cp1"].SHA256 != files["cp2"].SHA256 {
		t.Error("two hosts on spec.registries got different files")
	}
	for name, want := range map[string][]string{
		"cp1": {"https://central.example:5000", "central-s3cret"},
		"a1":  {"https://site.example:5000", "site-s3cret", "ca_file: /etc/rancher/k3s/registries.d/site.example_5000/ca.pem"},
	} {
		for _, s := range want {
			if !strings.Contains(string(files[name].Content), s) {
				t.Errorf("%s registries.yaml lacks %q:\n%s", name, s, files[name].Content)
			}
		}
	}
	for _, s := range []string{"central", "K3STRAP_TEST_CENTRAL_PW"} {
		if strings.Contains(string(files["a1"].Content), s) {
			t.Errorf("a1's own registries were merged with the spec's (%q):\n%s", s, files["a1"].Content)
		}
	}
	if !strings.Contains(string(files["a1"].Shown), "https://site.example:5000") {
		t.Errorf("a1 Shown lacks its mirror:\n%s", files["a1"].Shown)
	}
	// render: no password read for either
	os.Unsetenv("K3STRAP_TEST_SITE_PW")
	rp, err := (&Planner{Cluster: c, MaskedOnly: true}).Plan(c.Host("a1"), "amd64")
	if err != nil || !strings.Contains(string(rp.File(k3s.PathRegistries).Content), "site.example:5000") {
		t.Errorf("render planner: %v", err)
	}
	_, err = (&Planner{Cluster: c}).Plan(c.Host("a1"), "amd64")
	if err == nil || !strings.Contains(err.Error(), "spec.hosts[2].registries.configs[site.example:5000].auth.passwordEnv") {
		t.Errorf("missing site password: %v", err)
	}
	// registries: {} opts a host out of the spec's mirrors: an empty file.
	c.Host("a1").Registries = &inventory.Registries{}
	p, err := (&Planner{Cluster: c}).Plan(c.Host("a1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if f := p.File(k3s.PathRegistries); f == nil || strings.Contains(string(f.Content), "central") || strings.Contains(string(f.Content), "mirrors") {
		t.Errorf("registries: {} file:\n%s", f.Content)
	}
}
