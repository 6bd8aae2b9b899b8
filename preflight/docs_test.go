// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"os"
	"regexp"
	"testing"
)

// TestDocsListEveryCheck keeps docs/preflight.md honest: its table names every check ID that
// Checks returns, in the same order, and no other.
func TestDocsListEveryCheck(t *testing.T) {
	b, err := os.ReadFile("../docs/preflight.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z0-9-]+)` \\|").FindAllSubmatch(b, -1) {
		documented = append(documented, string(m[1]))
	}
	var ids []string
	for _, c := range Checks() {
		ids = append(ids, c.ID())
	}
	if len(documented) != len(ids) {
		t.Fatalf("docs/preflight.md lists %d checks %v, Checks() has %d %v", len(documented), documented, len(ids), ids)
	}
	for i := range ids {
		if documented[i] != ids[i] {
			t.Errorf("docs/preflight.md row %d is %s, Checks() has %s there", i+1, documented[i], ids[i])
		}
	}
}
