// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// The proxy test's setup (docs/proxy.md): a real tinyproxy (Debian's package) runs on this
// machine, listening on the harness bridge's address (the hosts' gateway) and wanting a user
// and password; a small HTTP server on the same address is the "release site" — the official
// install.sh, the K3s binary and its checksums under GitHub's release layout. nftables in every
// host drops each new connection that leaves the cluster's own networks, and to the gateway
// every port but the proxy's: the release site is reachable only through the proxy. The hosts'
// image has neither curl nor wget, so each gets Debian's static busybox as
// /usr/local/bin/wget (the install script and k3strap's wrapper use wget then). The stand-in
// images archive is put in K3s's images directory beforehand, as the airgap lane does: the
// cluster pulls nothing.

// proxyInventory is the online inventory of the proxy test: the install script and release
// from the release site, spec.proxy with a user and passwordEnv.
const proxyInventory = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: proxied
spec:
  k3s:
    version: {{.Real.Version}}
    install: online
    installScriptURL: {{.Extra.site}}/install.sh
    releaseURL: {{.Extra.site}}/releases
    config:
{{template "k3s-real-config" .}}
{{- if .Extra.proxy}}
  proxy:
    http: {{.Extra.proxy}}
    passwordEnv: K3STRAP_E2E_PROXY_PASSWORD
{{- end}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
`

// releaseSite serves the release files and records every request's path.
type releaseSite struct {
	mu    sync.Mutex
	paths []string
	files map[string]string // URL path → local file
}

func (s *releaseSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	f, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeFile(w, r, f)
}

func (s *releaseSite) served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

// startTinyproxy runs tinyproxy in the foreground on addr:port with BasicAuth user/password,
// allowing net (CIDR); it returns its log file. Stopped when the test ends.
func startTinyproxy(t *testing.T, addr string, port int, allow, user, password string) string {
	t.Helper()
	// tinyproxy writes its log as nobody: a directory of its own that nobody may enter (the
	// run's TMPDIR is 0711, see runInOwnTempDir; each test's own directories are 0700).
	dir, err := os.MkdirTemp("", "k3strap-tinyproxy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "tinyproxy.log")
	if err := os.WriteFile(log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(log, 0o666); err != nil { // tinyproxy drops to nobody
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tinyproxy.conf")
	body := fmt.Sprintf("User nobody\nGroup nogroup\nPort %d\nListen %s\nTimeout 60\nLogFile %q\nLogLevel Info\nMaxClients 50\nAllow %s\nBasicAuth %s %s\nDisableViaHeader Yes\n",
		port, addr, log, allow, user, password)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tinyproxy", "-d", "-c", conf)
	out, err := os.Create(filepath.Join(dir, "tinyproxy.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tinyproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, fmt.Sprint(port)), time.Second)
		if err == nil {
			c.Close()
			// A log nobody may write to is not fatal to tinyproxy: it proxies on, logging
			// nothing, and the request assertions below would fail far from the cause.
			if b, _ := os.ReadFile(log); !strings.Contains(string(b), "Initializing tinyproxy") {
				o, _ := os.ReadFile(filepath.Join(dir, "tinyproxy.out"))
				t.Fatalf("tinyproxy listens on %s:%d but does not write its log %s:\n%s", addr, port, log, o)
			}
			return log
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "tinyproxy.out"))
			t.Fatalf("tinyproxy does not listen on %s:%d: %v\n%s", addr, port, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a TCP port free on addr right now.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// envFileValue reads NAME's value from an env file's text as systemd does for the simple
// cases (optional quotes).
func envFileValue(text, name string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
		if !ok || k != name {
			continue
		}
		return strings.Trim(v, `'"`), true
	}
	return "", false
}

