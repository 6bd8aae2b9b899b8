// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package flags is the simulator's own copy of the K3s v1.36.3 flag table: the flag names a
// real K3s accepts per role, with the kind of value each takes, read off `k3s server --help`
// and `k3s agent --help`. It is deliberately independent of k3strap's package k3s, so that
// the end-to-end tests check the product's table against a separate copy instead of against
// itself.
package flags

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"
)

// Role is the K3s subcommand a flag belongs to.
type Role string

// The two K3s roles.
const (
	Server Role = "server"
	Agent  Role = "agent"
)

// Kind is the shape of a flag's value.
type Kind string

// Flag value kinds (the TSV's third column).
const (
	Bool   Kind = "bool"
	String Kind = "string"
	List   Kind = "list"
)

//go:embed k3s-flags-v1.36.3.tsv
var tsv string // never written

// Table holds the known flag names per role; read-only once built.
type Table struct {
	flags map[Role]map[string]Kind
}

var load = sync.OnceValue(func() *Table {
	t := &Table{flags: map[Role]map[string]Kind{Server: {}, Agent: {}}}
	for i, line := range strings.Split(tsv, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			panic(fmt.Sprintf("flag table line %d: want 3 fields", i+1))
		}
		t.flags[Role(f[0])][f[1]] = Kind(f[2])
	}
	return t
})

// Load returns the embedded table (parsed once, shared, read-only).
func Load() *Table { return load() }

// Lookup returns the kind of flag name for role; a trailing "+" (K3s's append rule) is
// ignored. Server flags include the agent ones. ok is false for an unknown flag.
func (t *Table) Lookup(role Role, name string) (Kind, bool) {
	name = strings.TrimSuffix(name, "+")
	k, ok := t.flags[role][name]
	if !ok && role == Server {
		k, ok = t.flags[Agent][name]
	}
	return k, ok
}
