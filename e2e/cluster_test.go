// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/events"
)

// clusterInv is an inventory of .Extra.servers servers and .Extra.agents agents (the first
// agent labelled and tainted), version .Extra.version from .Extra.artifacts.
const clusterInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: ha
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
{{- if .Extra.config}}
{{.Extra.config}}
{{- end}}
  ssh:
    user: {{or .Extra.user "root"}}
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 3s
{{- if .Extra.sudoPasswordEnv}}
    sudoPasswordEnv: {{.Extra.sudoPasswordEnv}}
{{- end}}
{{- if .Extra.bastion}}
    bastion:
      address: {{.Extra.bastion}}
{{- end}}
  hosts:
{{- range $i, $h := .Hosts}}
{{- if lt $i (index $.Extra "servers")}}
    - name: cp{{inc $i}}
      address: {{$h.Address}}
      role: server
{{- else if lt $i (add (index $.Extra "servers") (index $.Extra "agents"))}}
    - name: a{{sub $i (index $.Extra "servers")}}
      address: {{$h.Address}}
      role: agent
{{- if eq $i (index $.Extra "servers")}}
      labels: {site: plant-3}
      taints: [dedicated=edge:NoExecute]
{{- end}}
{{- end}}
{{- end}}
`

func clusterExtra(servers, agents int, more map[string]any) map[string]any {
	m := map[string]any{"servers": servers, "agents": agents}
	for k, v := range more {
		m[k] = v
	}
	return m
}

func statusOf(t *testing.T, r run) map[string]events.HostResult {
	t.Helper()
	out := map[string]events.HostResult{}
	for _, h := range r.summary(t).Hosts {
		out[h.Host] = h
	}
	return out
}

// firstIndex returns the index of the first event matching m, -1 if none.
func firstIndex(r run, m func(events.Event) bool) int {
	for i, e := range r.events {
		if m(e) {
			return i
		}
	}
	return -1
}

func isHost(host string, ty events.Type, step string) func(events.Event) bool {
	return func(e events.Event) bool { return e.Host == host && e.Type == ty && (step == "" || e.Step == step) }
}

// hostSnapshot fingerprints what k3strap manages on host i: files and the service's identity.
func (c *testCluster) hostSnapshot(i int) string {
	return c.exec(i, "sh", "-c", "find /etc/rancher /usr/local/bin /var/lib/k3strap /etc/systemd/system -type f 2>/dev/null | sort | xargs -r sha256sum; systemctl show -p InvocationID -p NRestarts k3s k3s-agent 2>/dev/null")
}

// TestWholeCluster: 3 servers + 2 agents apply end to end, servers joining one at a time;
// adding a third agent touches only it; dry-run changes nothing and shows the diff; upgrade to
// the next simulator version goes server by server; reset of an agent then apply brings it
// back.
func TestWholeCluster(t *testing.T) {
	c := newCluster(t, 6)
	c.writeInventory(clusterInv, clusterExtra(3, 2, nil))

	r := c.k3strap(6*time.Minute, "apply", "--kubeconfig-out", c.dir+"/ha.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	st := statusOf(t, r)
	for _, n := range []string{"cp1", "cp2", "cp3", "a1", "a2"} {
		if st[n].Status != events.StatusChanged {
			t.Errorf("%s: %s (%s)", n, st[n].Status, st[n].Message)
		}
	}
	// One server at a time: cp2's node is Ready before cp3 is started. (Their files are
	// uploaded and the install script run, unit disabled and stopped, while the first server
	// boots: the stage step.)
	cp2Ready := firstIndex(r, func(e events.Event) bool { return e.Host == "cp2" && e.Step == "node" && e.Status == events.StatusOK })
	cp3Starts := firstIndex(r, func(e events.Event) bool {
		return e.Host == "cp3" && (e.Step == "start" || e.Step == "converge")
	})
	if cp2Ready < 0 || cp3Starts < 0 || cp2Ready > cp3Starts {
		t.Errorf("servers did not join one at a time: cp2 ready at event %d, cp3 started at %d", cp2Ready, cp3Starts)
	}
	// Overlap: the joining hosts' files were uploaded before the first server's
	// subnet.env milestone, and the agents started before it too is allowed, not required.
	subnet := firstIndex(r, func(e events.Event) bool { return e.Type == events.Milestone && e.Milestone.Name == "subnet-env" })
	staged := firstIndex(r, func(e events.Event) bool { return e.Host == "a2" && e.Step == "stage" })
	if subnet < 0 || staged < 0 {
		t.Errorf("no stage step for a2 (event %d) or no subnet-env milestone (event %d)", staged, subnet)
	}
	nodes := c.exec(0, "k3s", "kubectl", "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.node-role\\.kubernetes\\.io/etcd},{.status.nodeInfo.kubeletVersion} {end}")
	for _, want := range []string{"cp1=true,v1.36.3+k3s1", "cp2=true,", "cp3=true,", "a1=,", "a2=,"} {
		if !strings.Contains(nodes, want) {
			t.Errorf("nodes %q lack %q", nodes, want)
		}
	}
	if got := c.exec(1, "cat", "/etc/rancher/k3s/config.yaml"); !strings.Contains(got, "server: https://"+c.hosts[0].Address+":6443") {
		t.Errorf("cp2 config does not join cp1:\n%s", got)
	}
	if got := c.exec(0, "cat", "/etc/rancher/k3s/config.yaml"); !strings.Contains(got, "cluster-init: true") {
		t.Errorf("cp1 config lacks cluster-init:\n%s", got)
	}

	// Adding a host touches only that host.
	c.writeInventory(clusterInv, clusterExtra(3, 3, nil))
	r = c.k3strap(4*time.Minute, "apply", "--kubeconfig-out", c.dir+"/ha.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply with a third agent exited %d", r.code)
	}
	st = statusOf(t, r)
	for n, h := range st {
		want := events.StatusUnchanged
		if n == "a3" {
			want = events.StatusChanged
		}
		if h.Status != want {
			t.Errorf("after adding a3: %s is %s (%s), want %s", n, h.Status, h.Message, want)
		}
	}

	// Dry-run of a changed setting: reported with a diff, nothing changes on any host.
	before := make([]string, 6)
	for i := range before {
		before[i] = c.hostSnapshot(i)
	}
	c.writeInventory(clusterInv, clusterExtra(3, 3, map[string]any{"config": "      node-external-ip: [192.0.2.1]"}))
	r = c.k3strap(2*time.Minute, "apply", "--dry-run")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("dry-run exited %d", r.code)
	}
	diffs := 0
	for _, e := range r.events {
		if e.Diff != "" && strings.Contains(e.Diff, "+node-external-ip:") {
			diffs++
		}
	}
	if diffs != 6 {
		t.Errorf("dry-run showed the config diff for %d hosts, want 6", diffs)
	}
	if len(r.ofType(events.UploadProgress)) > 0 {
		t.Error("dry-run uploaded")
	}
	for i := range before {
		if after := c.hostSnapshot(i); after != before[i] {
			t.Errorf("dry-run changed host %s", c.hosts[i].Name)
		}
	}
	c.writeInventory(clusterInv, clusterExtra(3, 3, nil))

	// Upgrade to the next version: servers one at a time, each drained, Ready on the new
	// version, uncordoned, before the next; then the agents.
	next := filepath.Join(c.bin.artifacts, "next")
	c.writeInventory(clusterInv, clusterExtra(3, 3, map[string]any{"version": "v1.36.4+k3s1", "artifacts": next}))
	r = c.k3strap(8*time.Minute, "upgrade", "--kubeconfig-out", c.dir+"/ha.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("upgrade exited %d", r.code)
	}
	prevDone := -1
	for _, n := range []string{"cp1", "cp2", "cp3"} {
		drained := firstIndex(r, func(e events.Event) bool { return e.Host == n && e.Step == "drain" })
		uncordoned := firstIndex(r, func(e events.Event) bool { return e.Host == n && e.Step == "uncordon" })
		if drained < 0 || uncordoned < 0 || drained < prevDone || uncordoned < drained {
			t.Errorf("%s: drained at event %d, uncordoned at %d, previous server done at %d", n, drained, uncordoned, prevDone)
		}
		prevDone = uncordoned
	}
	for _, n := range []string{"a1", "a2", "a3"} {
		if i := firstIndex(r, func(e events.Event) bool { return e.Host == n && e.Step == "drain" }); i < prevDone {
			t.Errorf("agent %s drained (event %d) before the last server was done (%d)", n, i, prevDone)
		}
	}
	nodes = c.exec(0, "k3s", "kubectl", "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable};{end}")
	if strings.Count(nodes, "v1.36.4+k3s1") != 6 || strings.Contains(nodes, "true") {
		t.Errorf("after the upgrade: %q, want 6 nodes on v1.36.4+k3s1, none cordoned", nodes)
	}
	// A downgrade is refused.
	c.writeInventory(clusterInv, clusterExtra(3, 3, nil))
	r = c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 || !strings.Contains(r.stdout, "downgrade") {
		t.Errorf("downgrade: exit %d, want 3 naming the downgrade", r.code)
	}
	c.writeInventory(clusterInv, clusterExtra(3, 3, map[string]any{"version": "v1.36.4+k3s1", "artifacts": next}))

	// Reset one agent, then apply brings it back.
	r = c.k3strap(2*time.Minute, "reset", "--host", "a3", "--yes")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("reset exited %d", r.code)
	}
	if out := c.exec(5, "sh", "-c", "ls /usr/local/bin/k3s /etc/rancher/k3s /var/lib/rancher/k3s 2>&1; systemctl is-active k3s-agent || true"); !strings.Contains(out, "No such file") || strings.Contains(out, "\nactive") {
		t.Errorf("a3 not clean after reset:\n%s", out)
	}
	if nodes := c.exec(0, "k3s", "kubectl", "get", "nodes", "-o", "name"); strings.Contains(nodes, "node/a3") {
		t.Errorf("a3's Node object survived the reset: %s", nodes)
	}
	r = c.k3strap(4*time.Minute, "apply", "--kubeconfig-out", c.dir+"/ha.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply after reset exited %d", r.code)
	}
	if st := statusOf(t, r); st["a3"].Status != events.StatusChanged || st["a1"].Status != events.StatusUnchanged {
		t.Errorf("after reset+apply: a3 %s, a1 %s", st["a3"].Status, st["a1"].Status)
	}

	// kubeconfig --merge keeps other contexts and switches to the new one.
	other := filepath.Join(c.dir, "merged.kubeconfig")
	if err := os.WriteFile(other, []byte(otherKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(time.Minute, "kubeconfig", "--merge", "--kubeconfig-out", other, "--context", "edge")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("kubeconfig --merge exited %d", r.code)
	}
	cfg, err := clientcmd.LoadFromFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "edge" || cfg.Contexts["elsewhere"] == nil || cfg.Clusters["edge"] == nil || cfg.Clusters["edge"].Server != "https://"+c.hosts[0].Address+":6443" {
		t.Errorf("merged kubeconfig: current %q, contexts %v", cfg.CurrentContext, cfg.Contexts)
	}
}

const otherKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://192.0.2.10:6443"}
  name: elsewhere
users:
- name: elsewhere
  user: {token: abc}
contexts:
- context: {cluster: elsewhere, user: elsewhere}
  name: elsewhere
current-context: elsewhere
`

