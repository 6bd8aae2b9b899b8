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

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/schema"
	"github.com/k3strap/k3strap/schema/internal/generator"
)

// TestSchemaUpToDate: the committed cluster.schema.json and fleet.schema.json are exactly what
// the generator makes from the inventory and fleet types today, so a changed type without `go
// generate ./schema/` fails.
func TestSchemaUpToDate(t *testing.T) {
	want, err := generator.Generate("../inventory")
	if err != nil {
		t.Fatal(err)
	}
	if got := schema.Cluster(); !bytes.Equal(got, want) {
		t.Fatalf("schema/cluster.schema.json differs from the inventory types (%d bytes committed, %d generated): run `go generate ./schema/` and commit the result", len(got), len(want))
	}
	want, err = generator.GenerateFleet("../inventory", "../fleet")
	if err != nil {
		t.Fatal(err)
	}
	if got := schema.Fleet(); !bytes.Equal(got, want) {
		t.Fatalf("schema/fleet.schema.json differs from the fleet types (%d bytes committed, %d generated): run `go generate ./schema/` and commit the result", len(got), len(want))
	}
}

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	return compileDoc(t, schema.FileName, generator.ID, schema.Cluster())
}

func compileFleet(t *testing.T) *jsonschema.Schema {
	t.Helper()
	return compileDoc(t, schema.FleetFileName, generator.FleetID, schema.Fleet())
}

func compileDoc(t *testing.T, name, id string, data []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatalf("%s does not compile: %v", name, err)
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
// inventory's schema and every fleet file (kind Fleet) against the fleet's, as an editor would
// check them; a YAML file of another kind fails.
func TestExamplesValidate(t *testing.T) {
	s, sf := compile(t), compileFleet(t)
	n, nf := 0, 0
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
		switch head.Kind {
		case inventory.Kind:
			n++
			if err := s.Validate(instance(t, path, data)); err != nil {
				t.Errorf("%s does not validate against schema/cluster.schema.json:\n%v", path, err)
			}
		case fleet.Kind:
			nf++
			if err := sf.Validate(instance(t, path, data)); err != nil {
				t.Errorf("%s does not validate against schema/fleet.schema.json:\n%v", path, err)
			}
		default:
			t.Errorf("%s: kind %q has no schema", path, head.Kind)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 || nf < 1 {
		t.Fatalf("only %d Cluster inventories and %d fleet files found under examples/: the walk is broken", n, nf)
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

const minimalFleet = `apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: stores
spec:
  sites:
    - path: site.yaml
      labels: {region: eu}
  defaults:
    ssh:
      connectTimeout: 10s
  rollout:
    canary: 1
    batch: 25%
    maxFailedSites: 0
    siteTimeout: 30m
    unreachable:
      attempts: 3
`

// TestFleetSchemaAgreesWithTheDecoder: a minimal fleet file (with one site inventory beside it)
// is valid for both the fleet schema and fleet.Parse; each mistake below is refused by both.
func TestFleetSchemaAgreesWithTheDecoder(t *testing.T) {
	s := compileFleet(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(strings.Replace(minimal, "name: demo", "name: store-1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(doc string) error {
		_, err := fleet.Parse(filepath.Join(dir, "fleet.yaml"), []byte(doc), fleet.LoadOptions{SkipFileChecks: true})
		return err
	}
	if err := s.Validate(instance(t, "minimal fleet", []byte(minimalFleet))); err != nil {
		t.Fatalf("the minimal fleet file does not validate against the schema: %v", err)
	}
	if err := parse(minimalFleet); err != nil {
		t.Fatalf("the minimal fleet file does not parse: %v", err)
	}
	// A number where YAML reads one: batch and maxFailedSites take both forms.
	if doc := strings.Replace(minimalFleet, "batch: 25%", "batch: 5", 1); s.Validate(instance(t, "batch 5", []byte(doc))) != nil || parse(doc) != nil {
		t.Errorf("batch: 5 is refused by the schema (%v) or fleet.Parse (%v)", s.Validate(instance(t, "batch 5", []byte(doc))), parse(doc))
	}
	for _, tc := range []struct{ name, old, new string }{
		{"other kind", "kind: Fleet", "kind: Cluster"},
		{"no sites", "  sites:\n    - path: site.yaml\n      labels: {region: eu}\n", ""},
		{"no site path", "    - path: site.yaml\n      labels", "    - labels"},
		{"misspelt key", "canary: 1", "canry: 1"},
		{"unknown defaults key", "    ssh:\n", "    shh:\n"},
		{"bad batch", "batch: 25%", "batch: a quarter"},
		{"bad duration", "siteTimeout: 30m", "siteTimeout: half an hour"},
		{"negative amount", "maxFailedSites: 0", "maxFailedSites: -1"},
		{"text for a number", "attempts: 3", "attempts: three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(minimalFleet, tc.old) {
				t.Fatalf("the case's text %q is not in the minimal fleet file", tc.old)
			}
			doc := strings.Replace(minimalFleet, tc.old, tc.new, 1)
			if err := s.Validate(instance(t, tc.name, []byte(doc))); err == nil {
				t.Errorf("the schema accepts it:\n%s", doc)
			}
			if err := parse(doc); err == nil {
				t.Errorf("fleet.Parse accepts it (the schema's rule is not k3strap's):\n%s", doc)
			}
		})
	}
}
