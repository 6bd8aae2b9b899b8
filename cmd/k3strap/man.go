// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manSection is the man page section of k3strap's pages (1: user commands).
const manSection = "1"

// manCmd is the hidden `k3strap gen-man DIR` that `make man` runs: one roff man page per
// command (k3strap.1, k3strap-apply.1, ...) written into DIR by github.com/spf13/cobra/doc,
// from the same help, flags and examples --help shows.
func (a *app) manCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write k3strap's man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeManPages(cmd.Root(), args[0])
		},
	}
}

// writeManPages writes the man pages of root and every visible command under it into dir
// (created 0755 if missing).
func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	root.DisableAutoGenTag = true // no date line: the pages are reproducible
	hdr := &doc.GenManHeader{Title: "K3STRAP", Section: manSection, Source: "k3strap", Manual: "k3strap manual"}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}
