// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConnectionLocal: connection: local on one host is accepted and found by LocalHost; on two
// hosts, or an unknown value, is an error at the value's line naming the host and the fix.
func TestConnectionLocal(t *testing.T) {
	doc := func(c1, c2 string) string {
		return `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: edge}
spec:
  k3s: {version: v1.31.4+k3s1}
  hosts:
    - name: s1
      address: 10.0.0.1
      role: server
      connection: ` + c1 + `
    - name: a1
      address: 10.0.0.2
      role: agent
      connection: ` + c2 + `
`
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.yaml", doc("ssh", "local"))
	c, err := Load(ok, LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if h := c.LocalHost(); h == nil || h.Name != "a1" || !h.IsLocal() {
		t.Fatalf("LocalHost() = %v, want a1", h)
	}
	if c.FirstServer().IsLocal() {
		t.Error("s1 (connection: ssh) reported local")
	}

	two := write("two.yaml", doc("local", "local"))
	checkErrors(t, two, loadErrors(t, two, LoadOptions{}), []wantErr{
		{14, 19, "a1", "connection: local is also set on host s1", "keep connection: local on the host this inventory is run on"},
	})
	bad := write("bad.yaml", doc("ssh", "serial"))
	checkErrors(t, bad, loadErrors(t, bad, LoadOptions{}), []wantErr{
		{14, 19, "a1", `unknown connection "serial"`, "connection: local"},
	})
}
