// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/suc"
)

func (a *app) upgradeCmd() *cobra.Command {
	rf := &runFlags{}
	var via string
	var watch bool
	cmd := &cobra.Command{
		Use:   "upgrade -f FILE",
		Short: "Move the cluster to spec.k3s.version: servers one at a time, then agents in batches, each drained and uncordoned",
		Long: "upgrade is apply for a new spec.k3s.version (apply does the same when it sees one): servers one at a time,\n" +
			"then agents in batches (--upgrade-batch percent, at least one), each drained (unless --no-drain) and uncordoned\n" +
			"once Ready on the new version. A downgrade is refused unless --force.\n\n" +
			"--via suc (or spec.k3s.upgrade.via: suc) hands the upgrade to system-upgrade-controller instead: k3strap deploys\n" +
			"SUC " + suc.Version + " and the k3s-server (one at a time, cordon) and k3s-agent (--upgrade-batch percent at a time, drain)\n" +
			"Plans, tolerating every taint the inventory declares, then watches every node (job, cordon, drain, upgrade, ready,\n" +
			"uncordon) and diagnoses stalls (--stall-grace). Ctrl-C stops watching and leaves the upgrade running;\n" +
			"--watch resumes watching." + sucStepsHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.load()
			if err != nil {
				return err
			}
			switch via {
			case "":
				via = string(c.UpgradeVia())
			case string(inventory.UpgradeViaSSH), string(inventory.UpgradeViaSUC):
			default:
				return usageError{fmt.Errorf("--via %q: write ssh or suc", via)}
			}
			if watch && via == string(inventory.UpgradeViaSSH) && cmd.Flags().Changed("via") {
				return usageError{fmt.Errorf("--watch follows an upgrade system-upgrade-controller runs; it does not go with --via ssh")}
			}
			if rf.detailedExitCode && (watch || via == string(inventory.UpgradeViaSUC)) {
				// The SUC path's preview says in words what it would deploy; it records no
				// changes, so "nothing pending" could not be told from "not counted".
				return usageError{fmt.Errorf("--detailed-exitcode counts the changes of an upgrade over SSH; it does not go with --via suc or --watch")}
			}
			in, err := a.installerFor(c, rf, nil)
			if err != nil {
				return err
			}
			switch {
			case watch:
				return in.WatchUpgrade(cmd.Context())
			case via == string(inventory.UpgradeViaSUC):
				return in.UpgradeSUC(cmd.Context())
			}
			return in.Upgrade(cmd.Context())
		},
	}
	a.registerRunFlags(cmd, rf, true)
	cmd.Flags().StringVar(&via, "via", "", "how to upgrade: ssh (k3strap drains and upgrades each node) or suc (system-upgrade-controller; default: spec.k3s.upgrade.via, else ssh)")
	cmd.Flags().BoolVar(&watch, "watch", false, "only watch an upgrade system-upgrade-controller is running (after Ctrl-C or from another machine)")
	return cmd
}

// sucStepsHelp lists the steps of `upgrade --via suc` for upgrade's help.
func sucStepsHelp() string {
	var b strings.Builder
	b.WriteString("\n\nSteps with --via suc (--watch runs connect and suc-watch):\n")
	for i, st := range installer.Steps("upgrade --via suc") {
		fmt.Fprintf(&b, "  %d. %-12s %s\n", i+1, st.Phase, st.Summary)
	}
	return strings.TrimRight(b.String(), "\n")
}
