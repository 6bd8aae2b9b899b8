// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/fleet/sitestatus"
	"github.com/k3strap/k3strap/pull"
)

// realPullSite is the site inventory the Git repository holds for pull mode: one real-K3s
// server (the harness's host name, so that the box is its host), no SSH settings (the box dials
// nobody), the token not in it (the box's token file). Extra.tier and Extra.taint are the
// change a later commit makes.
const realPullSite = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: store9
spec:
{{template "spec-k3s-real" .}}
  hosts:
    - name: {{(index .Hosts 0).Name}}
      address: {{(index .Hosts 0).Address}}
      role: server
      labels:
        site: store-9
{{- with .Extra.tier}}
        tier: {{.}}
{{- end}}
{{- with .Extra.taint}}
      taints:
        - {{.}}
{{- end}}
`

// siteRepo is the Git side of TestRealPull: a bare repository served by a real `git daemon`
// (Debian's git) and a working clone whose commits are signed through git's gpg.format=ssh.
type siteRepo struct {
	t            *testing.T
	base, work   string
	addr         string
	daemon       *exec.Cmd
	daemonOutput *bytes.Buffer
}

func (r *siteRepo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Site Admin", "GIT_AUTHOR_EMAIL=admin@example.com",
		"GIT_COMMITTER_NAME=Site Admin", "GIT_COMMITTER_EMAIL=admin@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes the inventory, commits it signed with key and pushes; it returns the commit.
func (r *siteRepo) commit(key string, inventory []byte, msg string) string {
	r.t.Helper()
	p := filepath.Join(r.work, "sites", "store9", "cluster.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, inventory, 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git(r.work, "add", "-A")
	r.git(r.work, "-c", "gpg.format=ssh", "-c", "user.signingkey="+key, "commit", "-q", "-S", "-m", msg)
	r.git(r.work, "push", "-q", "-f", "origin", "HEAD:main")
	return r.git(r.work, "rev-parse", "HEAD")
}

// start runs git daemon on addr (the harness gateway) and waits until it accepts connections.
func (r *siteRepo) start() {
	r.t.Helper()
	host, port, _ := net.SplitHostPort(r.addr)
	r.daemonOutput = &bytes.Buffer{}
	r.daemon = exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--verbose",
		"--listen="+host, "--port="+port, "--base-path="+r.base, r.base)
	r.daemon.Stdout, r.daemon.Stderr = r.daemonOutput, r.daemonOutput
	// `git daemon` runs git-daemon as its child: a process group of their own, ended as one.
	r.daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.daemon.WaitDelay = 5 * time.Second
	if err := r.daemon.Start(); err != nil {
		r.t.Fatalf("git daemon: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("git daemon does not listen on %s: %v\n%s", r.addr, err, r.daemonOutput)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the git daemon this test started (its process group alone).
func (r *siteRepo) stop() {
	if r.daemon == nil || r.daemon.Process == nil {
		return
	}
	_ = syscall.Kill(-r.daemon.Process.Pid, syscall.SIGKILL)
	_ = r.daemon.Wait()
	r.daemon = nil
}

// TestRealPull (real K3s): pull mode on one fresh box, a real `git daemon` on the harness
// gateway holding the site's inventory, nothing pushed over SSH (docs/edge-pull.md).
//   - `k3strap pull install` on the box writes the service and timer and enables the timer;
//     again, it changes nothing;
//   - the first signed commit (pinned key) is fetched, verified and converged by the unit:
//     K3s installed in local mode, status applied with desired = applied = that commit;
//   - a signed commit whose taint K3s's own pods do not tolerate is refused by the engine's
//     preflight (FirstNodeTaints, exit 3), not applied;
//   - a signed commit adding a node label and a taint is applied and visible on the node;
//   - a commit signed by an unknown key and a commit whose signature does not match (altered
//     after signing) are refused: status refused with the reason and a fix, applied revision
//     and node unchanged;
//   - git daemon stopped: status "source unreachable", the applied revision kept, the node
//     Ready; restarted: the next run reaches the source again (sourceReachable, up to date).
func TestRealPull(t *testing.T) {
	for _, b := range []string{"git", "ssh-keygen"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("pull test skipped: %s is not installed (Debian git, openssh-client)", b)
		}
	}
	start := time.Now()
	c := newRealCluster(t, 1)
	box := c.hosts[0]
	gw := c.h.PublicNet() + ".1"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Keys, the repository and its server.
	keys := t.TempDir()
	keygen := func(name string) string {
		p := filepath.Join(keys, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
		return p
	}
	pinned, other := keygen("pinned"), keygen("other")
	pub, err := os.ReadFile(pinned + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	repo := &siteRepo{t: t, base: t.TempDir(), work: t.TempDir(), addr: net.JoinHostPort(gw, fmt.Sprint(freePort(t, gw)))}
	repo.git(repo.base, "init", "-q", "--bare", "-b", "main", "site.git")
	repo.git(repo.work, "init", "-q", "-b", "main")
	repo.git(repo.work, "remote", "add", "origin", filepath.Join(repo.base, "site.git"))
	repo.start()
	t.Cleanup(repo.stop)
	inventory := func(extra map[string]any) []byte {
		b, err := os.ReadFile(c.writeInventory(realPullSite, extra))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rev1 := repo.commit(pinned, inventory(nil), "store9: one server")

	// The box: k3strap, the airgap files at the paths the inventory names, the token, the
	// pinned signer and the configuration.
	write := func(path string, data []byte, mode os.FileMode) {
		t.Helper()
		if err := c.h.WriteFile(ctx, box.Index, path, data, mode); err != nil {
			t.Fatalf("writing %s on %s: %v", path, box.Name, err)
		}
	}
	copyFile := func(src, dst string, mode os.FileMode) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		c.exec(0, "mkdir", "-p", filepath.Dir(dst))
		write(dst, b, mode)
	}
	r := c.real
	copyFile(c.bin.k3strap, "/var/lib/k3strap/k3strap", 0o755)
	for _, f := range []string{r.Binary, r.Images, r.InstallSh, r.Checksums} {
		if f != "" {
			copyFile(f, f, 0o644)
		}
	}
	write("/var/lib/k3strap/token", []byte("pullE2eToken0123456789abcdef\n"), 0o600)
	c.exec(0, "mkdir", "-p", "/etc/k3strap")
	write("/etc/k3strap/allowed_signers", append([]byte(`admin@example.com namespaces="git" `), pub...), 0o644)
	cfg := fmt.Sprintf(`# pull mode of %s (TestRealPull)