// TestHostCutMidApply: an agent whose link is cut during apply is reported by name, the others
// finish, and a re-run after healing completes.
func TestHostCutMidApply(t *testing.T) {
	c := newCluster(t, 3)
	c.writeInventory(clusterInv, clusterExtra(1, 2, nil))
	a := c.start(4*time.Minute, "apply", "--ssh-keepalive=1s", "--kubeconfig-out", c.dir+"/k")
	a.waitFor(t, time.Minute, "the first server's install", func(e events.Event) bool { return e.Host == "cp1" && e.Type == events.UploadProgress })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Cut(ctx, c.hosts[2].Index); err != nil {
		t.Fatal(err)
	}
	r := a.wait(t)
	defer r.dump(t)
	if r.code != 4 {
		t.Fatalf("exit %d, want 4 (a host failed)", r.code)
	}
	st := statusOf(t, r)
	if st["a2"].Status != events.StatusFailed || st["cp1"].Status != events.StatusChanged || st["a1"].Status != events.StatusChanged {
		t.Fatalf("statuses: cp1 %s, a1 %s, a2 %s (%s)", st["cp1"].Status, st["a1"].Status, st["a2"].Status, st["a2"].Message)
	}
	s := r.summary(t)
	if !strings.Contains(strings.Join(s.Next, " "), "a2") {
		t.Errorf("summary does not say to look at a2: %v", s.Next)
	}
	if err := c.h.Heal(ctx, c.hosts[2].Index); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(4*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("re-run after healing exited %d", r.code)
	}
	st = statusOf(t, r)
	if st["a2"].Status != events.StatusChanged || st["a1"].Status != events.StatusUnchanged || st["cp1"].Status != events.StatusUnchanged {
		t.Errorf("re-run: cp1 %s, a1 %s, a2 %s", st["cp1"].Status, st["a1"].Status, st["a2"].Status)
	}
}

