// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// cli runs `k3s args...` in-process on root (a stopped or running node) with env.
func cli(root paths.Root, env map[string]string, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := app.Main(context.Background(), app.Options{Args: append([]string{"k3s"}, args...), Root: root,
		Getenv: func(k string) string { return env[k] }, Stdout: &out, Stderr: &errb, Version: "v1.36.3+k3s1", Hostname: "cp1"})
	return out.String(), errb.String(), code
}

// TestDay2CLI: etcd-snapshot save/ls/delete on an embedded-etcd server (refused without),
// --cluster-reset with a restore path brings the snapshot's objects back and exits 0,
// certificate rotate backs up tls/ and the next start issues new leaf certificates, token
// rotate replaces the server token (the old one then gets 401).
func TestDay2CLI(t *testing.T) {
	t.Parallel()
	cfg := plainConfig + "cluster-init: true\n"
	root := newRoot(t, map[string]string{"/etc/rancher/k3s/config.yaml": cfg, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"})
	s := startSim(t, "server", root, "cp1", nil, nil)
	s.waitReadyz(10 * time.Second)
	if _, e, code := s.kubectl("", "create", "namespace", "before"); code != 0 {
		t.Fatalf("create namespace: %s", e)
	}
	_, e, code := cli(root, nil, "etcd-snapshot", "save", "--name", "pre")
	m := regexp.MustCompile(`Snapshot (pre-cp1-\d+) saved\.`).FindStringSubmatch(e)
	if code != 0 || m == nil {
		t.Fatalf("save: %d %s", code, e)
	}
	snap := root.Path("/var/lib/rancher/k3s/server/db/snapshots/" + m[1])
	if fi, err := os.Stat(snap); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v", err)
	}
	if out, _, _ := cli(root, nil, "etcd-snapshot", "ls"); !strings.HasPrefix(out, "Name") || !strings.Contains(out, m[1]+" ") || !strings.Contains(out, "file:///var/lib/rancher/k3s/server/db/snapshots/"+m[1]) {
		t.Errorf("ls:\n%s", out)
	}
	if _, e, code := s.kubectl("", "create", "namespace", "after"); code != 0 {
		t.Fatalf("create namespace: %s", e)
	}
	time.Sleep(300 * time.Millisecond)

	// Token rotate against the running server.
	old := serverToken(t, s)
	if out, e, code := cli(root, map[string]string{"K3S_URL": s.url()}, "token", "rotate", "--new-token", "n3wpassw0rd"); code != 0 || !strings.Contains(out, "Token rotated") {
		t.Fatalf("token rotate: %d %s %s", code, out, e)
	}
	if now := serverToken(t, s); now == old || !strings.HasSuffix(now, "::server:n3wpassw0rd") {
		t.Errorf("server token after rotate: %q", now)
	}
	if _, e, code := cli(root, map[string]string{"K3S_URL": s.url(), "K3S_TOKEN": old}, "token", "rotate"); code == 0 || !strings.Contains(e, "401") {
		t.Errorf("rotate with the old token: %d %s", code, e)
	}
	s.stop()

	// Certificate rotate with K3s stopped.
	adminCrt := root.Path("/var/lib/rancher/k3s/server/tls/client-admin.crt")
	before, _ := os.ReadFile(adminCrt)
	if _, e, code := cli(root, nil, "certificate", "rotate"); code != 0 || !strings.Contains(e, "Successfully backed up certificates to /var/lib/rancher/k3s/server/tls-") {
		t.Fatalf("certificate rotate: %d %s", code, e)
	}
	if _, err := os.Stat(adminCrt); err == nil {
		t.Error("client-admin.crt survived the rotation")
	}
	if _, err := os.Stat(root.Path("/var/lib/rancher/k3s/server/tls/server-ca.key")); err != nil {
		t.Error("the CA went with the rotation")
	}

	// Cluster reset with the snapshot, then a normal start: "after" is gone, "before" stays.
	_, e, code = cli(root, nil, "server", "--cluster-reset", "--cluster-reset-restore-path="+"/var/lib/rancher/k3s/server/db/snapshots/"+m[1])
	if code != 0 || !strings.Contains(e, "Managed etcd cluster membership has been reset, restart without --cluster-reset flag now") {
		t.Fatalf("cluster-reset: %d %s", code, e)
	}
	// As K3s v1.36.3: the old member data in db/etcd-old-<time>, server/tls backed up again.
	if old, _ := filepath.Glob(root.Path("/var/lib/rancher/k3s/server/db/etcd-old-*")); len(old) != 1 {
		t.Errorf("cluster-reset left %d db/etcd-old-* directories, want 1", len(old))
	}
	if tlsBackups, _ := filepath.Glob(root.Path("/var/lib/rancher/k3s/server/tls-*")); len(tlsBackups) < 1 || !strings.Contains(e, "Cluster reset: backing up certificates directory to /var/lib/rancher/k3s/server/tls-") {
		t.Errorf("cluster-reset did not back up server/tls: %v\n%s", tlsBackups, e)
	}
	s2 := startSim(t, "server", root, "cp1", []string{"--token", "n3wpassw0rd"}, nil)
	s2.waitReadyz(10 * time.Second)
	out, _, _ := s2.kubectl("", "get", "namespaces", "-o", "name")
	if !strings.Contains(out, "namespace/before") || strings.Contains(out, "namespace/after") {
		t.Errorf("namespaces after the restore: %s", out)
	}
	if after, err := os.ReadFile(adminCrt); err != nil || bytes.Equal(after, before) {
		t.Errorf("no new admin certificate after the rotation: %v", err)
	}
	if _, e, code := cli(root, nil, "etcd-snapshot", "delete", m[1]); code != 0 || !strings.Contains(e, "deleted") {
		t.Errorf("delete: %d %s", code, e)
	}

	// An agent's rotation moves its leaf certificates into agent/tls-<time>, as K3s does.
	agent := newRoot(t, map[string]string{
		"/var/lib/rancher/k3s/agent/client-kubelet.crt": "old", "/var/lib/rancher/k3s/agent/client-kubelet.key": "old",
		"/var/lib/rancher/k3s/agent/server-ca.crt": "ca",
	})
	_, e, code = cli(agent, nil, "certificate", "rotate")
	moved, _ := filepath.Glob(agent.Path("/var/lib/rancher/k3s/agent/tls-*/client-kubelet.crt"))
	if _, err := os.Stat(agent.Path("/var/lib/rancher/k3s/agent/client-kubelet.crt")); code != 0 || len(moved) != 1 || err == nil ||
		!strings.Contains(e, "Successfully backed up certificates to /var/lib/rancher/k3s/agent/tls-") {
		t.Errorf("agent certificate rotate: exit %d, moved %v, old one still there: %v\n%s", code, moved, err == nil, e)
	}
	if _, err := os.Stat(agent.Path("/var/lib/rancher/k3s/agent/server-ca.crt")); err != nil {
		t.Error("the agent's CA went with the rotation")
	}

	// Without embedded etcd: refused.
	plain := newRoot(t, map[string]string{"/etc/rancher/k3s/config.yaml": plainConfig})
	if err := os.MkdirAll(filepath.Dir(plain.Path("/var/lib/rancher/k3s/server/db/x")), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, e, code := cli(plain, nil, "etcd-snapshot", "save"); code == 0 || !strings.Contains(e, "etcd database not found") {
		t.Errorf("save without etcd: %d %s", code, e)
	}
}
