// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The inventory is read once per run: the front-end (the dashboard's host rows) and the
// command share what load returned.
func TestLoadReadsTheInventoryOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	doc := "apiVersion: k3strap.io/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  hosts:\n    - {name: cp1, address: 192.0.2.1, role: server}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{file: path, v: NewViper()}
	c1, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c2, err := a.load()
	if err != nil || c2 != c1 {
		t.Fatalf("second load read the file again: %v (same cluster: %v)", err, c1 == c2)
	}
}
