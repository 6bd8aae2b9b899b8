// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package schema holds the JSON Schemas of k3strap's inventory (kind Cluster) and fleet file
// (kind Fleet), generated from the Go types of packages inventory and fleet by `go generate
// ./schema/` (schema/internal/generator) and checked against them by this package's tests, so
// they cannot drift. `k3strap schema [Cluster|Fleet]` prints them; editors use them through the
// yaml-language-server modeline (docs/schema.md).
package schema

import _ "embed"

//go:generate go run ./internal/gen -kind Cluster -src ../inventory -o cluster.schema.json
//go:generate go run ./internal/gen -kind Fleet -src ../inventory -fleet-src ../fleet -o fleet.schema.json

//go:embed cluster.schema.json
var cluster []byte

//go:embed fleet.schema.json
var fleetSchema []byte

// Cluster returns the inventory's JSON Schema (draft-07, indented JSON), a copy the caller
// may keep.
func Cluster() []byte { return append([]byte(nil), cluster...) }

// Fleet returns the fleet file's JSON Schema (kind Fleet; draft-07, indented JSON), a copy
// the caller may keep. Site files are inventories: Cluster's schema.
func Fleet() []byte { return append([]byte(nil), fleetSchema...) }

// FileName is the name `k3strap schema` output is documented to be saved under, next to the
// inventory (docs/schema.md).
const FileName = "cluster.schema.json"

// FleetFileName is FileName for `k3strap schema Fleet`, next to the fleet file.
const FleetFileName = "fleet.schema.json"

// Modeline returns the comment line, without a newline, that makes yaml-language-server (VS
// Code's YAML extension, Neovim's yamlls) check a YAML file against the schema at ref: a path
// relative to the YAML file ("./cluster.schema.json") or a URL. The form is the one
// yaml-language-server reads from a file's leading comments ("# yaml-language-server:
// $schema=<ref>", its README "Using inlined schema").
func Modeline(ref string) string { return "# yaml-language-server: $schema=" + ref }
