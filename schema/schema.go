// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package schema holds the JSON Schema of k3strap's inventory (kind Cluster), generated from
// the Go types of package inventory by `go generate ./schema/` (schema/internal/generator) and
// checked against them by this package's tests, so it cannot drift. `k3strap schema` prints it;
// editors use it through the yaml-language-server modeline (docs/schema.md).
package schema

import _ "embed"

//go:generate go run ./internal/gen -src ../inventory -o cluster.schema.json

//go:embed cluster.schema.json
var cluster []byte

// Cluster returns the inventory's JSON Schema (draft-07, indented JSON), a copy the caller
// may keep.
func Cluster() []byte { return append([]byte(nil), cluster...) }

// FileName is the name `k3strap schema` output is documented to be saved under, next to the
// inventory (docs/schema.md).
const FileName = "cluster.schema.json"

// Modeline returns the comment line, without a newline, that makes yaml-language-server (VS
// Code's YAML extension, Neovim's yamlls) check a YAML file against the schema at ref: a path
// relative to the YAML file ("./cluster.schema.json") or a URL. The form is the one
// yaml-language-server reads from a file's leading comments ("# yaml-language-server:
// $schema=<ref>", its README "Using inlined schema").
func Modeline(ref string) string { return "# yaml-language-server: $schema=" + ref }
