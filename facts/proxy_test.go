// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/k3s"
)

// runProxyScript runs ProxyScript locally with sh, the unit's env file directory moved to
// dir, with stdin.
func runProxyScript(t *testing.T, dir string, stdin []byte, args ...string) ProxyFacts {
	t.Helper()
	return runProxyScriptPath(t, dir, "", stdin, args...)
}

// runProxyScriptPath is runProxyScript with PATH set to path ("" keeps the test's).
func runProxyScriptPath(t *testing.T, dir, path string, stdin []byte, args ...string) ProxyFacts {
	t.Helper()
	script := strings.Replace(ProxyScript, "K3S_SYSTEMD_DIR='"+k3s.DirSystemd+"'", "K3S_SYSTEMD_DIR='"+dir+"'", 1)
	cmd := exec.Command("sh", append([]string{"-c", script, "k3strap"}, args...)...)
	cmd.Stdin = strings.NewReader(string(stdin))
	if path != "" {
		cmd.Env = append(os.Environ(), "PATH="+path)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("proxy.sh: %v\n%s", err, out)
	}
	return ParseProxy(out)
}

// TestProxyScript runs proxy.sh for real: it reads the proxy lines of the unit's env file
// (quotes, export, lower case, CONTAINERD_ forms; other lines left out) and probes a proxy —
// a local HTTP proxy that wants credentials (407 without, 200 with the ones sent on stdin) and
// a closed port (curl exit 7).
func TestProxyScript(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the probe needs it")
	}
	dir := t.TempDir()
	unit := "k3strap-test-unit-" + filepath.Base(dir)
	env := "K3S_TOKEN=not-shown\nexport HTTP_PROXY='http://u:p@proxy:3128'\nno_proxy=\"localhost,.svc\"\nCONTAINERD_NO_PROXY=mirror.local\n"
	if err := os.WriteFile(filepath.Join(dir, unit+".service.env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	pf := runProxyScript(t, dir, nil, unit)
	if pf.Probe != nil || len(pf.Layers) != 2 {
		t.Fatalf("layers %+v probe %+v", pf.Layers, pf.Probe)
	}
	l := pf.Layers[1]
	if l.Source != filepath.Join(dir, unit+".service.env") || len(l.Vars) != 3 || l.Vars["HTTP_PROXY"] != "http://u:p@proxy:3128" ||
		l.Vars["no_proxy"] != "localhost,.svc" || l.Vars["CONTAINERD_NO_PROXY"] != "mirror.local" {
		t.Errorf("env file layer %+v", l)
	}
	if v, src := pf.Effective("no_proxy"); v != "localhost,.svc" || src != l.Source {
		t.Errorf("Effective(no_proxy) = %q from %q", v, src)
	}

	var sawAuth string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Proxy-Authorization")
		if a == "" {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		sawAuth = a
		if r.URL.Host != "release.example.test" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer proxy.Close()
	target := "http://release.example.test/install.sh"
	pf = runProxyScript(t, dir, nil, ProxyArgs(unit, proxy.URL, target, false)...)
	if p := pf.Probe; p == nil || p.Tool != "curl" || p.HTTP != 407 {
		t.Errorf("probe without credentials: %+v", p)
	}
	u := strings.Replace(proxy.URL, "http://", "http://alice:secret@", 1)
	pf = runProxyScript(t, dir, ProxyStdin(u, "alice", `pa"ss\word`), ProxyArgs(unit, u, target, true)...)
	if p := pf.Probe; p == nil || p.Exit != 0 || p.HTTP != 200 {
		t.Errorf("probe with credentials: %+v", p)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte(`alice:pa"ss\word`)); sawAuth != want {
		t.Errorf("the proxy saw %q, want %q", sawAuth, want)
	}
	for _, a := range ProxyArgs(unit, u, target, true) {
		if strings.Contains(a, "secret") {
			t.Errorf("an argument carries the password: %s", a)
		}
	}

	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l2.Addr().String()
	l2.Close()
	pf = runProxyScript(t, dir, nil, ProxyArgs(unit, closed, target, false)...)
	if p := pf.Probe; p == nil || p.Exit != 7 || p.HTTP != 0 || !strings.Contains(p.Err, "onnect") {
		t.Errorf("probe of a closed port: %+v", p)
	}
	pf = runProxyScript(t, dir, nil, ProxyArgs(unit, closed, "", false)...)
	if p := pf.Probe; p == nil || p.Exit != 7 {
		t.Errorf("connect-only probe of a closed port: %+v", p)
	}
}

// TestProxyJudge: the effective environment follows systemd's order (a later file wins) and
// Go's lookup (upper case first); the judgement names the missing entries and masks the
// password.
func TestProxyJudge(t *testing.T) {
	req := k3s.NoProxy(k3s.NoProxyInput{NodeAddresses: []string{"10.0.0.1"}})
	pf := ParseProxy([]byte("@unitenv\nHTTPS_PROXY=http://x:3128\n@file /etc/default/k3s\nhttps_proxy=http://u:pw@proxy:3128\nNO_PROXY=*\n" +
		"@file /etc/systemd/system/k3s.service.env\nHTTPS_PROXY=http://u:pw@proxy:3128\nNO_PROXY=127.0.0.0/8,::1,localhost,10.0.0.1,10.43.0.0/16,.svc,.cluster.local\nno_proxy=*\n"))
	j := pf.Judge(req)
	if j == nil || strings.Join(j.Missing, ",") != "10.42.0.0/16" || j.NoProxySource != "set in /etc/systemd/system/k3s.service.env" {
		t.Fatalf("judgement %+v", j)
	}
	if got := strings.Join(j.Vars, "|"); got != "HTTPS_PROXY=http://u:********@proxy:3128 (/etc/systemd/system/k3s.service.env)|NO_PROXY=127.0.0.0/8,::1,localhost,10.0.0.1,10.43.0.0/16,.svc,.cluster.local (/etc/systemd/system/k3s.service.env)" {
		t.Errorf("vars %s", got)
	}
	if pf := ParseProxy([]byte("@file /etc/default/k3s\nNO_PROXY=\n")); pf.Judge(req) != nil {
		t.Error("no proxy set is judged")
	}
}

// TestProxyScriptWget: on a host without curl (the harness image) the probe fetches with
// wget — here busybox's, the only tools on PATH — reading the proxy URL with its password
// from standard input into its environment: 407 without credentials, 200 with them, and a
// closed port is a failure without an HTTP status.
func TestProxyScriptWget(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("/bin/busybox (Debian busybox-static) is not installed")
	}
	bin := t.TempDir()
	for _, applet := range []string{"wget", "grep", "tr", "mktemp", "head", "tail", "sed", "rm", "cat", "timeout"} {
		if err := os.Symlink("/bin/busybox", filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	unit := "k3strap-test-unit-" + filepath.Base(dir)
	var sawAuth string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Proxy-Authorization"); a != "" {
			sawAuth = a
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
	}))
	defer proxy.Close()
	target := "http://release.example.test/install.sh"
	pf := runProxyScriptPath(t, dir, bin, nil, ProxyArgs(unit, proxy.URL, target, false)...)
	if p := pf.Probe; p == nil || p.Tool != "wget" || p.HTTP != 407 || p.Exit == 0 {
		t.Errorf("wget probe without credentials: %+v", p)
	}
	pf = runProxyScriptPath(t, dir, bin, ProxyStdin(proxy.URL, "alice", "s3cret-pw"), ProxyArgs(unit, proxy.URL, target, true)...)
	if p := pf.Probe; p == nil || p.Tool != "wget" || p.HTTP != 200 || p.Exit != 0 {
		t.Errorf("wget probe with credentials: %+v", p)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pw")); sawAuth != want {
		t.Errorf("the proxy saw %q, want %q", sawAuth, want)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	pf = runProxyScriptPath(t, dir, bin, nil, ProxyArgs(unit, closed, target, false)...)
	if p := pf.Probe; p == nil || p.Tool != "wget" || p.HTTP != 0 || p.Exit == 0 || p.Err == "" {
		t.Errorf("wget probe of a closed port: %+v", p)
	}
}
