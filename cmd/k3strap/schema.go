// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/schema"
)

// schemaKinds are the document kinds `k3strap schema KIND` prints, each with its schema.
var schemaKinds = []struct {
	kind   string
	schema func() []byte
}{
	{inventory.Kind, schema.Cluster},
	{fleet.Kind, schema.Fleet},
}

// schemaCmd prints the JSON Schema of an inventory or, with the argument Fleet, of a fleet
// file (package schema, generated from their Go types; docs/schema.md says how editors use it).
func (a *app) schemaCmd() *cobra.Command {
	var kinds []string
	for _, k := range schemaKinds {
		kinds = append(kinds, k.kind)
	}
	return &cobra.Command{
		Use:   "schema [Cluster|Fleet]",
		Short: "Print the JSON Schema of the inventory file or the fleet file (for editors and CI)",
		Long: "Print the JSON Schema (draft-07) of k3strap's inventory, kind Cluster (the default), or\n" +
			"with the argument Fleet of a fleet file. Editors that run yaml-language-server (VS Code's\n" +
			"YAML extension, Neovim's yamlls) check and complete a file against it; docs/schema.md\n" +
			"shows the modeline. -o yaml prints it as YAML.",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			if len(args) == 0 {
				b = schema.Cluster()
			}
			for _, k := range schemaKinds {
				if len(args) == 1 && strings.EqualFold(args[0], k.kind) {
					b = k.schema()
				}
			}
			if b == nil {
				return usageError{fmt.Errorf("no schema for kind %q (one of: %s)", args[0], strings.Join(kinds, ", "))}
			}
			switch a.output {
			case "", "auto", "plain", "json":
			case "yaml":
				y, err := yaml.JSONToYAML(b)
				if err != nil {
					return err
				}
				b = y
			default:
				return usageError{fmt.Errorf("--output %q: schema prints json (the default) or yaml", a.output)}
			}
			_, err := a.stdout.Write(b)
			return err
		},
	}
}
