// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet"
)

// fleetDir writes a fleet of two sites whose hosts listen at port (sshTrap) and returns the
// fleet file.
func fleetDir(t *testing.T, port int, rollout string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, addr := range []string{"127.0.0.2", "127.0.0.3"} {
		write(filepath.Join("sites", string(rune('a'+i))+".yaml"), "apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: store-"+string(rune('a'+i))+"}\nspec:\n  hosts:\n    - {name: cp1, address: "+addr+", role: server}\n")
	}
	write("fleet.yaml", "apiVersion: k3strap.io/v1alpha1\nkind: Fleet\nmetadata: {name: stores}\nspec:\n  sites: [{path: \"sites/*.yaml\"}]\n  defaults:\n    k3s: {version: v1.36.3+k3s1}\n    ssh: {user: root, port: "+itoa(port)+", connectTimeout: 2s, knownHosts: ./known_hosts}\n"+rollout)
	return filepath.Join(dir, "fleet.yaml")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestFleetValidate: validate takes a fleet file, connects to no host and prints the waves.
func TestFleetValidate(t *testing.T) {
	port, dials := sshTrap(t)
	path := fleetDir(t, port, "  rollout: {canary: 1, batch: 1}\n")
	code, out, errs := runArgs("validate", "-f", path)
	if code != 0 || !strings.Contains(out, "valid — fleet stores, 2 sites; apply rolls out in 2 wave(s)") || !strings.Contains(out, "wave 1 (canary): store-a") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if dials.Load() != 0 {
		t.Errorf("validate connected %d times", dials.Load())
	}
}

// TestFleetFlags: per-cluster flags are refused with a fleet, fleet flags without one.
func TestFleetFlags(t *testing.T) {
	port, _ := sshTrap(t)
	path := fleetDir(t, port, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "-f", path, "--host", "cp1"}, "--host does not go with a fleet file: hosts are per site"},
		{[]string{"doctor", "-f", path, "--fix"}, "--fix does not go with a fleet file"},
		{[]string{"apply", "-f", path, "--shard", "3/2"}, "--shard \"3/2\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "0/2"}, "--shard \"0/2\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "1/0"}, "--shard \"1/0\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "-1/2"}, "--shard \"-1/2\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "1/99999999999999999999"}, "--shard \"1/99999999999999999999\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "a/b"}, "--shard \"a/b\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "1/2/3"}, "--shard \"1/2/3\": write I/N"},
		{[]string{"apply", "-f", path, "--shard", "2"}, "--shard \"2\": write I/N"},
		{[]string{"apply", "-f", path, "--site", "nope"}, "--site nope: the fleet"},
		{[]string{"preflight", "-f", filepath.Join(filepath.Dir(path), "sites", "a.yaml"), "--shard", "1/2"}, "--shard is for fleets"},
	} {
		code, out, errs := runArgs(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s%s", c.args, code, c.want, out, errs)
		}
	}
}

// TestFleetRolloutBounds: every number of a fleet's rollout at its bounds — refused outside
// them with exit 2 naming the field, accepted at them — before anything connects.
func TestFleetRolloutBounds(t *testing.T) {
	port, dials := sshTrap(t)
	for _, c := range []struct {
		rollout, want string // want "" = valid
	}{
		{"canary: -1", "rollout.canary -1 is negative"},
		{"canary: 0", ""},
		{"canary: 1.5", "spec.rollout.canary must be a whole number, not a decimal number"},
		{"canary: 99999999999999999999", "spec.rollout.canary 99999999999999999999 is too large for a whole number"},
		{"batch: 0", "rollout.batch must be at least one site"},
		{"batch: 101%", "rollout.batch \"101%\" is not a percentage from 0% to 100%"},
		{"batch: 100%", ""},
		{"concurrency: -1", "rollout.concurrency -1 is negative"},
		{"concurrency: 1001", "rollout.concurrency 1001 is more than 1000"},
		{"concurrency: 1000", ""},
		{"siteTimeout: 0s", "spec.rollout.siteTimeout must be a positive duration"},
		{"siteTimeout: 25h", "spec.rollout.siteTimeout is longer than 24h0m0s"},
		{"siteTimeout: 24h", ""},
		{"maxFailedSites: -1", "rollout.maxFailedSites \"-1\" is neither a number of sites nor a percentage"},
		{"maxFailedSites: 101%", "is not a percentage from 0% to 100%"},
	} {
		path := fleetDir(t, port, "  rollout: {"+c.rollout+"}\n")
		code, out, errs := runArgs("validate", "-f", path)
		switch {
		case c.want == "" && code != 0:
			t.Errorf("%s: exit %d, want valid\n%s%s", c.rollout, code, out, errs)
		case c.want != "" && (code != 2 || !strings.Contains(errs, c.want)):
			t.Errorf("%s: exit %d, want 2 with %q\n%s%s", c.rollout, code, c.want, out, errs)
		}
	}
	if dials.Load() != 0 {
		t.Errorf("validate connected %d times", dials.Load())
	}
}

