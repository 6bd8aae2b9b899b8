// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/events"
)

var wantMilestones = []string{"service-active", "api-ready", "node-registered", "uninitialized-taint-gone", "podcidr-set", "subnet-env", "node-ready"}

// TestApplySingleServer: a bare host becomes a running single-server K3s with the milestone
// timeline and a working kubeconfig; a second apply changes nothing and does not restart it.
func TestApplySingleServer(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, nil)
	kc := c.dir + "/e2e.kubeconfig"

	r := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", kc)
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	// Every milestone, once, in a plausible order, with times since the start.
	seen := map[string]float64{}
	for _, e := range r.ofType(events.Milestone) {
		m := e.Milestone
		if _, dup := seen[m.Name]; dup {
			t.Errorf("milestone %s reported twice", m.Name)
		}
		seen[m.Name] = m.Seconds
		if m.Name == "subnet-env" && !strings.Contains(m.Detail, "network 10.42.0.0/16") {
			t.Errorf("subnet-env detail %q does not show the parsed network", m.Detail)
		}
		if m.Name == "podcidr-set" && !strings.HasPrefix(m.Detail, "10.42.") {
			t.Errorf("podcidr detail %q", m.Detail)
		}
	}
	for _, m := range wantMilestones {
		if _, ok := seen[m]; !ok {
			t.Errorf("milestone %s missing (seen %v)", m, seen)
		}
	}
	if seen["api-ready"] > seen["node-registered"] || seen["node-registered"] > seen["podcidr-set"] {
		t.Errorf("milestones out of order: %v", seen)
	}
	if seen["node-ready"] <= 0 {
		t.Errorf("node-ready at %v s", seen["node-ready"])
	}

	// The kubeconfig: 0600, named after the cluster, pointing at the host, and working.
	st, err := os.Stat(kc)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %s: %v %v", kc, st, err)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "e2e" || cfg.Clusters["e2e"] == nil || cfg.Clusters["e2e"].Server != "https://"+c.hosts[0].Address+":6443" {
		t.Fatalf("kubeconfig context %q clusters %v", cfg.CurrentContext, cfg.Clusters)
	}
	rest, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the written kubeconfig does not work: %v", err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "cp1" {
		t.Fatalf("nodes through the kubeconfig: %v", nodes.Items)
	}

	// What landed on the host: config.yaml and the token file 0600, no token in config.yaml.
	if got := c.exec(0, "stat", "-c", "%a", "/etc/rancher/k3s/config.yaml", "/etc/rancher/k3s/cluster-token"); got != "600\n600" {
		t.Errorf("modes of config.yaml and cluster-token: %q", got)
	}
	token := c.exec(0, "cat", "/etc/rancher/k3s/cluster-token")
	if strings.Contains(c.exec(0, "cat", "/etc/rancher/k3s/config.yaml"), token) {
		t.Error("config.yaml holds the token")
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("the token appears in k3strap's output")
	}
	before := c.exec(0, "systemctl", "show", "-p", "InvocationID", "-p", "NRestarts", "k3s")

	// Second apply: unchanged everywhere, no upload, no restart, same token.
	r2 := c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", kc)
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("second apply exited %d", r2.code)
	}
	if ups := r2.ofType(events.UploadProgress); len(ups) > 0 {
		t.Errorf("second apply uploaded %s", ups[0].Upload.File)
	}
	for _, h := range r2.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("host %s: %s (%s), want unchanged", h.Host, h.Status, h.Message)
		}
	}
	if after := c.exec(0, "systemctl", "show", "-p", "InvocationID", "-p", "NRestarts", "k3s"); after != before {
		t.Errorf("service restarted by the second apply: %q -> %q", before, after)
	}
	if got := c.exec(0, "cat", "/etc/rancher/k3s/cluster-token"); got != token {
		t.Error("the token was regenerated")
	}
}

// f1Config is the F1 configuration of fixtures/real-k3s-v1.36.3/config-f1.yaml.
var f1Config = map[string]any{"config": "      disable-cloud-controller: true", "kubeletArgs": []string{"cloud-provider=external"}}

// TestF1RefusedThenDiagnosed: an F1 inventory fails preflight naming CloudController, the host
// and the fix; with that check ignored, the supervisor reports F1 well before the timeout.
func TestF1RefusedThenDiagnosed(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, f1Config)

	r := c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("apply exited %d, want 3 (preflight)", r.code)
	}
	var f1 *events.PreflightResult
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "CloudController" && e.Host == "cp1" && e.Finding.Severity == "error" {
			f1 = e.Finding
		}
	}
	if f1 == nil || f1.Fix == "" || !strings.Contains(f1.Message, "cloud-provider=external") {
		t.Fatalf("no CloudController error for cp1 with a fix: %+v", f1)
	}
	if out := c.exec(0, "sh", "-c", "ls /usr/local/bin/k3s /etc/rancher/k3s 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("preflight failure changed the host: %s", out)
	}

	const timeout = 5 * time.Minute
	r = c.k3strap(4*time.Minute, "apply", "--ignore-preflight-errors=CloudController", "--stall-grace=5s", "--timeout="+timeout.String())
	defer r.dump(t)
	if r.code != 5 {
		t.Fatalf("apply exited %d, want 5 (bring-up)", r.code)
	}
	if r.duration > timeout/2 {
		t.Errorf("F1 reported after %s, not well before the %s timeout", r.duration, timeout)
	}
	var diag *events.ErrorInfo
	for _, e := range r.ofType(events.Error) {
		if e.Error.Diagnosis != "" {
			diag = e.Error
		}
	}
	if diag == nil || diag.Diagnosis != "F1-cloud-controller" {
		t.Fatalf("diagnosis %+v, want F1-cloud-controller", diag)
	}
	ev := strings.Join(diag.Evidence, "\n")
	for _, want := range []string{"cloud-provider", "disabled", "waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint", "coredns"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
	if !strings.Contains(diag.Fix, "cloudController") {
		t.Errorf("fix does not say how: %s", diag.Fix)
	}
	// Both conditions are watched separately: with current K3s, subnet.env came although the
	// taint stayed.
	got := map[string]bool{}
	for _, e := range r.ofType(events.Milestone) {
		got[e.Milestone.Name] = true
	}
	if !got["subnet-env"] || got["uninitialized-taint-gone"] {
		t.Errorf("milestones %v: want subnet-env without uninitialized-taint-gone", got)
	}
}