// TestSudoPasswordUser: a user whose sudo wants a password installs with the password from an
// environment variable; the password appears nowhere in k3strap's output or the host's logs.
func TestSudoPasswordUser(t *testing.T) {
	c := newCluster(t, 1)
	pw, err := c.h.PasswordOf("pwuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_SUDO_PASSWORD", pw)
	c.writeInventory(clusterInv, clusterExtra(1, 0, map[string]any{"user": "pwuser", "sudoPasswordEnv": "E2E_SUDO_PASSWORD"}))
	r := c.k3strap(3*time.Minute, "apply", "--verbose", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply as pwuser exited %d", r.code)
	}
	if strings.Contains(r.stdout+r.stderr, pw) {
		t.Error("the sudo password appears in k3strap's output")
	}
	logs := c.exec(0, "sh", "-c", "journalctl --no-pager -o cat 2>/dev/null; cat /var/log/auth.log 2>/dev/null; true")
	if strings.Contains(logs, pw) {
		t.Error("the sudo password appears in the host's logs")
	}
	if !strings.Contains(logs, "sudo") {
		t.Error("no sudo activity in the host's journal: the check above proves nothing")
	}
	// A second run is a no-op: the facts script read the checksums of root's 0600 files
	// (config.yaml, the token file) with the password on its stdin.
	r = c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("second apply as pwuser exited %d", r.code)
	}
	if st := statusOf(t, r); st["cp1"].Status != events.StatusUnchanged {
		t.Errorf("second apply as pwuser: %s (%s)", st["cp1"].Status, st["cp1"].Message)
	}
	if strings.Contains(r.stdout+r.stderr, pw) {
		t.Error("the sudo password appears in the second run's output")
	}
}

