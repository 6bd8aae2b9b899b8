// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

import _ "embed" // the JSON Schema of the events

//go:embed schema.json
var schemaJSON string

// Schema returns the JSON Schema (draft 2020-12) of one `--output json` line: an Event as
// encoding/json writes it, with "v" = SchemaVersion. It is a new copy on each call.
func Schema() []byte { return []byte(schemaJSON) }
