package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

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
	rf.register(cmd, true)
	cmd.Flags().StringVar(&via, "via", "", "how to upgrade: ssh (k3strap drains and upgrades each node) or suc (system-upgrade-controller; default: spec.k3s.upgrade.via, else ssh)")
	cmd.Flags().BoolVar(&watch, "watch", false, "only watch an upgrade system-upgrade-controller is running (after Ctrl-C or from another machine)")
	return cmd
}

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
	rf.register(cmd, false)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (for scripts)")
	return cmd
}

// confirm asks a yes/no question on the terminal; without a terminal it refuses and says to
// pass --yes.
func (a *app) confirm(question string) (bool, error) {
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, usageError{fmt.Errorf("%s — not asked: stdin is not a terminal; pass --yes to confirm", question)}
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(f).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

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
	rf.register(cmd, false)
	cmd.Flags().BoolVar(&req.Merge, "merge", false, "merge into an existing kubeconfig (default $KUBECONFIG or ~/.kube/config) and make the context current")
	cmd.Flags().StringVar(&req.Context, "context", "", "name of the context, cluster and user (default: the cluster's name)")
	cmd.Flags().StringVar(&req.Path, "kubeconfig-out", "", "file to write or merge into")
	cmd.Flags().StringVar(&apiAddress, "api-address", "", "address clients use for the API server (default: the first server's address)")
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
