// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/frontend/tui"
	"github.com/k3strap/k3strap/schema"
)

// initCmd is `k3strap init`: the terminal wizard that builds an inventory, writes it
// as commented YAML and offers to run preflight or apply on it right away.
func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init [-f FILE]",
		Short: "Build an inventory in a terminal wizard: hosts (with a live SSH test), K3s, network, Rancher",
		Long: "init asks for the cluster's hosts (testing each SSH connection live), the K3s release and\n" +
			"install mode, the pod network, taints and Rancher, shows the inventory it will write, writes\n" +
			"it as commented YAML to keep in git (-f names the file, default cluster.yaml), and offers to\n" +
			"run preflight or apply on it. It needs a terminal.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, ok := a.terminalSize(); !ok {
				return usageError{errors.New("init is interactive and needs a terminal; without one, copy an inventory from examples/ and check it with `k3strap validate -f FILE`")}
			}
			path := a.file
			if path == "" {
				path = defaultInventory // input.go: what commands read without -f
			}
			res, err := tui.RunWizard(a.terminal(), tui.WizardOptions{Path: path, Context: cmd.Context()})
			if err != nil {
				return fmt.Errorf("init: %w", err)
			}
			if !res.Written {
				fmt.Fprintln(a.stdout, "init: nothing written")
				return nil
			}
			fmt.Fprintf(a.stdout, "wrote %s\n", res.Path)
			// Its first line is the yaml-language-server modeline naming the schema file.
			if _, err := os.Stat(filepath.Join(filepath.Dir(res.Path), schema.FileName)); err != nil {
				fmt.Fprintf(a.stdout, "editor checking: k3strap schema > %s (the file's first line names it)\n", filepath.Join(filepath.Dir(res.Path), schema.FileName))
			}
			if res.Next == tui.NextNothing {
				if len(res.Problems) > 0 {
					fmt.Fprintf(a.stdout, "it has %d problems: fix them, then run k3strap validate -f %s\n", len(res.Problems), res.Path)
				} else {
					fmt.Fprintf(a.stdout, "next: k3strap preflight -f %s   then: k3strap apply -f %s\n", res.Path, res.Path)
				}
				return nil
			}
			return a.runAfterInit(cmd, res)
		},
	}
}

// runAfterInit runs preflight or apply on the inventory the wizard wrote, with the front-end
// and defaults of those commands.
func (a *app) runAfterInit(cmd *cobra.Command, res tui.WizardResult) error {
	a.file = res.Path
	c, err := a.load()
	if err != nil {
		return err
	}
	// The flags' defaults, as `k3strap preflight` and `k3strap apply` have them.
	rf := &runFlags{}
	rf.register(&cobra.Command{}, true)
	in, err := a.installerFor(c, rf, nil)
	if err != nil {
		return err
	}
	if res.Next == tui.NextApply {
		err = in.Apply(cmd.Context())
	} else {
		_, err = in.Preflight(cmd.Context())
	}
	a.close() // the dashboard draws its final frame before anything else is printed
	if err == nil && res.Next == tui.NextPreflight {
		fmt.Fprintf(a.stdout, "preflight passed; install with: k3strap apply -f %s\n", res.Path)
	}
	return err
}
