// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/k3strap/k3strap/e2e/harness"
)

// TestMain puts the machine sysctls of the real-K3s lane back when the tests are interrupted,
// and runs the tests in a temporary directory of their own (runInOwnTempDir).
func TestMain(m *testing.M) {
	harness.ReleaseOnInterrupt()
	os.Exit(runInOwnTempDir(m))
}

// runInOwnTempDir runs the tests with TMPDIR set to a new directory, removed when they end: what
// the test binary builds once (k3strap, the simulator's artifacts, the image archives: several
// hundred MB a run) and every test's temporary directory go with it, instead of piling up in
// /tmp run after run (a full disk is a finding doctor reports on the hosts, which share it).
func runInOwnTempDir(m *testing.M) int {
	dir, err := os.MkdirTemp("", "k3strap-e2e-run-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: a temporary directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Daemons a test starts that drop to nobody (tinyproxy) write into a directory of their own
	// below this one: nobody must be able to pass through it (MkdirTemp makes it 0700).
	if err := os.Chmod(dir, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: a temporary directory:", err)
		return 1
	}
	if err := os.Setenv("TMPDIR", dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: TMPDIR:", err)
		return 1
	}
	return m.Run()
}
