// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/spf13/cobra"

func (a *app) rotateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rotate certificates|token -f FILE",
		Short: "Rotate the K3s certificates or the cluster token on every node",
		Args:  cobra.NoArgs,
	}
	rfc := &runFlags{}
	certs := &cobra.Command{
		Use:   "certificates -f FILE",
		Short: "k3s certificate rotate on every node: servers one at a time, then agents, each Ready again before the next",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rfc, nil)
			if err != nil {
				return err
			}
			return in.RotateCertificates(cmd.Context())
		},
	}
	registerDay2(certs, rfc, true)
	rft := &runFlags{}
	token := &cobra.Command{
		Use:   "token -f FILE",
		Short: "k3s token rotate: the new token from K3STRAP_K3S_TOKEN or generated, written to every node, nodes restarted",
		Long: "rotate token replaces the server token (`k3s token rotate`) with K3STRAP_K3S_TOKEN's value or a generated one,\n" +
			"writes it to /etc/rancher/k3s/cluster-token (0600) on every node and restarts the servers one at a time, then\n" +
			"the agents. The old token no longer joins. The token never appears in k3strap's output or logs. Snapshots taken\n" +
			"before need the old token to be restored (backup --to keeps it beside the snapshot).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rft, nil)
			if err != nil {
				return err
			}
			return in.RotateToken(cmd.Context())
		},
	}
	registerDay2(token, rft, true)
	cmd.AddCommand(withSteps(certs, "rotate-certificates"), withSteps(token, "rotate-token"))
	return cmd
}
