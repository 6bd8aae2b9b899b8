// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"
)

// checkCmd is `k3strap check -f FILE`: it reads every node through the first server
// and reports, per node, where its taints and labels differ from the inventory. It changes
// nothing and exits 6 (exitDrift) when any node differs.
func (a *app) checkCmd() *cobra.Command {
	rf := &runFlags{}
	cmd := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Report per node where taints and labels differ from the inventory; change nothing (exit 6 on drift)",
		Long: "check connects to the first server only and compares every node's taints and labels with the inventory\n" +
			"(spec.hosts[].taints/labels and node-taint/node-label of the K3s config). A declared taint that is missing or has\n" +
			"another value, a taint the inventory no longer declares but k3strap put there, and label differences count as drift;\n" +
			"K3s's and Kubernetes' own taints (node.kubernetes.io/*, node.cloudprovider.kubernetes.io/*) and taints another\n" +
			"controller added never do. `k3strap apply --reconcile-taints` repairs the drift.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			return in.Check(cmd.Context())
		},
	}
	a.registerRunFlags(cmd, rf, false)
	return cmd
}
