// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"sort"
	"strconv"
	"strings"
)

// FieldError is one problem found in an inventory: where it is (file, 1-based line and column
// of the offending YAML key or value; 0 when unknown, e.g. for a value set by an environment
// variable or a flag), which host it concerns (empty for cluster-wide problems), the field path
// ("spec.hosts[1].taints[0]"), what is wrong and how to fix it.
//
// FieldError is the error type for input: messages never quote what a file holds where it
// could be a secret — a Secret's value never, a value of the wrong type or shape only by its
// kind ("a string", "a list"), a file given by mistake by what it looks like ("a private key"),
// a mapping key only when it reads as a field name (shown.go). Position and kind of problem
// carry the message.
type FieldError struct {
	File         string
	Line, Column int
	// Host is the inventory name of the host the problem belongs to, if any.
	Host string
	// Path is the field path as recorded in Cluster.Positions, e.g. "spec.k3s.config.disable".
	Path    string
	Message string
	// Fix says what to write instead; may be empty.
	Fix string
}

// Error formats the problem as FILE:LINE:COL: host NAME: MESSAGE — fix: FIX, leaving out every
// empty part (no line when unknown, no host for cluster-wide problems, no fix when none is known).
func (e *FieldError) Error() string {
	var b strings.Builder
	var loc []string
	if e.File != "" {
		loc = append(loc, e.File)
	}
	if e.Line > 0 {
		loc = append(loc, strconv.Itoa(e.Line))
		if e.Column > 0 {
			loc = append(loc, strconv.Itoa(e.Column))
		}
	}
	if len(loc) > 0 {
		b.WriteString(strings.Join(loc, ":"))
		b.WriteString(": ")
	}
	if e.Host != "" {
		b.WriteString("host ")
		b.WriteString(printableName(e.Host))
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Fix != "" {
		b.WriteString(" — fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// printableName returns name as it is when it is printable ASCII, else Go-quoted (control
// characters escaped): a host name that validation refuses for its control characters must
// not reach the terminal raw in the message saying so.
func printableName(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return strconv.Quote(name)
		}
	}
	return name
}

// ErrorList is every problem found in an inventory. Load and Validate collect all problems
// instead of stopping at the first. A nil or empty ErrorList means no problem; use Err to turn
// it into an error value that is nil when empty.
type ErrorList []*FieldError

// Error lists every problem, one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as errors, so errors.As(err, &fieldErr) finds the first one.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns l as an error, or nil when l is empty (avoids the typed-nil-interface trap).
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sort orders the problems by file position (line, then column); problems without a position
// (overrides from flags or environment) come last. The order among equal positions is kept.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
