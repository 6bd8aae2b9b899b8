// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/fleet/sitestatus"
	"github.com/k3strap/k3strap/internal/sshtest"
	"github.com/k3strap/k3strap/pull"
)

// pullSetup writes an allowed_signers file (a fresh ed25519 key) and a pull.yaml whose Git source
// is url, and returns the configuration's path and the state directory.
func pullSetup(t *testing.T, url, extra string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	signers := writeFile(t, dir, "allowed_signers", sshtest.AllowedSigner(t, "ops@example.com"), 0o644)
	state := filepath.Join(dir, "state")
	cfg := writeFile(t, dir, "pull.yaml", "host: s1\nsource:\n  git:\n    url: "+url+"\n    ref: main\n    path: site/cluster.yaml\nverify:\n  allowedSigners: "+signers+"\nstateDir: "+state+"\n"+extra, 0o600)
	return cfg, state
}

// pull run: an invalid configuration is exit 2 naming the file and line and nothing is
// written; an unreachable source is exit 10 (deferred) with the status saying so.
func TestPullRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "pull.yaml", "source:\n  git:\n    url: git://h/r.git\n    ref: main\n    path: c.yaml\n", 0o600)
	code, _, stderr := runCLI("pull", "run", "--config", bad)
	if code != exitInvalid || !strings.Contains(stderr, bad+":2:") || !strings.Contains(stderr, "no verification") {
		t.Errorf("config without verification: exit %d, stderr %q; want 2 naming %s:2", code, stderr, bad)
	}
	if _, err := os.Stat(filepath.Join(dir, pull.StatusName)); err == nil {
		t.Error("a status was written for an invalid configuration")
	}
	code, _, stderr = runCLI("pull", "run", "--config", filepath.Join(dir, "missing.yaml"))
	if code != exitInvalid || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing configuration: exit %d, stderr %q", code, stderr)
	}

	cfg, state := pullSetup(t, "git://127.0.0.1:1/site.git", "retryFor: 1s\n")
	code, stdout, _ := runCLI("pull", "run", "--config", cfg, "-o", "plain")
	st, err := pull.ReadStatus(state)
	if code != exitDeferred || err != nil || st.SourceReachable || !strings.HasPrefix(st.SourceMessage, "source unreachable") ||
		st.Result.ExitCode != exitDeferred || st.Result.State != pull.ResultUnreachable {
		t.Errorf("unreachable source: exit %d, status %+v, %v\n%s", code, st, err, stdout)
	}
	code, stdout, _ = runCLI("pull", "status", "--config", cfg, "-o", "json")
	var got pull.Status
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got.Result.State != pull.ResultUnreachable {
		t.Errorf("pull status -o json: exit %d\n%s", code, stdout)
	}
}

