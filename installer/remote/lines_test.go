// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"slices"
	"strings"
	"testing"
)

// TestLineWriter: lines split across writes, CRLF, a last line without "\n", nothing after
// end, and a line over maxLine ends the stream's lines as bufio.Scanner would.
func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{onLine: func(s string) { got = append(got, s) }}
	for _, p := range []string{"one\ntw", "o\r\n", "", "\nthree\nfo", "ur"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	w.end()
	if want := []string{"one", "two", "", "three", "four"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Error("a write after end succeeded")
	}
	w.end()
	if len(got) != 5 {
		t.Errorf("lines after end: %q", got[5:])
	}

	got = nil
	w = &lineWriter{onLine: func(s string) { got = append(got, s) }}
	w.Write([]byte("short\n" + strings.Repeat("x", maxLine/2)))
	w.Write([]byte(strings.Repeat("x", maxLine/2+1)))
	w.Write([]byte("\nafter\n"))
	w.end()
	if !slices.Equal(got, []string{"short"}) {
		t.Errorf("after a line over %d bytes: %d lines, want only the one before it", maxLine, len(got))
	}
}
