// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) restoreCmd() *cobra.Command {
	rf := &runFlags{}
	var snapshot string
	var yes bool
	cmd := &cobra.Command{
		Use:   "restore -f FILE --snapshot NAME|PATH",
		Short: "Restore the cluster from an etcd snapshot on the first server",
		Long: "restore stops K3s on every server, runs `k3s server --cluster-reset --cluster-reset-restore-path` on the\n" +
			"first server and watches it come up as apply does, moves the other servers' etcd data aside and rejoins them\n" +
			"one at a time, then restarts the agents. Everything written since the snapshot is lost. A re-run after any\n" +
			"failure picks up where it stopped. Asks on a terminal (--yes for scripts).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if snapshot == "" {
				return usageError{fmt.Errorf("--snapshot NAME|PATH is required (`k3strap backup list` shows the snapshots)")}
			}
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			if !yes && !rf.dryRun {
				ok, err := a.confirm(fmt.Sprintf("Restore the cluster from %s? Everything written since the snapshot is lost.", snapshot))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(a.stderr, "restore: nothing done")
					return nil
				}
			}
			return in.Restore(cmd.Context(), snapshot)
		},
	}
	registerDay2(cmd, rf, true)
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "snapshot: the name given to `backup --name` (the newest snapshot of that name), a full snapshot name in the first server's snapshot directory, a path on the first server, or a copy on this machine (backup --to; uploaded, sha256 checked)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (for scripts)")
	return cmd
}