// pull install --root writes the units once; again it leaves them.
func TestPullInstallRoot(t *testing.T) {
	cfg, _ := pullSetup(t, "git://127.0.0.1:1/site.git", "interval: 15m\n")
	root := t.TempDir()
	code, stdout, stderr := runCLI("pull", "install", "--config", cfg, "--root", root, "--binary", "/usr/local/bin/k3strap")
	if code != 0 || !strings.Contains(stdout, "written") {
		t.Fatalf("install: exit %d %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(root, pull.UnitDir, pull.ServiceName))
	if err != nil || !strings.Contains(string(b), "ExecStart=/usr/local/bin/k3strap pull run --config "+cfg) {
		t.Errorf("service: %v\n%s", err, b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, pull.UnitDir, pull.TimerName)); !strings.Contains(string(b), "OnUnitInactiveSec=900s") {
		t.Errorf("timer:\n%s", b)
	}
	if code, stdout, _ := runCLI("pull", "install", "--config", cfg, "--root", root, "--binary", "/usr/local/bin/k3strap"); code != 0 || !strings.Contains(stdout, "unchanged") {
		t.Errorf("install again: exit %d %s; want unchanged", code, stdout)
	}
}

// TestPullSiteStatus: a pull run's status becomes the site's SiteStatus: revisions, the
// source's reachability (its message only when it failed), the run's outcome as the last
// result and its time as LastSeen, and the nodes the box sees when it sees any.
func TestPullSiteStatus(t *testing.T) {
	at := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	st := pull.Status{DesiredRevision: "c2", AppliedRevision: "c1", SourceReachable: true, SourceMessage: "ok", Time: at,
		Result: pull.Result{State: "failed", Message: "preflight refused cp1", ExitCode: 3, ExitMeaning: "preflight refused a host"}}
	s := pullSiteStatus(st, &fleet.Observed{Versions: []string{"v1.36.3+k3s1"}, Ready: 1, Nodes: 2})
	if s.Source != sitestatus.SourcePull || s.DesiredRevision != "c2" || s.AppliedRevision != "c1" || !s.LastSeen.Equal(at) ||
		s.SourceReachable == nil || !*s.SourceReachable || s.SourceMessage != "" ||
		s.Version != "v1.36.3+k3s1" || s.NodesReady != 1 || s.NodesTotal != 2 {
		t.Errorf("status = %+v", s)
	}
	if r := s.LastResult; r == nil || r.Command != "pull" || r.ExitCode != 3 || r.ExitMeaning != "preflight refused a host" || r.Message != "preflight refused cp1" || !r.Time.Equal(at) {
		t.Errorf("last result = %+v", r)
	}
	st.SourceReachable, st.SourceMessage = false, "source unreachable: dial tcp 10.0.0.1:9418: connection refused"
	s = pullSiteStatus(st, nil)
	if *s.SourceReachable || s.SourceMessage != st.SourceMessage || s.NodesTotal != 0 || s.Version != "" {
		t.Errorf("unreachable, no nodes: %+v", s)
	}
}

// TestReportPullStatusRecorded: how a run's report to the management cluster went is in the
// box's status.json beside the run — reported, or not with the error (the token not in it) —
// and on the journal; without management: no report at all.
func TestReportPullStatusRecorded(t *testing.T) {
	dir := t.TempDir()
	const token = "k3strap-test-token-not-to-be-shown"
	kubeconfig := filepath.Join(dir, "mgmt.kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\n" +
		"users:\n- name: u\n  user: {token: " + token + "}\ncontexts:\n- name: c\n  context: {cluster: m, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	a := &app{stdout: &strings.Builder{}, stderr: stderr, v: NewViper()}
	c := &pull.Config{StateDir: filepath.Join(dir, "state"), Management: &pull.Management{Kubeconfig: kubeconfig, Site: "store-9"}}
	st := pull.Status{Host: "s1", Result: pull.Result{State: pull.ResultApplied, ExitMeaning: "success"}}
	a.reportPullStatus(t.Context(), c, st)
	got, err := pull.ReadStatus(c.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Report; r == nil || r.Reported || r.Site != "store-9" || r.Server != "https://127.0.0.1:1" || r.Message == "" || got.Result.State != pull.ResultApplied {
		t.Fatalf("status.json after a failed report: %+v (report %+v)", got, got.Report)
	}
	if strings.Contains(got.Report.Message+stderr.String(), token) {
		t.Errorf("the token is in the report's error: %s / %s", got.Report.Message, stderr.String())
	}
	if !strings.Contains(stderr.String(), "not reported to the management cluster https://127.0.0.1:1") {
		t.Errorf("journal: %q", stderr.String())
	}
	// Without management: nothing reported, status.json untouched.
	c2 := &pull.Config{StateDir: filepath.Join(dir, "state2")}
	a.reportPullStatus(t.Context(), c2, st)
	if _, err := os.Stat(filepath.Join(c2.StateDir, pull.StatusName)); !os.IsNotExist(err) {
		t.Errorf("status.json written without management: %v", err)
	}
}
