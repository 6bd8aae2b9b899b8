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

	"github.com/k3strap/k3strap/firstboot"
)

// --local picks one host and says so; several hosts, an unknown host or a machine that is no
// host of the inventory are usage errors (exit 2) that say what to give instead.
func TestLocalFlagRefusals(t *testing.T) {
	inv := writeFile(t, t.TempDir(), "c.yaml", minimalDoc+"    - {name: a1, address: 192.0.2.2, role: agent}\n", 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--host", "cp1", "--host", "a1"}, "--local runs on one host"},
		{[]string{"--host", "nope"}, "--local --host nope: no such host"},
		{nil, "which is no host of"},
	} {
		args := append([]string{"preflight", "-f", inv, "--local", "-o", "plain"}, tc.args...)
		code, _, stderr := runCLI(args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d containing %q", tc.args, code, stderr, exitInvalid, tc.want)
		}
	}
}

// firstboot run refuses a payload whose seed.json is missing, whose bundle is not there, or
// whose token file others can read — exit 2, with the failure and its fix in the status file.
func TestFirstbootRunRefusals(t *testing.T) {
	dir := t.TempDir()
	code, _, _ := runCLI("firstboot", "run", "--dir", dir, "--banner=false", "-o", "plain")
	st, err := firstboot.ReadStatus(dir)
	if code != exitInvalid || err != nil || st.State != firstboot.StateFailed || st.Step != "seed" || st.Fix == "" {
		t.Fatalf("no seed.json: exit %d, status %+v (%v)", code, st, err)
	}
	info := firstboot.Info{Cluster: "lab", Host: "cp1", Created: time.Now().UTC(), BundleSHA256: strings.Repeat("ab", 32), BundlePath: filepath.Join(dir, "missing.tar")}
	b, _ := json.Marshal(info)
	writeFile(t, dir, firstboot.SeedInfoName, string(b), 0o644)
	code, _, _ = runCLI("firstboot", "run", "--dir", dir, "--banner=false", "-o", "plain")
	st, _ = firstboot.ReadStatus(dir)
	if code != exitInvalid || st.Step != "bundle" || !strings.Contains(st.Message, "removable media") || st.ExitMeaning != "invalid inventory or usage" {
		t.Errorf("missing bundle: exit %d, status %+v", code, st)
	}
	writeFile(t, dir, "missing.tar", "not the bundle", 0o600)
	code, _, _ = runCLI("firstboot", "run", "--dir", dir, "--banner=false", "-o", "plain")
	st, _ = firstboot.ReadStatus(dir)
	if code != exitInvalid || !strings.Contains(st.Message, "damaged or another bundle") {
		t.Errorf("wrong bundle: exit %d, status %+v", code, st)
	}
	info.BundleSHA256 = ""
	b, _ = json.Marshal(info)
	writeFile(t, dir, firstboot.SeedInfoName, string(b), 0o644)
	doc := strings.Replace(minimalDoc, "role: server}", "role: server, connection: local}", 1)
	writeFile(t, dir, firstboot.InventoryName, doc, 0o600)
	writeFile(t, dir, firstboot.TokenName, "s3cret\n", 0o644)
	code, stdout, stderr := runCLI("firstboot", "run", "--dir", dir, "--banner=false", "-o", "plain")
	st, _ = firstboot.ReadStatus(dir)
	if code != exitInvalid || st.Step != "token" || !strings.Contains(st.Message, "readable by others") {
		t.Errorf("token 0644: exit %d, status %+v", code, st)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Error("the token reached the output")
	}
	if _, err := os.Stat(filepath.Join(dir, firstboot.StatusName)); err != nil {
		t.Error(err)
	}
}

// firstboot seed --pull-config refuses a pull configuration `pull run` would refuse (exit 2,
// naming the file and line) and one a seed cannot carry, writing nothing.
func TestFirstbootSeedPullRefusals(t *testing.T) {
	dir := t.TempDir()
	inv := writeFile(t, dir, "c.yaml", minimalDoc, 0o644)
	for _, tc := range []struct{ body, want string }{
		{"source:\n  git: {url: git://192.0.2.9/s.git, ref: main, path: c.yaml}\n", "pull.yaml:2: the source has no verification"},
		{"host: cp1\nsource:\n  https: {url: https://192.0.2.9/c.yaml, sha256: " + strings.Repeat("ab", 32) + "}\n", "drop host:"},
	} {
		cfg := writeFile(t, dir, "pull.yaml", tc.body, 0o644)
		out := filepath.Join(dir, "seeds")
		code, _, stderr := runCLI("firstboot", "seed", "-f", inv, "-O", out, "--pull-config", cfg, "--binary", inv, "-o", "plain")
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("exit %d, stderr %q; want %d containing %q", code, stderr, exitInvalid, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("seeds written for a refused pull configuration: %v", err)
		}
	}
}
