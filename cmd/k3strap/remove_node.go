// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) removeNodeCmd() *cobra.Command {
	rf := &runFlags{}
	var yes bool
	cmd := &cobra.Command{
		Use:   "remove-node -f FILE NAME...",
		Short: "Drain and delete nodes (a server's etcd member too) and uninstall K3s on them",
		Long: "remove-node drains each named node, stops K3s on it, deletes its Node (K3s removes a server's etcd member\n" +
			"with it) and uninstalls K3s on the host when it is reachable. Removing a server is refused when the etcd\n" +
			"members left would have no live majority (e.g. another server is down). `apply --prune` does the same for\n" +
			"nodes no longer in the inventory. Asks on a terminal (--yes for scripts).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			if !yes && !rf.dryRun {
				ok, err := a.confirm(fmt.Sprintf("Remove %s from the cluster and uninstall K3s there?", strings.Join(args, ", ")))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(a.stderr, "remove-node: nothing done")
					return nil
				}
			}
			return in.RemoveNodes(cmd.Context(), args)
		},
	}
	registerDay2(cmd, rf, false)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (for scripts)")
	return cmd
}
