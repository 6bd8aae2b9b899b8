// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/frontend/tui"
	"github.com/k3strap/k3strap/inventory"
)

// TestAutoIsPlainWithoutATerminal: --output auto picks plain lines when stdout is not a
// terminal (pipelines, CI), whatever the other flags say.
func TestAutoIsPlainWithoutATerminal(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &out, v: NewViper(), output: "auto"}
	if a.useTUI() {
		t.Fatal("useTUI without a terminal")
	}
	if _, ok := a.autoSink().(*frontend.Plain); !ok {
		t.Fatalf("auto without a terminal gave %T", a.autoSink())
	}
}

// TestInitNeedsATerminal: init refuses, with exit 2 and a way forward, when not on a terminal.
func TestInitNeedsATerminal(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"init", "-f", filepath.Join(t.TempDir(), "c.yaml")}, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "needs a terminal") || !strings.Contains(errb.String(), "k3strap validate") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestDashboardHosts: rows come in inventory order with the first server marked.
func TestDashboardHosts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	doc := `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  hosts:
    - {name: w1, address: 192.0.2.3, role: agent}
    - {name: cp1, address: 192.0.2.1, role: server}
    - {name: cp2, address: 192.0.2.2, role: server}
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := inventory.Load(path, inventory.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := dashboardHosts(c)
	want := []tui.HostInfo{{Name: "w1", Address: "192.0.2.3", Role: "agent"}, {Name: "cp1", Address: "192.0.2.1", Role: "server", First: true}, {Name: "cp2", Address: "192.0.2.2", Role: "server"}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
