// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// StripControl is k3strap's one rule for text that reaches a terminal (plain output, the
// terminal UI, the errors main prints): it removes every escape sequence (CSI, OSC, DCS, APC,
// ... in their 7-bit ESC forms and their 8-bit C1 forms, by github.com/charmbracelet/x/ansi's
// parser) and then every remaining C0 control character other than newline and tab, DEL
// (0x7f) and every C1 control character (U+0080–U+009F, e.g. U+009B, the one-character CSI).
// Invalid UTF-8 becomes U+FFFD. Host names, remote output and messages built from them may
// hold any byte; none of it may move the cursor, recolour or retitle the user's terminal.
func StripControl(s string) string {
	if isPlain(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	// A terminal may read a C1 character (U+0080–U+009F, as UTF-8) as the escape sequence's
	// introducer (U+009B as CSI): written in its 7-bit form (ESC + character-0x40), the parser
	// removes the whole sequence, parameters included.
	var b strings.Builder
	for _, r := range s {
		if r >= 0x80 && r <= 0x9f {
			b.WriteByte(0x1b)
			b.WriteByte(byte(r - 0x40))
			continue
		}
		b.WriteRune(r)
	}
	s = ansi.Strip(b.String())
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return -1
		}
		return r
	}, s)
}

// isPlain reports whether s is printable ASCII (plus newline and tab): nothing to strip.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}
