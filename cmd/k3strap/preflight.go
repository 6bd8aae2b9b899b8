// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/spf13/cobra"

func (a *app) preflightCmd() *cobra.Command {
	rf := &runFlags{}
	cmd := &cobra.Command{
		Use:   "preflight -f FILE",
		Short: "Connect to every host, gather facts and run the preflight checks; change nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := a.loadInstaller(rf, nil)
			if err != nil {
				return err
			}
			_, err = in.Preflight(cmd.Context())
			return err
		},
	}
	a.registerRunFlags(cmd, rf, false)
	return cmd
}
