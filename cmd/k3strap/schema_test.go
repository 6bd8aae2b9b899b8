// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/schema"
)

// TestSchemaCommand: `k3strap schema` prints the embedded inventory schema byte for byte,
// `schema Fleet` the fleet file's, -o yaml the same document as YAML, and a bad kind or -o is a
// usage error (exit 2).
func TestSchemaCommand(t *testing.T) {
	code, out, errOut := runCLI("schema")
	if code != 0 || !bytes.Equal([]byte(out), schema.Cluster()) {
		t.Fatalf("schema: exit %d, stderr %q, %d bytes out (want the %d of schema.Cluster())", code, errOut, len(out), len(schema.Cluster()))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["$id"] == nil || doc["$defs"] == nil {
		t.Fatalf("schema output is not the JSON Schema (err %v)", err)
	}

	code, out, errOut = runCLI("schema", "-o", "yaml")
	var fromYAML map[string]any
	if code != 0 {
		t.Fatalf("schema -o yaml: exit %d, stderr %q", code, errOut)
	}
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
		t.Fatalf("schema -o yaml: not YAML: %v", err)
	}
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(fromYAML)
	if !bytes.Equal(a, b) {
		t.Errorf("schema -o yaml is not the same document as the JSON")
	}

	// The fleet file's schema: by its kind, in any case.
	for _, arg := range []string{"Fleet", "fleet"} {
		code, out, errOut = runCLI("schema", arg)
		if code != 0 || !bytes.Equal([]byte(out), schema.Fleet()) {
			t.Errorf("schema %s: exit %d, stderr %q, %d bytes out (want the %d of schema.Fleet())", arg, code, errOut, len(out), len(schema.Fleet()))
		}
	}
	if code, out, _ = runCLI("schema", "Cluster"); code != 0 || !bytes.Equal([]byte(out), schema.Cluster()) {
		t.Errorf("schema Cluster: exit %d, not schema.Cluster()", code)
	}
	code, out, errOut = runCLI("schema", "Bogus")
	if code != exitInvalid || out != "" || !strings.Contains(errOut, `"Bogus"`) || !strings.Contains(errOut, "Fleet") {
		t.Errorf("schema Bogus: exit %d (want %d), stdout %d bytes, stderr %q", code, exitInvalid, len(out), errOut)
	}

	code, out, errOut = runCLI("schema", "-o", "table")
	if code != exitInvalid || out != "" || !strings.Contains(errOut, `"table"`) {
		t.Errorf("schema -o table: exit %d (want %d), stdout %d bytes, stderr %q", code, exitInvalid, len(out), errOut)
	}
}
