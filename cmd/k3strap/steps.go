// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
)

// stepsCmd is `k3strap steps [COMMAND]`: every command's ordered list of named steps.
func (a *app) stepsCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "steps [COMMAND]",
		Short:     "List the named steps each command runs, in order",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: stepCommands(),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := installer.Commands()
			if len(args) == 1 {
				if installer.Steps(args[0]) == nil {
					return usageError{fmt.Errorf("no command %q runs as steps (one of: %s)", args[0], strings.Join(stepCommands(), ", "))}
				}
				names = installer.Variants(args[0]) // upgrade: also upgrade --via suc and --watch
			}
			if ok, err := writeDocument(a.stdout, a.output, stepsDocument(names)); ok {
				return err
			}
			for i, n := range names {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "k3strap %s:\n%s", n, stepList(n))
			}
			return nil
		},
	}
}

// stepCommands are the commands `k3strap steps COMMAND` takes (variants such as
// `upgrade --via suc` are listed with their command).
func stepCommands() []string {
	var out []string
	for _, n := range installer.Commands() {
		if !strings.Contains(n, " ") {
			out = append(out, n)
		}
	}
	return out
}

// stepList renders command's steps as numbered lines; "*" marks a step that --dry-run
// previews instead of running (it changes something or watches a change).
func stepList(command string) string {
	var b strings.Builder
	for i, st := range installer.Steps(command) {
		mark := " "
		if st.Changes {
			mark = "*"
		}
		fmt.Fprintf(&b, "  %2d. %s %-15s %s\n", i+1, mark, st.Phase, st.Summary)
	}
	return b.String()
}

// describeSteps appends each step-run command's step list to its --help text.
func describeSteps(root *cobra.Command) {
	for _, c := range root.Commands() {
		if installer.Steps(c.Name()) == nil {
			continue
		}
		long := c.Long
		if long == "" {
			long = c.Short + "."
		}
		c.Long = long + "\n\nSteps, in order (* = changes something or watches a change; --dry-run previews it instead):\n" + stepList(c.Name())
	}
}

// withSteps appends the steps of the step-run command name to a subcommand's --help
// (describeSteps does it for the top-level commands).
func withSteps(cmd *cobra.Command, name string) *cobra.Command {
	long := cmd.Long
	if long == "" {
		long = cmd.Short + "."
	}
	cmd.Long = long + "\n\nSteps, in order (* = changes something or watches a change; --dry-run previews it instead):\n" + stepList(name)
	return cmd
}

// stepsDoc is one command's steps as `steps -o json|yaml` prints them.
type stepsDoc struct {
	Command string    `json:"command"`
	Steps   []stepDoc `json:"steps"`
}

// stepDoc is one step: its number (from 1), phase (the events' phase), summary, and whether
// --dry-run previews it instead of running it.
type stepDoc struct {
	N       int    `json:"number"`
	Phase   string `json:"phase"`
	Summary string `json:"summary"`
	Changes bool   `json:"changes"`
}

func stepsDocument(names []string) []stepsDoc {
	out := []stepsDoc{}
	for _, n := range names {
		d := stepsDoc{Command: n, Steps: []stepDoc{}}
		for i, st := range installer.Steps(n) {
			d.Steps = append(d.Steps, stepDoc{N: i + 1, Phase: string(st.Phase), Summary: st.Summary, Changes: st.Changes})
		}
		out = append(out, d)
	}
	return out
}
