// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
)

func (a *app) kubeconfigCmd() *cobra.Command {
	rf := &runFlags{}
	var req installer.KubeconfigRequest
	var apiAddress string
	cmd := &cobra.Command{
		Use:   "kubeconfig -f FILE [--merge] [--context NAME] [--kubeconfig-out PATH]",
		Short: "Write the cluster's kubeconfig, or merge it into an existing one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, func(o *installer.Options) { o.APIAddress = apiAddress })
			if err != nil {
				return err
			}
			_, err = in.Kubeconfig(cmd.Context(), req)
			return err
		},
	}
	a.registerRunFlags(cmd, rf, false)
	cmd.Flags().BoolVar(&req.Merge, "merge", false, "merge into an existing kubeconfig (default $KUBECONFIG or ~/.kube/config) and make the context current")
	cmd.Flags().StringVar(&req.Context, "context", "", "name of the context, cluster and user (default: the cluster's name)")
	cmd.Flags().StringVar(&req.Path, "kubeconfig-out", "", "file to write or merge into")
	cmd.Flags().StringVar(&apiAddress, "api-address", "", "address clients use for the API server (default: the first server's address)")
	return cmd
}
