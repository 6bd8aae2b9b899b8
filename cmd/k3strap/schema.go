// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/schema"
)

// schemaCmd prints the inventory's JSON Schema (package schema, generated from the inventory
// types; docs/schema.md says how editors use it).
func (a *app) schemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the inventory file (for editors and CI)",
		Long: "Print the JSON Schema (draft-07) of k3strap's inventory, kind Cluster. Editors that run\n" +
			"yaml-language-server (VS Code's YAML extension, Neovim's yamlls) check and complete an\n" +
			"inventory against it; docs/schema.md shows the modeline. -o yaml prints it as YAML.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := schema.Cluster()
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