// TestRealProxy (real K3s): a cluster behind an HTTP proxy (docs/proxy.md).
//   - preflight refuses a NO_PROXY given by hand on a host (/etc/default/k3s) that misses the
//     cluster CIDR, naming it (check NoProxy), before anything is installed;
//   - with spec.proxy and a wrong password, preflight's Proxy check reports the proxy's refusal
//     (tinyproxy answers 401 to a plain-HTTP request) on every host;
//   - with spec.proxy (user + passwordEnv), --dry-run's preflight probes the proxy from each
//     host (a fetch of install.sh through it, with the credentials), shows the proxy
//     environment with the password masked and downloads nothing else; apply installs online — install.sh, the binary and
//     the checksums downloaded by the hosts through the proxy only (tinyproxy's log and the
//     release site's log show them; a direct download from a host fails) — and the nodes are
//     Ready: k3strap's env file wins over the host's bad one; a re-run is unchanged;
//   - /etc/systemd/system/k3s.service.env and k3s-agent.service.env hold the computed NO_PROXY
//     (loopback, both node addresses, 10.42.0.0/16, 10.43.0.0/16, .svc, .cluster.local);
//   - pod-to-pod and pod-to-Service traffic works and the proxy's log holds no cluster
//     address (node, pod or service), nor .svc / .cluster.local;
//   - neither the proxy password nor its percent-encoded form is in any event;
//   - the server's env file edited by hand to a NO_PROXY without the cluster CIDR: doctor
//     reports in-cluster-proxied for it, naming 10.42.0.0/16, the password masked.
func TestRealProxy(t *testing.T) {
	if _, err := exec.LookPath("tinyproxy"); err != nil {
		t.Skip("proxy test skipped: tinyproxy is not installed (e2e/harness/harness.sh deps installs it)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("proxy test skipped: /bin/busybox (Debian busybox-static) is not installed (harness.sh deps installs it)")
	}
	c := newRealCluster(t, 2)
	r := c.real
	gw := c.h.PublicNet() + ".1"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The release site, on the gateway address.
	// The online install fetches all three (install.sh's download_hash and download_binary).
	if r.Checksums == "" {
		t.Fatalf("no sha256sum-amd64.txt beside %s: the online install checks the binary against it", r.Binary)
	}
	sumsPath := "/releases/download/" + r.Version + "/sha256sum-amd64.txt"
	site := &releaseSite{files: map[string]string{
		"/install.sh": r.InstallSh,
		"/releases/download/" + r.Version + "/k3s": r.Binary,
		sumsPath: r.Checksums,
	}}
	ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: site, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	siteURL := "http://" + ln.Addr().String()

	// The proxy, on the gateway address too.
	const user, password = "k3s", "Prx7e2eSecretPW"
	t.Setenv("K3STRAP_E2E_PROXY_PASSWORD", password)
	proxyPort := freePort(t, gw)
	proxyLog := startTinyproxy(t, gw, proxyPort, c.h.PublicNet()+".0/24", user, password)
	proxyURL := fmt.Sprintf("http://%s@%s:%d", user, gw, proxyPort)

	// Every host: egress only to the cluster's networks and the proxy; wget from busybox; the
	// stand-in images in place.
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	images, err := os.ReadFile(r.Images)
	if err != nil {
		t.Fatal(err)
	}
	ruleset := fmt.Sprintf(`table inet k3strap_test_egress {
  chain output {
    type filter hook output priority 0; policy accept;
    ip daddr %[1]s tcp dport %[2]d accept
    ct state new ip daddr %[1]s drop
    ct state new ip daddr != { %[3]s.0/24, 127.0.0.0/8, 10.42.0.0/16, 10.43.0.0/16 } drop
  }
}
`, gw, proxyPort, c.h.PublicNet())
	for i, h := range c.hosts {
		if err := c.h.Nft(ctx, h.Index, ruleset, "-f", "-"); err != nil {
			t.Fatalf("%s: egress rules: %v", h.Name, err)
		}
		if err := c.h.WriteFile(ctx, h.Index, "/usr/local/bin/wget", busybox, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.h.WriteFile(ctx, h.Index, "/var/lib/rancher/k3s/agent/images/"+filepath.Base(r.Images), images, 0o644); err != nil {
			t.Fatal(err)
		}
		// Direct, the release site cannot be reached.
		if out, err := c.execErr(i, 20*time.Second, "wget", "-T", "5", "-qO", "/dev/null", siteURL+"/install.sh"); err == nil {
			t.Fatalf("%s reaches the release site without the proxy: %s", h.Name, out)
		}
	}
	if n := len(site.served()); n != 0 {
		t.Fatalf("the release site answered %d direct requests", n)
	}

	// 1. Without spec.proxy, a hand-made /etc/default/k3s whose NO_PROXY lacks the cluster CIDR.
	badNoProxy := fmt.Sprintf("127.0.0.0/8,::1,localhost,%s,%s,10.43.0.0/16,.svc,.cluster.local", c.hosts[0].Address, c.hosts[1].Address)
	handEnv := fmt.Sprintf("HTTP_PROXY=http://%s:%s@%s:%d\nHTTPS_PROXY=http://%s:%s@%s:%d\nNO_PROXY=%s\n", user, password, gw, proxyPort, user, password, gw, proxyPort, badNoProxy)
	if err := c.h.WriteFile(ctx, c.hosts[0].Index, "/etc/default/k3s", []byte(handEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	c.writeInventory(proxyInventory, map[string]any{"site": siteURL})
	pre := c.k3strap(3*time.Minute, "preflight")
	defer pre.dump(t)
	if pre.code != 3 {
		t.Errorf("preflight with the hand-made NO_PROXY exited %d, want 3", pre.code)
	}
	got := findings(pre, checkid.NoProxy, "cp1", "error")
	if len(got) != 1 || !strings.Contains(got[0].Message, "misses 10.42.0.0/16:") || !strings.Contains(got[0].Message, "/etc/default/k3s") {
		t.Errorf("NoProxy findings for cp1: %+v", got)
	}
	if f := findings(pre, checkid.NoProxy, "a1", "error"); len(f) != 0 {
		t.Errorf("NoProxy judged a1, which has no proxy: %+v", f)
	}
	if strings.Contains(pre.stdout+pre.stderr, password) {
		t.Error("preflight output holds the proxy password")
	}

	// 2. With spec.proxy: --dry-run shows the proxy environment, masked; apply installs online
	// through the proxy.
	inv := c.writeInventory(proxyInventory, map[string]any{"site": siteURL, "proxy": proxyURL})
	// A wrong password: preflight's probe gets 407 from the proxy on every host.
	t.Setenv("K3STRAP_E2E_PROXY_PASSWORD", "wrong-"+password[:3])
	bad := c.k3strap(3*time.Minute, "preflight")
	defer bad.dump(t)
	for _, h := range []string{"cp1", "a1"} {
		if f := findings(bad, checkid.Proxy, h, "error"); bad.code != 3 || len(f) != 1 || !strings.Contains(f[0].Message, "credentials missing or wrong") {
			t.Errorf("preflight with a wrong proxy password: exit %d, Proxy findings for %s %+v", bad.code, h, f)
		}
	}
	t.Setenv("K3STRAP_E2E_PROXY_PASSWORD", password)
	served := len(site.served())
	dry := c.k3strap(3*time.Minute, "apply", "--dry-run")
	defer dry.dump(t)
	if dry.code != 0 {
		t.Fatalf("apply --dry-run exited %d", dry.code)
	}
	if strings.Contains(dry.stdout+dry.stderr, password) {
		t.Error("--dry-run shows the proxy password")
	}
	maskedLine := fmt.Sprintf("+HTTPS_PROXY='http://%s:********@%s:%d'", user, gw, proxyPort)
	if !strings.Contains(dry.stdout, strings.ReplaceAll(maskedLine, "'", `\u0027`)) && !strings.Contains(dry.stdout, maskedLine) {
		t.Errorf("--dry-run's diff lacks %s", maskedLine)
	}
	// Preflight's probe fetched the install script through the proxy (wget, one per host);
	// nothing else was downloaded.
	for _, p := range site.served() {
		if p != "/install.sh" {
			t.Errorf("--dry-run downloaded %s", p)
		}
	}
	if n := len(site.served()) - served; n != 2 {
		t.Errorf("the release site saw %d probe requests during --dry-run, want one per host (2): %v", n, site.served())
	}
	start := time.Now()
	ap := c.k3strap(10*time.Minute, "apply", "--kubeconfig-out", c.dir+"/proxy.kubeconfig")
	defer ap.dump(t)
	if ap.code != 0 {
		b, _ := os.ReadFile(proxyLog)
		t.Fatalf("apply through the proxy exited %d\ntinyproxy log:\n%s", ap.code, tail(string(b), 4000))
	}
	t.Logf("apply through the proxy: %s", time.Since(start).Round(time.Second))
	if strings.Contains(ap.stdout+ap.stderr, password) {
		t.Error("apply's events hold the proxy password")
	}
	for _, f := range []string{"/install.sh", "/releases/download/" + r.Version + "/k3s", sumsPath} {
		n := 0
		for _, p := range site.served() {
			if p == f {
				n++
			}
		}
		if n < 2 {
			t.Errorf("the release site served %s %d times, want once per host (2): %v", f, n, site.served())
		}
	}
	logText := func() string {
		b, err := os.ReadFile(proxyLog)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The install script asks for the version URL-safe ('+' as %2B).
	urlVersion := strings.ReplaceAll(regexp.QuoteMeta(r.Version), `\+`, `(\+|%2B)`)
	for _, want := range []string{"GET " + regexp.QuoteMeta(siteURL+"/install.sh") + " ", "GET " + regexp.QuoteMeta(siteURL+"/releases/download/") + urlVersion + "/k3s ",
		"GET " + regexp.QuoteMeta(siteURL+"/releases/download/") + urlVersion + "/sha256sum-amd64\\.txt "} {
		if n := len(regexp.MustCompile(want).FindAllString(logText(), -1)); n < 2 {
			t.Errorf("tinyproxy's log has %d requests matching %q, want one per host (2):\n%s", n, want, logText())
		}
	}

	// The computed NO_PROXY is in the units' env files.
	cl, err := inventory.Load(inv, inventory.LoadOptions{SkipFileChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, unit := range []string{"k3s", "k3s-agent"} {
		text := c.exec(i, "cat", "/etc/systemd/system/"+unit+".service.env")
		want := strings.Join(cl.NoProxy(&cl.Spec.Hosts[i]), ",")
		for _, name := range []string{"NO_PROXY", "no_proxy"} {
			if v, ok := envFileValue(text, name); !ok || v != want {
				t.Errorf("%s.service.env %s = %q, want %q", unit, name, v, want)
			}
		}
		for _, e := range []string{"127.0.0.0/8", "localhost", c.hosts[0].Address, c.hosts[1].Address, "10.42.0.0/16", "10.43.0.0/16", ".svc", ".cluster.local"} {
			if !strings.Contains(","+want+",", ","+e+",") {
				t.Errorf("the computed NO_PROXY %s lacks %s", want, e)
			}
		}
		if v, _ := envFileValue(text, "HTTP_PROXY"); v != fmt.Sprintf("http://%s:%s@%s:%d", user, password, gw, proxyPort) {
			t.Errorf("%s.service.env HTTP_PROXY is not the proxy with its credentials", unit)
		}
	}

	// An immediate re-run changes nothing: the proxy environment on the hosts is the planned
	// one, byte for byte.
	re := c.k3strap(3*time.Minute, "apply")
	defer re.dump(t)
	if re.code != 0 {
		t.Fatalf("re-run exited %d", re.code)
	}
	for _, h := range re.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("re-run: %s %s (%s), want unchanged", h.Host, h.Status, h.Message)
		}
	}

	// Pod-to-pod and pod-to-Service traffic, then the proxy's log: no cluster address.
	c.kubectl(netprobeManifest("probe-a", "cp1", "")+"---\n"+netprobeManifest("probe-b", "a1", "probe-b"), "apply", "-f", "-")
	pods := c.waitPods("default", "app=netprobe", 2, 4*time.Minute)
	podIP := map[string]string{}
	for _, p := range pods {
		podIP[p.Name] = p.Status.PodIP
	}
	svcIP := strings.TrimSpace(c.kubectl("", "get", "svc", "probe-b", "-o", "jsonpath={.spec.clusterIP}"))
	byPod := fmt.Sprintf("http://%s:%d/", podIP["probe-b"], netprobePort)
	if id, err := c.netprobeGet(0, "probe-a", byPod, 10*time.Second); err != nil || id.Node != "a1" {
		t.Errorf("probe-a → %s: %+v %v", byPod, id, err)
	}
	bySvc := fmt.Sprintf("http://%s:%d/", svcIP, netprobePort)
	if id, err := c.netprobeGetService(0, "probe-a", "probe-b", bySvc, 10*time.Second, time.Minute); err != nil || id.Node != "a1" {
		t.Errorf("probe-a → %s: %+v %v", bySvc, id, err)
	}
	// Every request the proxy got names its target: none may be in-cluster.
	reqRE := regexp.MustCompile(`Request \(file descriptor \d+\): (\S+) (\S+)`)
	inCluster := regexp.MustCompile(`^(https?://)?(` + regexp.QuoteMeta(c.hosts[0].Address) + `|` + regexp.QuoteMeta(c.hosts[1].Address) +
		`|10\.42\.|10\.43\.|127\.|localhost|[^/:]*\.svc|[^/:]*cluster\.local)`)
	reqs := reqRE.FindAllStringSubmatch(logText(), -1)
	if len(reqs) < 6 {
		t.Errorf("tinyproxy logged %d requests, want at least the 6 downloads (script, binary, checksums on each host)", len(reqs))
	}
	for _, m := range reqs {
		if inCluster.MatchString(m[2]) {
			t.Errorf("in-cluster traffic went through the proxy: %s %s", m[1], m[2])
		}
	}

	// 3. The server's env file edited by hand: NO_PROXY without the cluster CIDR → doctor.
	text := c.exec(0, "cat", "/etc/systemd/system/k3s.service.env")
	edited := regexp.MustCompile(`(?m)^((?i:no_proxy)=.*?)10\.42\.0\.0/16,`).ReplaceAllString(text, "${1}")
	if edited == text {
		t.Fatalf("could not remove the cluster CIDR from the env file:\n%s", text)
	}
	if err := c.h.WriteFile(ctx, c.hosts[0].Index, "/etc/systemd/system/k3s.service.env", []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := c.k3strap(3*time.Minute, "doctor")
	defer doc.dump(t)
	fs := doc.findings()
	f, ok := fs[checkid.InClusterProxied+"@cp1"]
	if !ok {
		t.Fatalf("doctor found no %s on cp1: %v", checkid.InClusterProxied, keys(fs))
	}
	if doc.code != 8 || !strings.Contains(f.Message, "misses 10.42.0.0/16:") {
		t.Errorf("doctor exit %d, finding %+v", doc.code, f)
	}
	if _, ok := fs[checkid.InClusterProxied+"@a1"]; ok {
		t.Error("doctor reports a1, whose env file is complete")
	}
	if strings.Contains(doc.stdout+doc.stderr, password) {
		t.Error("doctor's output holds the proxy password")
	}
	ev := ""
	for _, e := range f.Evidence {
		ev += e.Text + "\n"
	}
	if !strings.Contains(ev, "HTTP_PROXY=http://k3s:********@") {
		t.Errorf("doctor's evidence does not show the masked proxy:\n%s", ev)
	}
}