// TestSudoPasswordNotNeeded: a sudo password given for hosts whose sudo needs none (the
// `deploy` user's NOPASSWD rule) is never sent. Such a sudo -S reads nothing, so a password line
// sent ahead of a command's input reached the command: the path probe read it as its program
// (NodePaths failed, exit 3), and a file written through sudo would have started with it.
func TestSudoPasswordNotNeeded(t *testing.T) {
	c := newCluster(t, 2)
	const pw = "e2e-unneeded-sudo-pw"
	t.Setenv("E2E_SUDO_PASSWORD", pw)
	c.writeInventory(clusterInv, clusterExtra(1, 1, map[string]any{"user": "deploy", "sudoPasswordEnv": "E2E_SUDO_PASSWORD"}))
	r := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply as deploy with a password it does not need exited %d", r.code)
	}
	paths := false
	for _, e := range r.events {
		if e.Phase == events.PhasePaths && e.Type == events.PhaseFinished {
			paths = e.Status == events.StatusOK
		}
	}
	if !paths {
		t.Error("the path check between the two hosts did not pass")
	}
	if strings.Contains(r.stdout+r.stderr, pw) {
		t.Error("the sudo password appears in k3strap's output")
	}
	for i := range 2 {
		files := c.exec(i, "sh", "-c", "grep -rl -F -- "+pw+" /etc/rancher /var/lib/rancher/k3s/server/token /etc/systemd/system 2>/dev/null; true")
		if strings.TrimSpace(files) != "" {
			t.Errorf("host %d: the sudo password was written into %s", i, strings.TrimSpace(files))
		}
	}
}

// TestJumpHostOnly: hosts reachable only through one bastion host; once through the
// inventory's ssh.bastion, once through ProxyJump in an ssh_config file.
func TestJumpHostOnly(t *testing.T) {
	c := newClusterTopology(t, 2, "bastion")
	b := c.h.Bastion()
	if b == nil {
		t.Fatal("no bastion")
	}
	c.writeInventory(clusterInv, clusterExtra(1, 1, map[string]any{"bastion": b.Address}))
	r := c.k3strap(4*time.Minute, "apply", "--ssh-config=none", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply through the bastion exited %d", r.code)
	}
	if !strings.Contains(r.stdout, "via "+b.Address) {
		t.Error("connections not reported as going through the bastion")
	}
	// The same through ~/.ssh/config's ProxyJump, with no bastion in the inventory.
	sshcfg := filepath.Join(c.dir, "ssh_config")
	cfg := "Host " + c.h.PrivateNet() + ".*\n  ProxyJump root@" + b.Address + "\n  IdentityFile " + c.h.KeyPath() + "\n"
	if err := os.WriteFile(sshcfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.writeInventory(clusterInv, clusterExtra(1, 1, nil))
	r = c.k3strap(2*time.Minute, "apply", "--ssh-config="+sshcfg, "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply through ProxyJump exited %d", r.code)
	}
	for _, h := range r.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("%s: %s", h.Host, h.Status)
		}
	}
}

// TestRunLock: a fresh lock held by another run is refused naming the holder; a stale one is
// taken over.
func TestRunLock(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, nil)
	if r := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k"); r.code != 0 {
		r.dump(t)
		t.Fatalf("apply exited %d", r.code)
	}
	c.exec(0, "sh", "-c", "printf 'someid\\nalice@laptop (pid 42, k3strap apply since 2026-11-22T00:00:00Z)\\n' > /var/lib/k3strap/run.lock")
	r := c.k3strap(time.Minute, "apply")
	defer r.dump(t)
	if r.code != 4 || !strings.Contains(r.stdout, "alice@laptop") {
		t.Fatalf("held lock: exit %d, want 4 naming alice@laptop", r.code)
	}
	c.exec(0, "touch", "-d", "10 minutes ago", "/var/lib/k3strap/run.lock")
	r = c.k3strap(time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 || !strings.Contains(r.stdout, "stale lock") {
		t.Fatalf("stale lock: exit %d, want 0 with a take-over warning", r.code)
	}
	if out := c.exec(0, "sh", "-c", "ls /var/lib/k3strap/run.lock 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("lock not released: %s", out)
	}
}
