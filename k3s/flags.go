// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

// The flag table: the checked-in list of flag names a real K3s accepts, per role, with the kind
// of value each takes. K3s's config.yaml keys are these flag names (docs/k3s.md, "Config
// file"; k3s-io/k3s pkg/configfilearg/parser.go); K3s itself only warns about unknown keys and
// starts anyway, so k3strap rejects them before they reach a host.
//
// Source: k3s-flags-v1.36.3.tsv, read off `k3s server --help` and `k3s agent --help` of a real
// K3s v1.36.3. Server flags include the agent ones.

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agnivade/levenshtein"
)

// FlagsVersion is the K3s release the flag table was taken from.
const FlagsVersion = DefaultVersion

// Role is the K3s subcommand a flag belongs to.
type Role string

// The two K3s roles.
const (
	Server Role = "server"
	Agent  Role = "agent"
)

// Kind is the shape of a flag's value in config.yaml.
type Kind string

// Flag value kinds, as in the TSV's third column.
const (
	Bool   Kind = "bool"
	String Kind = "string"
	// List is a repeatable flag: a YAML list in config.yaml (a scalar is accepted as one item).
	List Kind = "list"
)

//go:embed k3s-flags-v1.36.3.tsv
var flagsTSV string // never written

// Table holds the known flag names per role. It is immutable once built.
type Table struct {
	flags map[Role]map[string]Kind
}

// loadFlags parses the embedded table once.
var loadFlags = sync.OnceValue(func() *Table {
	t, err := ParseFlags(flagsTSV)
	if err != nil {
		panic(err)
	}
	return t
})

// Flags returns the flag table of K3s FlagsVersion (embedded, parsed once, shared and
// read-only). It panics only if the embedded file is malformed, which a unit test rules out.
func Flags() *Table { return loadFlags() }

// ParseFlags reads a table in the TSV format: role<TAB>flag<TAB>kind, '#' comments. It returns an
// error naming the line for a malformed row.
func ParseFlags(text string) (*Table, error) {
	t := &Table{flags: map[Role]map[string]Kind{Server: {}, Agent: {}}}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("k3s flag table line %d: want 3 tab-separated fields, got %d", i+1, len(f))
		}
		role, kind := Role(f[0]), Kind(f[2])
		if role != Server && role != Agent {
			return nil, fmt.Errorf("k3s flag table line %d: unknown role %q", i+1, f[0])
		}
		if kind != Bool && kind != String && kind != List {
			return nil, fmt.Errorf("k3s flag table line %d: unknown kind %q", i+1, f[2])
		}
		t.flags[role][f[1]] = kind
	}
	return t, nil
}

// Lookup returns the kind of flag name for role. A key ending in "+" (K3s's append rule) is
// looked up without the "+". ok is false for an unknown flag.
func (t *Table) Lookup(role Role, name string) (kind Kind, ok bool) {
	name = strings.TrimSuffix(name, "+")
	kind, ok = t.flags[role][name]
	if !ok && role == Server {
		// Server flags include the agent ones (the TSV lists them under server already, but be
		// tolerant of a table that does not).
		kind, ok = t.flags[Agent][name]
	}
	return kind, ok
}

// Names returns the sorted flag names known for role.
func (t *Table) Names(role Role) []string {
	seen := map[string]bool{}
	for n := range t.flags[role] {
		seen[n] = true
	}
	if role == Server {
		for n := range t.flags[Agent] {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Closest returns the known flag name for role nearest to name by edit distance, for "did you
// mean" hints, and false when nothing is within a third of the name's length (at least 2 edits).
func (t *Table) Closest(role Role, name string) (string, bool) {
	name = strings.TrimSuffix(name, "+")
	best, bestD := "", 1<<30
	for _, n := range t.Names(role) {
		if d := levenshtein.ComputeDistance(name, n); d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	limit := len(name) / 3
	if limit < 2 {
		limit = 2
	}
	if best == "" || bestD > limit {
		return "", false
	}
	return best, true
}
