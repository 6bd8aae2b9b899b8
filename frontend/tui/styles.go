// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tui is k3strap's terminal UI (charm.land/bubbletea/v2): the live dashboard of
// `apply` and `preflight` — one row per host with its phase and a spinner, upload progress
// bars with their rate, the preflight table coloured by severity with the fix of each
// finding, the first server's bring-up timeline and the final summary — and the `k3strap init`
// wizard that builds an inventory. The dashboard only consumes events (package events); it
// never reaches into the installer.
//
// Colours follow the terminal's colour profile; NO_COLOR (any non-empty value,
// https://no-color.org) turns them off (Profile). Every symbol that carries meaning is also a
// word or a shape (✓ ✗ ERROR WARN), so nothing is lost without colour.
package tui

import (
	"io"
	"os"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

// Profile returns the colour profile for output w under the environment environ
// (os.Environ() form): colorprofile's detection, except that a non-empty NO_COLOR always
// means no colour (text decoration such as bold stays), as no-color.org asks.
func Profile(w io.Writer, environ []string) colorprofile.Profile {
	for _, kv := range environ {
		if len(kv) > len("NO_COLOR=") && kv[:len("NO_COLOR=")] == "NO_COLOR=" {
			return colorprofile.Ascii
		}
	}
	return colorprofile.Detect(w, environ)
}

// DefaultProfile is Profile for os.Stdout and the process environment.
func DefaultProfile() colorprofile.Profile { return Profile(os.Stdout, os.Environ()) }

// styles are the dashboard's and wizard's text styles. Colours are ANSI 16 so that they read on
// dark and light backgrounds; the program's renderer downsamples them to the profile.
type styles struct {
	title, dim, bold, ok, fail, warn, ignored, accent, key, selected, section lipgloss.Style
}

func newStyles() styles {
	s := lipgloss.NewStyle()
	return styles{
		title:    s.Bold(true),
		dim:      s.Faint(true),
		bold:     s.Bold(true),
		ok:       s.Foreground(lipgloss.Green),
		fail:     s.Foreground(lipgloss.Red).Bold(true),
		warn:     s.Foreground(lipgloss.Yellow),
		ignored:  s.Foreground(lipgloss.Magenta),
		accent:   s.Foreground(lipgloss.Cyan),
		key:      s.Foreground(lipgloss.Cyan).Bold(true),
		selected: s.Reverse(true),
		section:  s.Bold(true).Underline(true),
	}
}