host: %s
source:
  git:
    url: git://%s/site.git
    ref: main
    path: sites/store9/cluster.yaml
verify:
  allowedSigners: /etc/k3strap/allowed_signers
interval: 1h
retryFor: 15s
`, box.Name, box.Name, repo.addr)
	write(pull.ConfigPath, []byte(cfg), 0o644)

	// pull install: units written and the timer enabled; a second install changes nothing.
	bin := "/var/lib/k3strap/k3strap"
	if out := c.exec(0, bin, "pull", "install"); !strings.Contains(out, "written") {
		t.Errorf("pull install: %s", out)
	}
	if out := c.exec(0, bin, "pull", "install"); !strings.Contains(out, "unchanged") {
		t.Errorf("pull install again: %s, want the units unchanged", out)
	}
	if out, _ := c.execErr(0, 20*time.Second, "systemctl", "is-enabled", pull.TimerName); out != "enabled" {
		t.Errorf("%s is %q, want enabled", pull.TimerName, out)
	}
	// The test drives the service itself, so that it knows which run saw which commit.
	c.exec(0, "systemctl", "stop", pull.TimerName)

	// runUnit runs the pull service once (the timer's unit; start waits for a oneshot, or for
	// the run the timer started) and returns the status it wrote.
	runUnit := func(what string) pull.Status {
		t.Helper()
		began := time.Now()
		_, _ = c.execErr(0, 6*time.Minute, "systemctl", "start", pull.ServiceName)
		out := c.exec(0, "cat", filepath.Join(pull.DefaultStateDir, pull.StatusName))
		var st pull.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%s: status.json: %v\n%s", what, err, out)
		}
		t.Logf("%s: %s in %s", what, st.Line(), time.Since(began).Round(time.Second))
		return st
	}
	journal := func() string {
		out, _ := c.execErr(0, 30*time.Second, "journalctl", "-u", pull.ServiceName, "--no-pager", "-n", "150", "-o", "cat")
		return out
	}

	st := runUnit("first commit")
	if st.Result.State != pull.ResultApplied || st.AppliedRevision != rev1 || st.DesiredRevision != rev1 || !st.SourceReachable || st.Result.ExitCode != 0 || !strings.Contains(st.Signer, "admin@example.com") {
		t.Fatalf("first commit: status %+v, want %s applied (exit 0), signed by admin@example.com\njournal:\n%s", st, rev1, journal())
	}
	c.waitNodeFor(box.Name, true, 3*time.Minute)
	t.Logf("box converged from Git (K3s installed in local mode) %s since start", time.Since(start).Round(time.Second))

	// From now on the box reports every run into a management cluster — its own K3s here (any
	// Kubernetes is one): the CRD installed, the site's own credential made on the box, and
	// pull.yaml naming both (docs/fleet.md "Status in a management cluster").
	const admin, siteCred, siteName = "/etc/rancher/k3s/k3s.yaml", "/etc/k3strap/mgmt.kubeconfig", "store-9"
	c.exec(0, bin, "fleet", "management", "install", "--kubeconfig", admin, "--output", "plain")
	c.exec(0, bin, "fleet", "management", "credential", "--kubeconfig", admin, "--site", siteName, "-O", siteCred, "--output", "plain")
	write(pull.ConfigPath, []byte(cfg+"management:\n  kubeconfig: "+siteCred+"\n  site: "+siteName+"\n"), 0o644)
	// siteStatus reads the box's SiteStatus object through the admin kubeconfig.
	siteStatus := func() sitestatus.Status {
		t.Helper()
		var obj struct {
			Status sitestatus.Status `json:"status"`
		}
		c.kubectlJSON(0, &obj, "get", "sitestatuses", "-n", sitestatus.Namespace, siteName)
		return obj.Status
	}

	// A signed commit the engine's safety rules refuse (preflight FirstNodeTaints: a taint on
	// the only node that K3s's own pods do not tolerate): not applied, the reason and fix in
	// the status, exit 3.
	repo.commit(pinned, inventory(map[string]any{"taint": "dedicated=edge:NoSchedule"}), "store9: dedicated")
	st = runUnit("taint the system pods do not tolerate")
	if st.Result.State != pull.ResultFailed || st.Result.ExitCode != 3 || st.Result.Step != "converge/preflight" ||
		!strings.Contains(st.Result.Message, "FirstNodeTaints") || st.Result.Fix == "" || st.AppliedRevision != rev1 {
		t.Errorf("untolerated taint: status %+v, want failed at converge/preflight (exit 3, FirstNodeTaints, a fix), %s still applied", st, rev1)
	}

	// A node label and a taint, in a signed commit.
	rev2 := repo.commit(pinned, inventory(map[string]any{"tier": "edge", "taint": "CriticalAddonsOnly=true:NoExecute"}), "store9: edge tier, critical add-ons only")
	st = runUnit("label and taint commit")
	if st.Result.State != pull.ResultApplied || st.AppliedRevision != rev2 {
		t.Fatalf("label and taint commit: status %+v, want %s applied\njournal:\n%s", st, rev2, journal())
	}
	checkNode := func(when string) {
		t.Helper()
		var n corev1.Node
		c.kubectlJSON(0, &n, "get", "node", box.Name)
		tainted := slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
			return tt.Key == "CriticalAddonsOnly" && tt.Value == "true" && tt.Effect == corev1.TaintEffectNoExecute
		})
		if n.Labels["tier"] != "edge" || n.Labels["site"] != "store-9" || !tainted {
			t.Errorf("%s: node %s labels %v taints %v, want tier=edge, site=store-9 and CriticalAddonsOnly=true:NoExecute", when, box.Name, n.Labels, n.Spec.Taints)
		}
	}
	checkNode("after the signed change")
	if ss := siteStatus(); ss.Source != sitestatus.SourcePull || ss.AppliedRevision != rev2 || ss.DesiredRevision != rev2 ||
		ss.NodesReady != 1 || ss.NodesTotal != 1 || ss.Version != r.Version || ss.LastResult == nil || ss.LastResult.ExitCode != 0 ||
		ss.SourceReachable == nil || !*ss.SourceReachable || time.Since(ss.LastSeen) > 5*time.Minute {
		t.Errorf("the management cluster's SiteStatus %s after the applied change: %+v (last result %+v)", siteName, ss, ss.LastResult)
	}
	if j := journal(); !strings.Contains(j, "status reported to the management cluster") {
		t.Errorf("the journal does not say the status was reported:\n%s", lastLines(j, 20))
	}
	if rep := st.Report; rep == nil || !rep.Reported || rep.Site != siteName {
		t.Errorf("status.json's report after the applied change: %+v, want reported as %s", rep, siteName)
	}

	// A commit signed by an unknown key: refused, nothing applied.
	bad := inventory(map[string]any{"tier": "rogue"})
	repo.commit(other, bad, "store9: rogue tier")
	st = runUnit("unknown key")
	if st.Result.State != pull.ResultRefused || st.AppliedRevision != rev2 || st.Result.ExitCode != 2 ||
		!strings.Contains(st.Result.Message, "unknown key") || st.Result.Fix == "" {
		t.Errorf("unknown key: status %+v, want refused (exit 2) naming the unknown key, with a fix; %s still applied", st, rev2)
	}
	// A commit whose signature does not match: the pinned key's signature over another
	// message (the object altered after signing), pushed as main.
	repo.commit(pinned, inventory(map[string]any{"tier": "rogue-2"}), "store9: rogue tier, signed")
	raw := repo.git(repo.work, "cat-file", "commit", "HEAD") + "\n"
	forged := filepath.Join(t.TempDir(), "forged")
	if err := os.WriteFile(forged, []byte(strings.Replace(raw, "rogue tier, signed", "harmless", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	h := repo.git(repo.work, "hash-object", "-t", "commit", "-w", forged)
	repo.git(repo.work, "push", "-q", "-f", "origin", h+":refs/heads/main")
	st = runUnit("altered commit")
	if st.Result.State != pull.ResultRefused || st.AppliedRevision != rev2 || !strings.Contains(st.Result.Message, "signature does not match") {
		t.Errorf("altered commit: status %+v, want refused (signature does not match); %s still applied", st, rev2)
	}
	checkNode("after the refused commits")
	if j := journal(); !strings.Contains(j, "REFUSED revision") {
		t.Errorf("the journal lacks the refusals:\n%s", j)
	}

	// The source stopped: the box keeps its state and says so; back: it recovers.
	repo.stop()
	st = runUnit("git daemon stopped")
	if st.Result.State != pull.ResultUnreachable || st.SourceReachable || !strings.HasPrefix(st.SourceMessage, "source unreachable") || st.AppliedRevision != rev2 {
		t.Errorf("source stopped: status %+v, want source unreachable, %s kept", st, rev2)
	}
	c.waitNodeFor(box.Name, true, time.Minute)
	if ss := siteStatus(); ss.SourceReachable == nil || *ss.SourceReachable || !strings.HasPrefix(ss.SourceMessage, "source unreachable") ||
		ss.AppliedRevision != rev2 || ss.LastResult == nil || ss.LastResult.ExitCode != st.Result.ExitCode {
		t.Errorf("the management cluster's SiteStatus %s with the source stopped: %+v, want source unreachable, %s applied", siteName, ss, rev2)
	}
	repo.start()
	rev5 := repo.commit(pinned, inventory(map[string]any{"tier": "edge", "taint": "CriticalAddonsOnly=true:NoExecute"}), "store9: back to the reviewed state")
	st = runUnit("git daemon back")
	if !st.SourceReachable || st.SourceMessage != "ok" || st.AppliedRevision != rev5 || st.Result.State != pull.ResultApplied {
		t.Errorf("source back: status %+v, want reachable and %s applied\njournal:\n%s", st, rev5, journal())
	}
	checkNode("after the source came back")
	if ss := siteStatus(); ss.SourceReachable == nil || !*ss.SourceReachable || ss.AppliedRevision != rev5 || ss.LastResult == nil || ss.LastResult.ExitCode != 0 {
		t.Errorf("the management cluster's SiteStatus %s after the source came back: %+v, want %s applied", siteName, ss, rev5)
	}
	t.Logf("TestRealPull took %s", time.Since(start).Round(time.Second))
}
