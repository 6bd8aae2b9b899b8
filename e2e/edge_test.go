// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/events"
)

// edgeInv: two servers and one agent, airgap with the user's install.sh, a fixed registration
// address, a private registry with its password from the environment.
const edgeInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: edge
spec:
  k3s:
{{template "k3s-airgap" .}}
    airgapInstallScript: {{.Extra.userScript}}
    apiEndpoint:
      address: k3s-api.e2e
    config:
      # node-status-report-frequency: the kubelet re-posts its node status (the Ready
      # heartbeat TestEdgeHA's closing check reads) every 10 s instead of every 5 min.
      kubelet-arg: [fail-cgroupv1=false, node-status-report-frequency=10s]
  registries:
    mirrors:
      docker.io:
        endpoint: ["https://mirror.e2e:5000"]
    configs:
      mirror.e2e:5000:
        auth:
          username: puller
          passwordEnv: K3STRAP_E2E_REGISTRY_PASSWORD
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: cp2
      address: {{(index .Hosts 1).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 2).Address}}
      role: agent
`

const userScriptMarker = "/var/lib/k3strap-e2e/user-install-script-ran"

// TestEdgeHA: the user's airgap install.sh runs (it leaves a marker) and the run
// says so; agents and the joining server register through apiEndpoint (a name in the hosts'
// /etc/hosts pointing at cp1), servers carry it in tls-san, the kubeconfig uses it;
// registries.yaml lands 0600 with the password that never shows in k3strap's output;
// an agent whose facts say SELinux enforces without the k3s-selinux policy is refused by
// preflight, and once the policy is reported installed it runs with selinux: true. Closing
// check: cp1 stops and the endpoint moves to cp2 (the /etc/hosts line on the remaining hosts,
// as kube-vip would move a VIP); within 60 s a1 must be Ready through cp2 with a Ready
// heartbeat newer than cp1's stop (cp2's clock), and its K3s still active. That needs the
// simulator's HA stand-in (e2e/k3ssim/README.md "HA", simulator behaviour): cp2 replicates
// cp1's state and serves it after 3 s of silence, and the agent re-resolves the endpoint
// after failed requests. The kubelet-arg node-status-report-frequency=10s makes the Ready
// heartbeat come every 10 s (× timeScale) instead of every 5 min.
func TestEdgeHA(t *testing.T) {
	c := newCluster(t, 3)
	const password = "e2e-registry-s3cret"
	t.Setenv("K3STRAP_E2E_REGISTRY_PASSWORD", password)
	tmpl, err := os.ReadFile(filepath.Join(repoRoot(), "templates/install/k3s-install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	user := strings.Replace(string(tmpl), "set -e\n", "set -e\nmkdir -p /var/lib/k3strap-e2e && touch "+userScriptMarker+" # the user's install.sh (e2e)\n", 1)
	userScript := filepath.Join(c.dir, "install.sh")
	if err := os.WriteFile(userScript, []byte(user), 0o755); err != nil {
		t.Fatal(err)
	}
	c.writeInventory(edgeInv, map[string]any{"userScript": userScript})
	for i := range 3 {
		c.exec(i, "sh", "-c", "echo '"+c.hosts[0].Address+" k3s-api.e2e' >> /etc/hosts")
	}
	// a1 says SELinux enforces (a stand-in getenforce; the harness's kernel has no SELinux).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.WriteFile(ctx, c.hosts[2].Index, "/usr/local/sbin/getenforce", []byte("#!/bin/sh\necho Enforcing # e2e stand-in\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	r := c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("apply exited %d, want 3 (preflight: SELinux)", r.code)
	}
	found := false
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SELinux" && e.Host == "a1" && e.Finding.Severity == "error" && e.Finding.Fix != "" {
			found = true
		}
	}
	if !found {
		t.Fatal("no SELinux error for a1")
	}
	// The k3s-selinux policy "installed" (a stand-in rpm answering rpm -q k3s-selinux).
	if err := c.h.WriteFile(ctx, c.hosts[2].Index, "/usr/local/bin/rpm",
		[]byte("#!/bin/sh\n# e2e stand-in\n[ \"$1 $2\" = \"-q k3s-selinux\" ] && { echo k3s-selinux-1.6-1.el9.noarch; exit 0; }\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	kc := filepath.Join(c.dir, "edge.kubeconfig")
	r = c.k3strap(6*time.Minute, "apply", "--kubeconfig-out", kc)
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	if strings.Contains(r.stdout+r.stderr, password) {
		t.Error("the registry password appears in k3strap's output")
	}
	userRan := 0
	for _, e := range r.events {
		if e.Step == "install" && strings.Contains(e.Message, "the user's airgap install.sh") {
			userRan++
		}
	}
	if userRan != 3 {
		t.Errorf("%d install events name the user's install.sh, want 3", userRan)
	}
	for i, name := range []string{"cp1", "cp2", "a1"} {
		if out := c.exec(i, "sh", "-c", "test -f "+userScriptMarker+" && echo ran"); out != "ran" {
			t.Errorf("%s: the user's install.sh did not run", name)
		}
		cfg := c.exec(i, "cat", "/etc/rancher/k3s/config.yaml")
		if i > 0 && !strings.Contains(cfg, "server: https://k3s-api.e2e:6443") {
			t.Errorf("%s does not register through the endpoint:\n%s", name, cfg)
		}
		if i < 2 && !strings.Contains(cfg, "- k3s-api.e2e") {
			t.Errorf("%s tls-san lacks the endpoint:\n%s", name, cfg)
		}
		if (i == 2) != strings.Contains(cfg, "selinux: true") {
			t.Errorf("%s: selinux: true only on the enforcing agent:\n%s", name, cfg)
		}
		if reg := c.exec(i, "sh", "-c", "stat -c %a /etc/rancher/k3s/registries.yaml; cat /etc/rancher/k3s/registries.yaml"); !strings.HasPrefix(reg, "600\n") ||
			!strings.Contains(reg, "password: "+password) || !strings.Contains(reg, "https://mirror.e2e:5000") {
			t.Errorf("%s registries.yaml:\n%s", name, reg)
		}
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		if cl.Server != "https://k3s-api.e2e:6443" {
			t.Errorf("kubeconfig server %s", cl.Server)
		}
	}
	nodes := c.exec(0, "k3s", "kubectl", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}")
	for _, n := range []string{"cp1=True", "cp2=True", "a1=True"} {
		if !strings.Contains(nodes, n) {
			t.Errorf("nodes %q lack %s", nodes, n)
		}
	}

	// Render and dry-run mask the password; a mirror change is a planned restart.
	rr := c.k3strap(time.Minute, "render", "--output", "plain")
	if rr.code != 0 || strings.Contains(rr.stdout, password) || !strings.Contains(rr.stdout, "********") {
		t.Errorf("render (exit %d) does not mask the registry password:\n%s", rr.code, rr.stdout)
	}
	if err := os.WriteFile(c.inv, []byte(strings.Replace(readFile(t, c.inv), "https://mirror.e2e:5000", "https://mirror2.e2e:5000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dr := c.k3strap(2*time.Minute, "apply", "--dry-run")
	if dr.code != 0 || strings.Contains(dr.stdout+dr.stderr, password) || !strings.Contains(dr.stdout, "mirror2.e2e") {
		t.Errorf("dry-run (exit %d) leaks the password or hides the mirror change", dr.code)
	}

	// cp1 stops and the endpoint moves to cp2 (as a VIP kube-vip manages would): the agent's
	// heartbeats must reach cp2, which serves the API from its replica, and be read there.
	stoppedAt := c.stopHost(t, 0, 1) // cp2's clock
	stopped := time.Now()
	for i := 1; i < 3; i++ {
		c.exec(i, "sh", "-c", "sed 's/^.* k3s-api\\.e2e$/"+c.hosts[1].Address+" k3s-api.e2e/' /etc/hosts > /tmp/hosts.e2e && cat /tmp/hosts.e2e > /etc/hosts")
		if h := c.exec(i, "getent", "hosts", "k3s-api.e2e"); !strings.HasPrefix(h, c.hosts[1].Address+" ") {
			t.Fatalf("k3s-api.e2e on host %d does not name cp2: %q", i, h)
		}
	}
	var last string
	fresh := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		ectx, ecancel := context.WithTimeout(context.Background(), 15*time.Second)
		out, err := c.h.Exec(ectx, c.hosts[1].Index, "k3s", "kubectl", "get", "nodes", "a1", "-o", "json")
		ecancel()
		var n corev1.Node
		if err != nil || json.Unmarshal(out, &n) != nil {
			last = fmt.Sprintf("kubectl get nodes a1 on cp2: %v: %.300s", err, out)
			continue
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s lastHeartbeatTime=%s (unix %d), cp1 stopped at unix %d", cond.Status,
					cond.LastHeartbeatTime.UTC().Format(time.RFC3339), cond.LastHeartbeatTime.Unix(), stoppedAt)
				fresh = cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.Unix() > stoppedAt
			}
		}
		if fresh {
			break
		}
	}
	if !fresh {
		t.Fatalf("no Ready heartbeat of a1 newer than cp1's stop read through cp2 within 60s; last: %s\ncp2 k3s log:\n%s", last,
			c.exec(1, "sh", "-c", "journalctl -u k3s --no-pager | tail -n 40"))
	}
	t.Logf("a1 Ready with a heartbeat newer than cp1's stop, read through cp2, %s after cp1 stopped (%s)", time.Since(stopped).Round(100*time.Millisecond), last)
	if st := c.exec(2, "systemctl", "is-active", "k3s-agent"); st != "active" {
		t.Errorf("k3s-agent on a1 is %s after cp1 stopped", st)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var standinOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "k3strap-e2e-standin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "standin")
	cmd := exec.Command("go", "build", "-o", out, "./e2e/cmd/standin")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, b)
	}
	return out, nil
})

// onlineInv: one server installed online from the stand-in on host 2.
const onlineInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: online
spec:
  k3s:
    version: v1.36.3+k3s1
    installScriptURL: http://{{(index .Hosts 1).Address}}:8080/install.sh
    installScriptSHA256: {{.Extra.sha}}
    releaseURL: http://{{(index .Hosts 1).Address}}:8080/releases
    config:
      kubelet-arg: [fail-cgroupv1=false]
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// TestOnlineOfficialScript: an online install downloads the install script from
// installScriptURL on the host, checks its pinned sha256, and the script downloads the
// release from releaseURL with INSTALL_K3S_VERSION. Host 2 plays get.k3s.io and GitHub: a
// labelled STAND-IN static server (e2e/cmd/standin) serving k3strap's own install script
// (which implements the official script's interface) and the simulator as the release's k3s;
// the same binary stands in for curl on host 1 (the base image has none). A wrong pin is
// refused before anything runs.
func TestOnlineOfficialScript(t *testing.T) {
	standin, err := standinOnce()
	if err != nil {
		t.Fatalf("building the stand-in: %v", err)
	}
	c := newCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := os.ReadFile(standin)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot(), "templates/install/k3s-install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(c.bin.artifacts, "k3s"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	rel := "/srv/standin/releases/download/v1.36.3+k3s1/"
	for p, f := range map[string]struct {
		b    []byte
		mode os.FileMode
	}{
		"/usr/local/bin/k3strap-standin": {sb, 0o755},
		"/srv/standin/install.sh":        {script, 0o644},
		rel + "k3s":                      {bin, 0o755},
		rel + "sha256sum-amd64.txt":      {[]byte(hex.EncodeToString(sum[:]) + "  k3s\n"), 0o644},
	} {
		if err := c.h.WriteFile(ctx, c.hosts[1].Index, p, f.b, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	c.exec(1, "systemd-run", "--unit", "k3strap-standin", "/usr/local/bin/k3strap-standin", "serve", "/srv/standin", ":8080")
	if err := c.h.WriteFile(ctx, c.hosts[0].Index, "/usr/local/bin/curl", sb, 0o755); err != nil {
		t.Fatal(err)
	}
	ssum := sha256.Sum256(script)

	c.writeInventory(onlineInv, map[string]any{"sha": strings.Repeat("0", 64)})
	r := c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code == 0 || !strings.Contains(r.stdout, "installScriptSHA256") {
		t.Fatalf("a wrong pin was not refused (exit %d)", r.code)
	}

	c.writeInventory(onlineInv, map[string]any{"sha": hex.EncodeToString(ssum[:])})
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	ran := false
	for _, e := range r.events {
		if e.Host == "cp1" && e.Step == "install" && strings.Contains(e.Message, "the official K3s install script from http://"+c.hosts[1].Address+":8080/install.sh") {
			ran = true
		}
	}
	if !ran {
		t.Error("no install event names the official script and its URL")
	}
	if v := c.exec(0, "k3s", "--version"); !strings.Contains(v, "v1.36.3+k3s1") {
		t.Errorf("k3s --version: %s", v)
	}
	if got := c.exec(0, "sha256sum", "/usr/local/bin/k3s"); !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
		t.Errorf("the installed k3s is not the release's: %s", got)
	}
}