// TestFleetPreflightRuns: a fleet preflight runs every site (here: no SSH key, so preflight
// fails on each), stamps their events with the site,
// records the outcome in the state file, and `fleet status` reads it.
func TestFleetPreflightRuns(t *testing.T) {
	port, _ := sshTrap(t)
	path := fleetDir(t, port, "")
	code, out, errs := runArgs("preflight", "-f", path, "--output", "json", "--ssh-config", "none")
	if code != 3 {
		t.Fatalf("preflight against hosts that close the connection: exit %d, want 3\n%s%s", code, out, errs)
	}
	sites := map[string]events.SiteResult{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e events.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if e.Type == events.HostStep && e.Site == "" {
			t.Errorf("a site's event without its site: %s", l)
		}
		if e.SiteResult != nil {
			sites[e.Site] = *e.SiteResult
		}
	}
	for _, s := range []string{"store-a", "store-b"} {
		if r := sites[s]; r.Status != events.SiteFailed || r.ExitCode != 3 || r.Exit != "preflight failed" {
			t.Errorf("%s: %+v", s, r)
		}
	}
	st, err := fleet.ReadState(strings.TrimSuffix(path, ".yaml") + ".state.json")
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Sites["store-a"].Preflight; r == nil || r.ExitCode != 3 || st.Sites["store-a"].Rollout != nil {
		t.Errorf("state %+v", st.Sites["store-a"])
	}
	code, out, errs = runArgs("fleet", "status", "-f", path)
	if code != 0 || !strings.Contains(out, "fleet stores: 2 site(s)") || !strings.Contains(out, "totals: 2 pending") {
		t.Errorf("fleet status: exit %d\n%s%s", code, out, errs)
	}
}

// TestFleetRunFlagsTyped: a fleet run hands every site the command's own run flags, with the
// values the command line gave them (no re-parsing through strings).
func TestFleetRunFlagsTyped(t *testing.T) {
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &strings.Builder{}, v: NewViper()}
	root := a.rootCmd()
	for _, name := range []string{"apply", "upgrade", "preflight", "check", "doctor"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--concurrency=7", "--ignore-preflight-errors=Swap,Memory", "--ssh-keepalive=3s"}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rf, err := a.runFlagsOf(cmd)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rf.concurrency != 7 || strings.Join(rf.ignore, ",") != "Swap,Memory" || rf.keepalive != 3*time.Second {
			t.Errorf("%s: run flags concurrency %d, ignore %v, keepalive %s; want 7, [Swap Memory], 3s", name, rf.concurrency, rf.ignore, rf.keepalive)
		}
	}
	validate, _, err := root.Find([]string{"validate"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.runFlagsOf(validate); err == nil {
		t.Error("validate has run flags")
	}
}

// TestFleetManagementUsage: the management commands refuse a missing or bad flag with exit 2
// and the fix, before connecting anywhere.
func TestFleetManagementUsage(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "mgmt.kubeconfig") // never read: each case fails first
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "management", "install"}, "--kubeconfig FILE"},
		{[]string{"fleet", "management", "credential", "--kubeconfig", kc, "--out", "x"}, `--site "": give the site's name`},
		{[]string{"fleet", "management", "credential", "--kubeconfig", kc, "--site", "Bad_Name", "--out", "x"}, `--site "Bad_Name"`},
		{[]string{"fleet", "management", "credential", "--kubeconfig", kc, "--site", "store-1"}, "--out FILE"},
		{[]string{"fleet", "management", "credential", "--kubeconfig", kc, "--site", "store-1", "--out", "x", "--expiration", "1m"}, "shorter than the TokenRequest API's minimum 10m0s"},
		{[]string{"fleet", "status", "--management-kubeconfig", kc, "--stale-after", "0s"}, "--stale-after 0s is not a positive duration"},
		{[]string{"fleet", "status"}, "--management-kubeconfig"},
	} {
		code, out, errs := runArgs(c.args...)
		if code != exitInvalid || !strings.Contains(errs, c.want) {
			t.Errorf("k3strap %s: exit %d, want %d with %q\n%s%s", strings.Join(c.args, " "), code, exitInvalid, c.want, out, errs)
		}
	}
	// A kubeconfig that does not exist is named, with the fix.
	code, _, errs := runArgs("fleet", "management", "install", "--kubeconfig", kc)
	if code != exitError || !strings.Contains(errs, "loading the kubeconfig "+kc) || !strings.Contains(errs, "fix:") {
		t.Errorf("install with a missing kubeconfig: exit %d\n%s", code, errs)
	}
}
