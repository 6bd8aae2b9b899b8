// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// TestPlanProxy: a host with a proxy gets the proxy environment (HTTP_PROXY, HTTPS_PROXY, the
// complete NO_PROXY, in both cases) and the install step is told to read it; with a password
// the file is secret, holds the password, and its shown form (render, dry-run) masks it; a
// render planner reads no password; ManagedPaths lists the file (drift).
func TestPlanProxy(t *testing.T) {
	const pw = "pa$$ word'x"
	t.Setenv("K3STRAP_TEST_PROXY_PW", pw)
	c := edgeCluster(t)
	c.Spec.Proxy = &inventory.Proxy{HTTP: "http://alice@proxy.example.com:3128", PasswordEnv: "K3STRAP_TEST_PROXY_PW", NoProxy: []string{".corp.example"}}
	p, err := (&Planner{Cluster: c}).Plan(c.Host("a1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	f := p.File(k3s.PathProxyEnv)
	if f == nil {
		t.Fatalf("no %s planned: %v", k3s.PathProxyEnv, p.Files)
	}
	if !f.Secret || f.Mode != 0o600 || !f.Restart {
		t.Errorf("proxy file secret %v mode %o restart %v", f.Secret, f.Mode, f.Restart)
	}
	noProxy := strings.Join(c.NoProxy(c.Host("a1")), ",")
	for _, want := range []string{
		"HTTP_PROXY='http://alice:pa$$%20word%27x@proxy.example.com:3128'",
		"HTTPS_PROXY='http://alice:pa$$%20word%27x@proxy.example.com:3128'",
		"NO_PROXY=" + shellescape.Quote(noProxy),
		"http_proxy='http://alice:pa$$%20word%27x@proxy.example.com:3128'",
		"no_proxy=" + shellescape.Quote(noProxy),
	} {
		if !strings.Contains(string(f.Content), want+"\n") {
			t.Errorf("proxy file lacks %s:\n%s", want, f.Content)
		}
	}
	// The install step sources the file with sh: the values come back exactly.
	envFile := filepath.Join(t.TempDir(), "proxy.env")
	if err := os.WriteFile(envFile, f.Content, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", `. "$1"; printf '%s|%s|%s' "$HTTPS_PROXY" "$no_proxy" "$http_proxy"`, "sh", envFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	wantURL := "http://alice:pa$$%20word%27x@proxy.example.com:3128"
	if string(out) != wantURL+"|"+noProxy+"|"+wantURL {
		t.Errorf("sourced proxy file gives %q", out)
	}
	if !strings.Contains(noProxy, "10.42.0.0/16") || !strings.Contains(noProxy, "10.0.0.100") || !strings.HasSuffix(noProxy, ".corp.example") {
		t.Errorf("NO_PROXY %s lacks the cluster CIDR, the VIP or the extra entry", noProxy)
	}
	if strings.Contains(string(f.Shown), "word") || !strings.Contains(string(f.Shown), "HTTPS_PROXY='http://alice:"+k3s.Masked+"@proxy.example.com:3128'") {
		t.Errorf("shown proxy file:\n%s", f.Shown)
	}
	if ShownOnHost(k3s.PathProxyEnv, f.Content) != k3s.Mask(string(f.Content)) || strings.Contains(ShownOnHost(k3s.PathProxyEnv, f.Content), "word") {
		t.Errorf("the host's copy is not masked: %s", ShownOnHost(k3s.PathProxyEnv, f.Content))
	}
	if !slices.Contains(p.InstallEnv, "K3STRAP_PROXY_ENV="+k3s.PathProxyEnv) {
		t.Errorf("install env %v does not name the proxy file", p.InstallEnv)
	}
	for _, e := range p.InstallEnv {
		if strings.Contains(e, "word") {
			t.Errorf("install env carries the password: %s", e)
		}
	}
	if !slices.Contains((&Planner{Cluster: c}).ManagedPaths(c.Host("a1")), k3s.PathProxyEnv) {
		t.Error("ManagedPaths lacks the proxy file")
	}

	// render: no password read (none set), the masked file planned.
	t.Setenv("K3STRAP_TEST_PROXY_PW", "")
	if _, err := (&Planner{Cluster: c}).Plan(c.Host("a1"), "amd64"); err == nil || !strings.Contains(err.Error(), "K3STRAP_TEST_PROXY_PW") {
		t.Errorf("planning without the password: %v", err)
	}
	rp, err := (&Planner{Cluster: c, MaskedOnly: true}).Plan(c.Host("a1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if rf := rp.File(k3s.PathProxyEnv); rf == nil || string(rf.Content) != string(f.Shown) {
		t.Errorf("render plan's proxy file is not the masked one")
	}

	// Without credentials the file is not secret and is shown in full; without a proxy there is
	// none.
	c.Spec.Proxy = &inventory.Proxy{HTTPS: "http://proxy.example.com:3128"}
	p, err = (&Planner{Cluster: c}).Plan(c.Host("cp1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if f := p.File(k3s.PathProxyEnv); f == nil || f.Secret || string(f.Shown) != string(f.Content) || !strings.Contains(string(f.Content), "\nHTTP_PROXY=http://proxy.example.com:3128\n") {
		t.Errorf("plain proxy file: %v", f)
	}
	c.Spec.Proxy = nil
	p, err = (&Planner{Cluster: c}).Plan(c.Host("cp1"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if p.File(k3s.PathProxyEnv) != nil || slices.Contains((&Planner{Cluster: c}).ManagedPaths(c.Host("cp1")), k3s.PathProxyEnv) {
		t.Error("a proxy file without a proxy")
	}
}
