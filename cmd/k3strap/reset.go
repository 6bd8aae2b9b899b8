// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) resetCmd() *cobra.Command {
	rf := &runFlags{}
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset -f FILE [--host NAME...]",
		Short: "Uninstall K3s from the hosts (agents first) so that apply starts from scratch",
		Long: "reset runs the uninstall scripts K3s's install left (k3s-agent-uninstall.sh, k3s-uninstall.sh) on every host,\n" +
			"or on the --host ones: agents first, then servers one at a time, the first server last. It deletes ALL K3s data on\n" +
			"those hosts. When the first server stays, the reset hosts' Node objects are deleted from the cluster.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.load()
			if err != nil {
				return err
			}
			targets := rf.hosts
			if len(targets) == 0 {
				for _, h := range c.Spec.Hosts {
					targets = append(targets, h.Name)
				}
			}
			for _, h := range rf.hosts {
				if c.Host(h) == nil {
					return usageError{fmt.Errorf("--host %s: no such host in %s", h, c.Source)}
				}
			}
			if !yes {
				ok, err := a.confirm(fmt.Sprintf("Uninstall K3s and delete its data on %s?", strings.Join(targets, ", ")))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(a.stderr, "reset: nothing done")
					return nil
				}
			}
			in, err := a.installerFor(c, rf, nil)
			if err != nil {
				return err
			}
			return in.Reset(cmd.Context())
		},
	}
	a.registerRunFlags(cmd, rf, false)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (for scripts)")
	return cmd
}