// TestUnreachableHostFailsFast: a host nobody answers for fails within the connect timeout,
// named.
func TestUnreachableHostFailsFast(t *testing.T) {
	c := newCluster(t, 1)
	c.hosts[0].Address = c.h.PublicNet() + ".250" // on the harness bridge, no host behind it
	c.writeInventory(singleServer, nil)
	r := c.k3strap(time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3", r.code)
	}
	if r.duration > 15*time.Second {
		t.Errorf("took %s with a 3 s connect timeout", r.duration)
	}
	found := false
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SSH" && e.Host == "cp1" && strings.Contains(e.Finding.Message, c.hosts[0].Address) {
			found = true
		}
	}
	if !found {
		t.Fatal("no SSH finding naming cp1 and its address")
	}
}

// TestHostKeyMismatchRefused: the first contact records the host key; a changed key is refused
// with its fingerprint.
func TestHostKeyMismatchRefused(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, nil)
	r := c.k3strap(time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("preflight exited %d", r.code)
	}
	recorded := false
	for _, e := range r.ofType(events.Warning) {
		if strings.Contains(e.Message, "trust on first use") {
			recorded = true
		}
	}
	if !recorded {
		t.Error("recording the new host key was not reported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.RegenHostKey(ctx, c.hosts[0].Index); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3", r.code)
	}
	if !strings.Contains(r.stdout, "host key mismatch") || !strings.Contains(r.stdout, "SHA256:") {
		t.Fatal("mismatch not reported with the fingerprint")
	}
}

// TestNonRootSudoUser: a non-root user with passwordless sudo installs the same way (files
// staged and moved into place with sudo), and no k3strap script shows in sudo's log (each
// travels on standard input: docs/ssh.md); a user whose sudo wants a password gets a clear
// Sudo finding.
func TestNonRootSudoUser(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, map[string]any{"user": "pwuser"})
	r := c.k3strap(time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("pwuser without a password: exit %d, want 3", r.code)
	}
	sudo := false
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "Sudo" && strings.Contains(strings.ToLower(e.Finding.Message), "password") {
			sudo = true
		}
	}
	if !sudo {
		t.Fatal("no Sudo finding about the password")
	}

	c.writeInventory(singleServer, map[string]any{"user": "deploy"})
	r = c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k.yaml")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply as deploy exited %d", r.code)
	}
	if got := c.exec(0, "stat", "-c", "%U %a", "/etc/rancher/k3s/config.yaml"); got != "root 600" {
		t.Errorf("config.yaml owner/mode %q", got)
	}
	// sudo's log holds every command deploy ran as root. Every k3strap script starts with the
	// paths prelude (k3s.ShellVars: K3S_BIN=...); none is longer than the launcher of a script
	// sent on standard input, so none reaches the log: the facts script's network part (~6 KB)
	// did, as an argument of sudo, and so did any script over 512 bytes run with sudo -n.
	log := c.exec(0, "sh", "-c", "journalctl -q -o cat SYSLOG_IDENTIFIER=sudo | grep -F 'USER=root'")
	commands, longest := strings.Count(log, "COMMAND="), 0
	if commands < 5 {
		t.Fatalf("sudo's log has %d commands of deploy's: %.300q", commands, log)
	}
	for _, l := range strings.Split(log, "\n") {
		longest = max(longest, len(l))
		if strings.Contains(l, "K3S_BIN=") || strings.Contains(l, "command continued") {
			t.Errorf("a script reached sudo's log as a command line: %.200q", l)
		}
	}
	t.Logf("sudo logged %d commands of deploy's, the longest %d bytes", commands, longest)
}

// TestAirgapReleaseRefused: an airgap binary of another release than spec.k3s.version is
// refused by preflight (AirgapRelease) before anything is installed, naming both versions and
// the file; `validate` refuses it too, without connecting.
func TestAirgapReleaseRefused(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(singleServer, map[string]any{"version": "v1.31.4+k3s1"})
	r := c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("apply exited %d, want 3 (preflight)", r.code)
	}
	var found *events.PreflightResult
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "AirgapRelease" && e.Finding.Severity == "error" {
			found = e.Finding
		}
	}
	if found == nil || !strings.Contains(found.Message, "v1.31.4+k3s1") || !strings.Contains(found.Message, "v1.36.3+k3s1") || !strings.Contains(found.Message, "/k3s") {
		t.Fatalf("no AirgapRelease error naming both versions and the file: %+v", found)
	}
	if out := c.exec(0, "sh", "-c", "ls /usr/local/bin/k3s /etc/rancher/k3s 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("the refused apply changed the host: %s", out)
	}
	v := c.k3strap(time.Minute, "validate")
	if v.code != 2 || !strings.Contains(v.stdout+v.stderr, "AirgapRelease") {
		t.Fatalf("validate exited %d, want 2 naming AirgapRelease:\n%s%s", v.code, v.stdout, v.stderr)
	}
}
