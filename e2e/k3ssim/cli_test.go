// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

func run(t *testing.T, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := app.Main(context.Background(), app.Options{Args: args, Stdout: &out, Stderr: &errb, Version: "v1.36.3+k3s1",
		Root: paths.Root(t.TempDir())})
	return out.String(), errb.String(), code
}

func TestVersionAndHelpSayItIsASimulator(t *testing.T) {
	for _, a := range []string{"--version", "-v"} {
		out, _, code := run(t, "k3s", a)
		if want := "k3s version v1.36.3+k3s1 (k3strap-simulator)\ngo version " + runtime.Version() + "\n"; code != 0 || out != want {
			t.Errorf("%s: %q (%d), want %q", a, out, code, want)
		}
	}
	out, _, code := run(t, "k3s", "--help")
	if code != 0 || !strings.HasPrefix(out, "k3s (k3strap K3s SIMULATOR — not K3s)\n") {
		t.Errorf("--help: %q", out)
	}
	if _, e, code := run(t, "k3s", "bogus"); code != 1 || !strings.Contains(e, "Incorrect Usage") {
		t.Errorf("unknown command: %d %q", code, e)
	}
	// Called through the kubectl symlink: kubectl behaviour (no kubeconfig here -> error).
	if _, e, code := run(t, "/usr/local/bin/kubectl", "get", "nodes", "--kubeconfig", "/nonexistent/k3s.yaml"); code != 1 || !strings.Contains(e, "/nonexistent/k3s.yaml") {
		t.Errorf("kubectl via argv[0]: %d %q", code, e)
	}
	if _, e, code := run(t, "k3s", "server", "--no-such-flag"); code != 1 || !strings.Contains(e, "flag provided but not defined: -no-such-flag") {
		t.Errorf("unknown server flag: %d %q", code, e)
	}
}
