// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// maxPrintedErrors caps the inventory problems printed at once: a broken (or huge) file can
// hold a million, and the first few dozen are what a user fixes first.
const maxPrintedErrors = 30

// validateCmd loads the inventory and runs the static preflight checks (preflight.RunStatic:
// the ones that read only the inventory, and AirgapRelease on the local airgap binaries). It
// opens no connection. Exit 2 when the inventory is invalid or a static check finds an error
// that --ignore-preflight-errors does not cover.
func (a *app) validateCmd() *cobra.Command {
	var ignore []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check an inventory file and the preflight checks that need no host, without connecting to any host",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ign, err := preflight.ParseIgnore(ignore)
			if err != nil {
				return usageError{fmt.Errorf("--ignore-preflight-errors: %w", err)}
			}
			c, err := a.load()
			if err != nil {
				return err
			}
			rep := preflight.RunStatic(&preflight.Input{Cluster: c, BinaryReleases: preflight.ReadBinaryReleases(c)}, ign)
			if a.output == "json" {
				return a.validateJSON(c, rep)
			}
			printFindings(a.stdout, rep.Findings)
			if errs := rep.Errors(); len(errs) > 0 {
				var ids []string
				for _, f := range errs {
					if !slices.Contains(ids, f.ID) {
						ids = append(ids, f.ID)
					}
				}
				return usageError{fmt.Errorf("%s: %d preflight error(s) found without connecting (%s); fix the inventory as each fix says, or pass --ignore-preflight-errors=%s to accept the risk",
					c.Source, len(errs), strings.Join(ids, ", "), strings.Join(ids, ","))}
			}
			var roles []string
			for _, h := range c.Spec.Hosts {
				roles = append(roles, h.Name+" ("+string(h.Role)+")")
			}
			fmt.Fprintf(a.stdout, "%s: valid — cluster %s, %d hosts: %s\n", c.Source, c.Metadata.Name, len(c.Spec.Hosts), strings.Join(roles, ", "))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&ignore, "ignore-preflight-errors", nil, "preflight checks whose errors become warnings: ID,ID,... or all")
	return cmd
}

// validateDoc is what `validate -o json` prints: one object whether the inventory passed or
// not (an inventory that does not load prints the errors on stderr, exit 2, as with plain).
type validateDoc struct {
	Source   string            `json:"source"`
	Valid    bool              `json:"valid"`
	Cluster  string            `json:"cluster"`
	Hosts    []validateHost    `json:"hosts"`
	Findings []validateFinding `json:"findings"`
}

// validateFinding is a preflight finding as `validate -o json` has always printed it
// (docs/output.md): the check ID under "check", one fix, evidence as {"Text", "Source"}.
type validateFinding struct {
	Check    string             `json:"check"`
	Host     string             `json:"host"`
	Severity string             `json:"severity"`
	Message  string             `json:"message"`
	Fix      string             `json:"fix,omitempty"`
	Ignored  bool               `json:"ignored,omitempty"`
	Evidence []finding.Evidence `json:"evidence,omitempty"`
	Commands []string           `json:"commands,omitempty"`
}

type validateHost struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// validateJSON prints rep as a validateDoc and returns the same error (exit 2) as plain when
// a static check found an error.
func (a *app) validateJSON(c *inventory.Cluster, rep *preflight.Report) error {
	errs := rep.Errors()
	d := validateDoc{Source: c.Source, Valid: len(errs) == 0, Cluster: c.Metadata.Name, Hosts: []validateHost{}, Findings: []validateFinding{}}
	for _, h := range c.Spec.Hosts {
		d.Hosts = append(d.Hosts, validateHost{h.Name, string(h.Role)})
	}
	for _, f := range rep.Findings {
		d.Findings = append(d.Findings, validateFinding{Check: f.ID, Host: f.Host, Severity: string(f.Severity), Message: f.Message,
			Fix: f.Fix(), Ignored: f.Ignored, Evidence: f.Evidence, Commands: f.Commands})
	}
	if _, err := writeDocument(a.stdout, "json", d); err != nil {
		return err
	}
	if len(errs) > 0 {
		return usageError{fmt.Errorf("%s: %d preflight error(s) found without connecting", c.Source, len(errs))}
	}
	return nil
}

// printFindings writes findings as kubeadm does, each with its fix on the next line.
func printFindings(w io.Writer, fs []finding.Finding) {
	for _, f := range fs {
		fmt.Fprintln(w, frontend.StripControl(f.String()))
		if f.Fix() != "" {
			fmt.Fprintln(w, "    fix: "+frontend.StripControl(f.Fix()))
		}
	}
}

// readError explains an inventory file that cannot be read (missing, unreadable, a
// directory) with its name and a fix, as a usage error (exit 2).
func readError(path string, err error) error {
	fix := "check the path given with -f (or $K3STRAP_FILE)"
	switch st, serr := os.Stat(path); {
	case serr == nil && st.IsDir():
		return usageError{fmt.Errorf("the inventory %s is a directory, not a file — fix: give the inventory file in it, e.g. -f %s", path, strings.TrimSuffix(path, "/")+"/cluster.yaml")}
	case errors.Is(err, fs.ErrNotExist):
		fix = "check the path given with -f (or $K3STRAP_FILE), or write one with `k3strap init`"
	case errors.Is(err, fs.ErrPermission):
		fix = fmt.Sprintf("make it readable by this user (e.g. chmod 600 %s as its owner), or run k3strap as the file's owner", path)
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // drop inventory's "read inventory: " prefix
	}
	return usageError{fmt.Errorf("cannot read the inventory %s: %w — fix: %s", path, err, fix)}
}

// printErrorList writes at most max problems of l, then how many more there are.
func printErrorList(w io.Writer, l inventory.ErrorList, max int) {
	for i, e := range l {
		if i == max {
			fmt.Fprintf(w, "... and %d more problems not shown (%d in all): fix these first and run `k3strap validate` again\n", len(l)-max, len(l))
			return
		}
		fmt.Fprintln(w, frontend.StripControl(e.Error())) // names come from the file
	}
}
