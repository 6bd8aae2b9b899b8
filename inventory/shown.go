// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The loaders' messages never quote what a file holds where it could be a secret: a file
// given to -f by mistake (a private key, a K3s token file, a .env) or a value of the wrong
// type or shape is described by its position and its kind (a string, a list, ...), never
// shown; a mapping key is named only when it reads as a field name. describeValue,
// documentGuess and shownKey are the rules; the tests feed them secrets and look for them in
// every message.

// describeValue names the kind of a YAML value without its content: "a string", "a whole
// number", "a decimal number", "true or false", "a list", "a mapping", "an empty value".
func describeValue(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	switch n.ShortTag() {
	case "!!int":
		return "a whole number"
	case "!!float":
		return "a decimal number"
	case "!!bool":
		return "true or false"
	case "!!null":
		return "an empty value"
	case "!!timestamp":
		return "a date"
	case "!!binary":
		return "binary data"
	}
	if strings.Contains(n.Value, "\n") {
		return "a string of several lines"
	}
	return "a string"
}

var (
	envLineRE   = regexp.MustCompile(`^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=`)
	k3sTokenRE  = regexp.MustCompile(`^K10[0-9a-f]{16,}::[a-z]+:`)
	bareTokenRE = regexp.MustCompile(`^\S{12,}$`)
)

// documentGuess says what a document that is a single string most likely is — the file a
// user meant for something else — so the message can say it without quoting it: "a private
// key", "a K3s token", "an environment (.env) file", ... ; empty when it cannot tell.
func documentGuess(s string) string {
	t := strings.TrimSpace(s)
	first, _, _ := strings.Cut(t, "\n")
	switch {
	case strings.Contains(t, "PRIVATE KEY"):
		return "a private key"
	case strings.HasPrefix(t, "-----BEGIN"):
		return "a PEM certificate or key"
	case strings.HasPrefix(t, "ssh-") || strings.HasPrefix(t, "ecdsa-sha2-"):
		return "an SSH public key"
	case k3sTokenRE.MatchString(t):
		return "a K3s token"
	case envLineRE.MatchString(first):
		return "an environment (.env) file"
	case bareTokenRE.MatchString(t):
		return "a token or password"
	}
	return ""
}

var fieldNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./-]{0,62}$`)

// shownKey returns the mapping key k quoted when it reads as a field name (a letter, then at
// most 62 letters, digits, '_', '.', '/', '-'), else "a key" plus where the caller says: a
// line of a mistaken file that YAML read as a key is not shown.
func shownKey(k string) string {
	if fieldNameRE.MatchString(k) {
		return `"` + k + `"`
	}
	return "(not shown: not a field name)"
}

var quotedRE = regexp.MustCompile("'[^']*'|\"[^\"]*\"|`[^`]*`")

// withoutQuotes removes the quoted fragments of a YAML parser message ("unknown anchor 'x'
// referenced"): they are the file's text. The parser's own indicators ("expected '-'
// indicator", at most 3 characters between the quotes) stay.
func withoutQuotes(msg string) string {
	return quotedRE.ReplaceAllStringFunc(msg, func(q string) string {
		if len(q) <= 5 {
			return q
		}
		return "'…'"
	})
}
