// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
)

func (a *app) applyCmd() *cobra.Command {
	rf := &runFlags{}
	var reconcileTaints, prune bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Install or converge the cluster: preflight, install, supervised bring-up, joins, kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, func(o *installer.Options) { o.ReconcileTaints = reconcileTaints; o.Prune = prune })
			if err != nil {
				return err
			}
			return in.Apply(cmd.Context())
		},
	}
	a.registerRunFlags(cmd, rf, true)
	cmd.Flags().BoolVar(&prune, "prune", false, "remove the nodes that are no longer in the inventory (drain, delete, etcd member, uninstall), as remove-node does")
	cmd.Flags().BoolVar(&reconcileTaints, "reconcile-taints", false, "repair node taint and label drift (read-modify-write, retried on conflict; K3s's own taints are never removed)")
	return cmd
}
