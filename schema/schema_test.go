// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package schema_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/schema"
	"github.com/k3strap/k3strap/schema/internal/generator"
)

// TestSchemaUpToDate: the committed cluster.schema.json is exactly what the generator makes
// from the inventory types today, so a changed type without `go generate ./schema/` fails.
func TestSchemaUpToDate(t *testing.T) {
	want, err := generator.Generate("../inventory")
	if err != nil {
		t.Fatal(err)
	}
	if got := schema.Cluster(); !bytes.Equal(got, want) {
		t.Fatalf("schema/cluster.schema.json differs from the inventory types (%d bytes committed, %d generated): run `go generate ./schema/` and commit the result", len(got), len(want))
	}
}

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.Cluster()))
	if err != nil {
		t.Fatalf("cluster.schema.json is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(generator.ID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(generator.ID)
	if err != nil {
		t.Fatalf("cluster.schema.json does not compile: %v", err)
	}
	return s
}

// instance is a YAML document as the JSON value a schema validator (or yaml-language-server)
// sees.
func instance(t *testing.T, name string, data []byte) any {
	t.Helper()
	j, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestExamplesValidate: every inventory (kind Cluster) under examples/ is valid against the
// schema, as an editor would check it.
func TestExamplesValidate(t *testing.T) {
	s := compile(t)
	n := 0
	err := filepath.WalkDir("../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(data, &head); err != nil {
			t.Errorf("%s: not YAML: %v", path, err)
			return nil
		}
		if head.Kind != inventory.Kind {
			return nil // fleet files have their own kind
		}
		n++
		if err := s.Validate(instance(t, path, data)); err != nil {
			t.Errorf("%s does not validate against schema/cluster.schema.json:\n%v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d Cluster inventories found under examples/: the walk is broken", n)
	}
}

const minimal = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  k3s:
    version: v1.36.3+k3s1
    config:
      disable: traefik
      kubelet-arg: [fail-cgroupv1=false]
      protect-kernel-defaults: true
  ssh:
    connectTimeout: 1m30s
  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
      taints: ["dedicated=cp:NoSchedule"]
`

// TestSchemaAgreesWithTheDecoder: a minimal inventory is valid for both the schema and
// inventory.Parse; each mistake below — a removed required field, an unknown or misspelt key,
// a bad enum value, taint or duration — is refused by both, so the editor's red line and
// `k3strap validate` tell the same story.
func TestSchemaAgreesWithTheDecoder(t *testing.T) {
	s := compile(t)
	parse := func(doc string) error {
		_, err := inventory.Parse("cluster.yaml", []byte(doc), inventory.LoadOptions{SkipFileChecks: true})
		return err
	}
	if err := s.Validate(instance(t, "minimal", []byte(minimal))); err != nil {
		t.Fatalf("the minimal inventory does not validate against the schema: %v", err)
	}
	if err := parse(minimal); err != nil {
		t.Fatalf("the minimal inventory does not parse: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"no apiVersion", "apiVersion: k3strap.io/v1alpha1\n", ""},
		{"other apiVersion", "k3strap.io/v1alpha1", "k3strap.io/v2"},
		{"other kind", "kind: Cluster", "kind: Clustr"},
		{"no metadata.name", "  name: demo\n", "  title: demo\n"},
		{"no hosts", "  hosts:\n    - name: cp1\n      address: 10.0.0.1\n      role: server\n      taints: [\"dedicated=cp:NoSchedule\"]\n", ""},
		{"no host name", "    - name: cp1\n      address", "    - address"},
		{"no host address", "      address: 10.0.0.1\n", ""},
		{"no host role", "      role: server\n", ""},
		{"misspelt key", "address:", "adress:"},
		{"unknown spec key", "  ssh:\n", "  sshh:\n"},
		{"bad role", "role: server", "role: master"},
		{"bad taint effect", "cp:NoSchedule", "cp:NoSchedul"},
		{"bad duration", "1m30s", "90 seconds"},
		{"list for a string", "version: v1.36.3+k3s1", "version: [v1.36.3+k3s1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(minimal, tc.old) {
				t.Fatalf("the case's text %q is not in the minimal inventory", tc.old)
			}
			doc := strings.Replace(minimal, tc.old, tc.new, 1)
			if err := s.Validate(instance(t, tc.name, []byte(doc))); err == nil {
				t.Errorf("the schema accepts it:\n%s", doc)
			}
			if err := parse(doc); err == nil {
				t.Errorf("inventory.Parse accepts it (the schema's rule is not k3strap's):\n%s", doc)
			}
		})
	}
}

// TestModeline: the modeline is a YAML comment in yaml-language-server's form naming the schema
// file, and an inventory starting with it still decodes and validates.
func TestModeline(t *testing.T) {
	line := schema.Modeline("./" + schema.FileName)
	if line != "# yaml-language-server: $schema=./cluster.schema.json" {
		t.Fatalf("Modeline = %q", line)
	}
	doc := line + "\n" + minimal
	if _, err := inventory.Parse("cluster.yaml", []byte(doc), inventory.LoadOptions{SkipFileChecks: true}); err != nil {
		t.Fatalf("an inventory with the modeline does not parse: %v", err)
	}
	if err := compile(t).Validate(instance(t, "modeline", []byte(doc))); err != nil {
		t.Fatalf("an inventory with the modeline does not validate: %v", err)
	}
}
