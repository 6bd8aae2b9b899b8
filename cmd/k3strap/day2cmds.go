package main

// Day-two commands: backup, restore, remove-node, rotate. docs/day2.md.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer"
)

// registerDay2 adds the flags every day-two command shares with apply that matter to it.
func registerDay2(cmd *cobra.Command, rf *runFlags, watches bool) {
	rf.register(cmd, false)
	f := cmd.Flags()
	f.BoolVar(&rf.dryRun, "dry-run", false, "connect and show what would be done; change nothing")
	if watches {
		f.DurationVar(&rf.timeout, "timeout", 10*time.Minute, "how long a node may take to be Ready again")
		f.DurationVar(&rf.stallGrace, "stall-grace", 60*time.Second, "how long the uninitialized taint may stay before the stall is diagnosed")
	}
}

// withSteps appends the steps of the step-run command name to a subcommand's --help
// (describeSteps does it for the top-level commands).
func withSteps(cmd *cobra.Command, name string) *cobra.Command {
	long := cmd.Long
	if long == "" {
		long = cmd.Short + "."
	}
	cmd.Long = long + "\n\nSteps, in order (* = changes something or watches a change; --dry-run previews it instead):\n" + stepList(name)
	return cmd
}

func (a *app) backupCmd() *cobra.Command {
	rf := &runFlags{}
	var req installer.BackupRequest
	cmd := &cobra.Command{
		Use:   "backup -f FILE [--name N] [--to DIR]",
		Short: "Save an etcd snapshot on the first server; with --to, copy it and the token to this machine",
		Long: "backup runs `k3s etcd-snapshot save` on the first server (embedded etcd only; the inventory's\n" +
			"spec.k3s.etcdSnapshots settings apply). With --to DIR the snapshot and the server token — restoring needs the\n" +
			"token the snapshot was taken with — are copied over SFTP to DIR (mode 0600, sha256 compared with the host's,\n" +
			"NAME.sha256 beside them).",
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
	rf.register(list, false)
	cmd.AddCommand(withSteps(list, "backup-list"))
	return cmd // describeSteps appends backup's steps
}

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
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "snapshot name (in the first server's snapshot directory), path on the first server, or a copy on this machine (backup --to; uploaded, sha256 checked)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (for scripts)")
	return cmd
}

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
