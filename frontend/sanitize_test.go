// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/k3strap/k3strap/events"
)

// TestStripControl: escape sequences in their 7-bit and 8-bit (C1) forms and lone control
// characters are removed; printable text (any script), newline and tab stay.
func TestStripControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain host-1":          "plain host-1",
		"\x1b[31mred\x1b[0m":    "red",
		"a\u009b31mb":           "ab", // C1 CSI with its parameters
		"a\u009b2Jb":            "ab", // C1 CSI: clear screen
		"a\u009d0;title\u009cb": "ab", // C1 OSC ... ST
		"a\x1b]0;pwned\x07b":    "ab", // OSC set title, BEL-terminated
		"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "alink", // hyperlink
		"a\x1bPq#0;2;0;0;0\x1b\\b":                  "ab",    // DCS (sixel)
		"cr\rover":                                  "crover",
		"bell\x07 bs\x08 del\x7f":                   "bell bs del",
		"line1\nline2\tcol":                         "line1\nline2\tcol",
		"größe 大 ✓":                                 "größe 大 ✓",
		"bad\xffutf8":                               "bad\uFFFDutf8",
		"\u0085nel":                                 "nel",
	} {
		if got := StripControl(in); got != want {
			t.Errorf("StripControl(%q) = %q, want %q", in, got, want)
		}
	}
}

// assertTerminalSafe fails when s holds a control character other than newline and tab (C0,
// DEL, C1) or invalid UTF-8.
func assertTerminalSafe(t *testing.T, in, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("StripControl(%q) = %q: invalid UTF-8", in, s)
	}
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Fatalf("StripControl(%q) = %q: holds control character %U", in, s, r)
		}
	}
}

// FuzzStripControl: whatever a host name or a remote message holds, what reaches the terminal
// has no control character, and printable ASCII passes unchanged.
func FuzzStripControl(f *testing.F) {
	for _, s := range []string{"\x1b[2J", "\u009b2J", "\u009b", "\u009d\u009c", "\xc2\x9b31m", "\x1b", "\x1bP", "a\x00b", "ok", "\x9b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := StripControl(in)
		assertTerminalSafe(t, in, out)
		if isPlain(in) && !strings.Contains(in, "\x1b") && out != in {
			t.Fatalf("StripControl(%q) = %q: changed plain text", in, out)
		}
		assertTerminalSafe(t, in, Sanitize(in))
	})
}

// TestPlainHostPrefixSanitized: a host name with control characters reaches the plain output's
// prefix without them.
func TestPlainHostPrefixSanitized(t *testing.T) {
	p := Prefix(eventWithHost("cp1\x1b[2J\u009b31m\r"))
	assertTerminalSafe(t, "prefix", p)
	if !strings.Contains(p, " cp1 ") {
		t.Fatalf("prefix %q lost the host name", p)
	}
}

func eventWithHost(h string) events.Event {
	return events.Event{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Type: events.Info, Host: h, Phase: "connect", Message: "m"}
}
