// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/frontend"
)

// timelineCmd draws a recorded run (its `--output json` lines) as one self-contained HTML page
// with an SVG timeline (frontend.Timeline; docs/output.md "A picture of a run").
func (a *app) timelineCmd() *cobra.Command {
	var outFile string
	cmd := &cobra.Command{
		Use:   "timeline",
		Short: "Draw a recorded run (its JSON events) as an HTML timeline",
		Long: "Read the JSON events of a run (what `-o json` prints, one per line) from -f (- for stdin)\n" +
			"and write one self-contained HTML page (inline SVG, no script, no network) showing per host\n" +
			"when it connected, gathered facts, uploaded, installed, started, reached each bring-up\n" +
			"milestone, joined and became Ready — failures in red, hover for details. A fleet run shows\n" +
			"each site with its wave. The page goes to -O (--output-file), else to stdout.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.file == "" {
				return usageError{fmt.Errorf("timeline needs the run's events: -f events.jsonl (from `k3strap apply -o json > events.jsonl`), or -f - for stdin")}
			}
			// The read yields to Ctrl-C (readAll, input.go): stdin without an end must not hang.
			name, open := a.file, func() (io.ReadCloser, error) { return os.Open(a.file) }
			if a.file == stdinPath {
				name, open = stdinSource, func() (io.ReadCloser, error) { return io.NopCloser(cmd.InOrStdin()), nil }
			}
			data, err := readAll(a.ctx, name, open)
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.As(err, new(usageError)) {
					return err
				}
				return usageError{fmt.Errorf("-f %s: %w", a.file, err)}
			}
			evs, err := frontend.ReadEvents(bytes.NewReader(data), name)
			if err != nil {
				return usageError{err}
			}
			var page bytes.Buffer
			if err := frontend.Timeline(&page, evs); err != nil {
				return err
			}
			if outFile == "" || outFile == "-" {
				_, err := a.stdout.Write(page.Bytes())
				return err
			}
			if err := os.WriteFile(outFile, page.Bytes(), 0o644); err != nil {
				return fmt.Errorf("--output-file: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%d events)\n", outFile, len(evs))
			return nil
		},
	}
	cmd.Flags().StringVarP(&outFile, "output-file", "O", "", "write the HTML page to this file (default stdout)")
	return cmd
}
