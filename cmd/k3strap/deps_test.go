// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGoPlugin: k3strap does not link Go's plugin package. A dependency that imports it
// (k8s.io/kubectl/pkg/drain did, through cli-runtime and kustomize) makes the linker of a cgo
// build export every symbol and keep every method: 110 MB instead of 81, 63 MB of it resident
// in every run instead of 30 (docs/architecture.md "The Kubernetes API").
func TestNoGoPlugin(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "plugin" {
			t.Fatal("k3strap links Go's plugin package; find the import that brings it: go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/k3strap | grep -w plugin")
		}
	}
}
