// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testfixtures finds the real K3s v1.36.3 captures in testdata/real-k3s-v1.36.3 at the
// repository root, for tests that check parsers and the simulator against them.
package testfixtures

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the directory of the real K3s v1.36.3 captures in the repository, failing the
// test when it is missing.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testfixtures: cannot locate the repository")
	}
	repo := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	d := filepath.Join(repo, "testdata", "real-k3s-v1.36.3")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("real K3s captures: %v", err)
	}
	return d
}

// Read returns the content of a fixture file, failing the test when it cannot be read.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), name))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}
