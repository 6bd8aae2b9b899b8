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
