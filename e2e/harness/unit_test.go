// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseEnvFlat(t *testing.T) {
	out := []byte("HARNESS_DIR=/x\nHARNESS_KEY=/x/id_ed25519\nHARNESS_TOPOLOGY=flat\nHARNESS_N=2\n" +
		"HARNESS_H1=10.123.0.11\nHARNESS_H2=10.123.0.12\n")
	hosts, bastion, err := parseEnv(out)
	if err != nil {
		t.Fatal(err)
	}
	if bastion != nil {
		t.Errorf("flat topology: bastion = %+v, want nil", bastion)
	}
	want := []Host{{1, "h1", "10.123.0.11"}, {2, "h2", "10.123.0.12"}}
	if len(hosts) != len(want) {
		t.Fatalf("hosts = %+v, want %+v", hosts, want)
	}
	for i := range want {
		if hosts[i] != want[i] {
			t.Errorf("hosts[%d] = %+v, want %+v", i, hosts[i], want[i])
		}
	}
}

func TestParseEnvBastion(t *testing.T) {
	out := []byte("HARNESS_TOPOLOGY=bastion\nHARNESS_H1=10.124.0.11\nHARNESS_BASTION=10.123.0.10\n")
	hosts, bastion, err := parseEnv(out)
	if err != nil {
		t.Fatal(err)
	}
	if bastion == nil || *bastion != (Host{0, "h0", "10.123.0.10"}) {
		t.Errorf("bastion = %+v", bastion)
	}
	if len(hosts) != 1 || hosts[0] != (Host{1, "h1", "10.124.0.11"}) {
		t.Errorf("hosts = %+v", hosts)
	}
}

func TestParseEnvRejectsGaps(t *testing.T) {
	if _, _, err := parseEnv([]byte("HARNESS_H2=10.123.0.12\n")); err == nil {
		t.Error("a list starting at h2 was accepted")
	}
	if _, _, err := parseEnv([]byte("HARNESS_Hx=1\n")); err == nil {
		t.Error("HARNESS_Hx was accepted")
	}
}

func TestSkipReason(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "K3STRAP_E2E" {
				return v
			}
			return ""
		}
	}
	found := func(string) (string, error) { return "/bin/x", nil }
	missing := func(name string) (string, error) {
		if name == "debootstrap" {
			return "", exec.ErrNotFound
		}
		return "/bin/" + name, nil
	}
	cases := []struct {
		name   string
		getenv func(string) string
		euid   int
		look   func(string) (string, error)
		want   string // substring; "" = no skip
	}{
		{"ready", env(""), 0, found, ""},
		{"enabled explicitly", env("1"), 0, found, ""},
		{"disabled", env("0"), 0, found, "K3STRAP_E2E=0"},
		{"not root", env(""), 1000, found, "root"},
		{"tool missing", env(""), 0, missing, "debootstrap"},
	}
	for _, c := range cases {
		got := skipReason(c.getenv, c.euid, c.look)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: skipReason = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "hi"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != "efghi" {
		t.Errorf("tail = %q, want %q", got, "efghi")
	}
}

func TestArgumentChecksNeedNoScript(t *testing.T) {
	h := &Harness{script: "/nonexistent/harness.sh", dir: t.TempDir()}
	ctx := context.Background()
	if err := h.KernelMask(ctx, 1, "ip_set; rm -rf /"); err == nil || !strings.Contains(err.Error(), "bad kernel feature") {
		t.Errorf("KernelMask with a bad name: %v", err)
	}
	if err := h.KernelMask(ctx, 1); err == nil {
		t.Error("KernelMask without features was accepted")
	}
	if err := h.WriteFile(ctx, 1, "relative/path", nil, 0o600); err == nil {
		t.Error("WriteFile with a relative path was accepted")
	}
	if _, err := h.Up(ctx, 0, Options{}); err == nil {
		t.Error("Up(0) was accepted")
	}
	if _, err := h.Up(ctx, 1, Options{Topology: "mesh"}); err == nil {
		t.Error("unknown topology was accepted")
	}
	if _, err := h.PasswordOf("deploy"); !errors.Is(err, ErrNoPassword) {
		t.Errorf("PasswordOf(deploy) = %v, want ErrNoPassword", err)
	}
}

func TestRunErrorCarriesStderrTail(t *testing.T) {
	script := t.TempDir() + "/fail.sh"
	if err := os.WriteFile(script, []byte("echo 'first line' >&2; echo 'the reason' >&2; exit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &Harness{script: script, dir: t.TempDir()}
	_, err := h.run(context.Background(), nil, nil, "reset", "2")
	if err == nil {
		t.Fatal("failing script returned no error")
	}
	for _, want := range []string{"harness reset 2", "exit status 3", "the reason"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestUpRejectsUnknownKind: a host kind the harness has no base image for is refused before
// harness.sh runs (the script is not even located: scriptPath is never called).
func TestUpRejectsUnknownKind(t *testing.T) {
	h := &Harness{script: "/nonexistent/harness.sh"}
	_, err := h.Up(context.Background(), 1, Options{Kind: "alpine"})
	if err == nil || !strings.Contains(err.Error(), `unknown host kind "alpine"`) {
		t.Errorf("Up with kind alpine: %v, want an unknown host kind error", err)
	}
}

// TestBaseRejectsUnknownKind: Base refuses a kind before running harness.sh.
func TestBaseRejectsUnknownKind(t *testing.T) {
	h := &Harness{script: "/nonexistent/harness.sh"}
	if err := h.Base(context.Background(), "alpine"); err == nil || !strings.Contains(err.Error(), `unknown host kind "alpine"`) {
		t.Errorf("Base with kind alpine: %v, want an unknown host kind error", err)
	}
}
