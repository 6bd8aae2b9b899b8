// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

// TestLogFileMadePrivate: an existing --log-file with a wider mode becomes 0600.
func TestLogFileMadePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.log")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, output: "json", logFile: p}
	if _, err := a.sink(); err != nil {
		t.Fatal(err)
	}
	for _, c := range a.closers {
		c()
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

// TestSudoPasswordFileMustBePrivate: a sudo password file others can read is refused, like ssh
// refuses such private keys; a 0600 one is read.
func TestSudoPasswordFileMustBePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &inventory.Cluster{}
	c.Spec.SSH.SudoPasswordFile = p
	a := &app{}
	pw, err := a.sudoPassword(c, false)
	if err != nil || pw.Reveal() != "hunter2" {
		t.Fatalf("0600 file: %v", err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = a.sudoPassword(c, false)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("0644 file: %v", err)
	}
}
