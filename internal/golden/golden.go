// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package golden compares test output with files under testdata/ (golden files); run the tests
// with -update to rewrite them after an intended change, then review the diff.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update test flag.
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// Assert fails t when got differs from testdata/name (relative to the test's package), showing
// both; with -update it writes got there first.
func Assert(t testing.TB, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Fatalf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
