// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
)

func (a *app) backupCmd() *cobra.Command {
	rf := &runFlags{}
	var req installer.BackupRequest
	cmd := &cobra.Command{
		Use:   "backup -f FILE [--name N] [--to DIR]",
		Short: "Save an etcd snapshot on the first server; with --to, copy it and the token to this machine",
		Long: "backup runs `k3s etcd-snapshot save` on the first server (embedded etcd only; the inventory's\n" +
			"spec.k3s.etcdSnapshots settings apply). With --to DIR the snapshot and the server token — restoring needs the\n" +
			"token the snapshot was taken with — are copied over SFTP to DIR (mode 0600, sha256 compared with the host's,\n" +
			"NAME.sha256 beside them). The summary gives the exact `k3strap restore` command for what it saved.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			_, err = in.Backup(cmd.Context(), req)
			return err
		},
	}
	registerDay2(cmd, rf, false)
	cmd.Flags().StringVar(&req.Name, "name", "", "snapshot name prefix (K3s default: on-demand)")
	cmd.Flags().StringVar(&req.To, "to", "", "directory on this machine to copy the snapshot and the token to")
	list := &cobra.Command{
		Use:   "list -f FILE",
		Short: "List the etcd snapshots on the first server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			_, err = in.BackupList(cmd.Context())
			return err
		},
	}
	a.registerRunFlags(list, rf, false)
	cmd.AddCommand(withSteps(list, "backup-list"))
	return cmd // describeSteps appends backup's steps
}
