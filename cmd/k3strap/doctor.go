// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// doctorCmd is `k3strap doctor` (docs/doctor.md): diagnose a K3s cluster that already
// runs, whoever installed it. With -f it also compares the inventory with the cluster; with
// --ssh [user@]host[:port] (repeatable) it needs no inventory and finds the other nodes from
// the cluster. Exit 0 healthy, 7 warnings only, 8 errors.
func (a *app) doctorCmd() *cobra.Command {
	rf := &runFlags{}
	var targets []string
	var fix, yes bool
	var bundle string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "doctor (-f FILE | --ssh [user@]host[:port] ...)",
		Short: "Diagnose a running K3s cluster, whoever installed it: findings with evidence and fixes (exit 0 healthy, 7 warnings, 8 errors)",
		Long: "doctor reads every node (one SSH command each) and the cluster through one server (one more), and reports\n" +
			"findings with a stable ID, the node, the evidence and the fix: F1 (uninitialized taint), no pod network, F2 (CNI\n" +
			"and the kernel), F3 (Pending on a taint, Rancher's agent), F4 (CNI without the master toleration), F5 (taints and\n" +
			"labels lost since registration), crash loops, certificates expiring within 90 days, NotReady nodes, version skew,\n" +
			"etcd quorum, clock skew, disk pressure. It changes nothing unless --fix (lost taints and labels only, after\n" +
			"confirmation). --bundle writes what it read, secrets redacted. See docs/doctor.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c *inventory.Cluster
			var err error
			if len(targets) > 0 {
				if a.file != "" {
					return usageError{fmt.Errorf("give either -f FILE or --ssh, not both")}
				}
				if c, err = a.sshCluster(targets); err != nil {
					return err
				}
			} else if c, err = a.load(); err != nil {
				return err
			}
			in, err := a.installerFor(c, rf, nil)
			if err != nil {
				return err
			}
			req := installer.DoctorRequest{Discover: len(targets) > 0, Fix: fix, Bundle: bundle, TaintGrace: grace}
			if fix {
				req.Confirm = a.confirmRepairs(yes)
			}
			_, err = in.Doctor(cmd.Context(), req)
			return err
		},
	}
	a.registerRunFlags(cmd, rf, false)
	f := cmd.Flags()
	f.StringArrayVar(&targets, "ssh", nil, "diagnose without an inventory: a node as [user@]host[:port] or a name from ~/.ssh/config (repeatable); the other nodes are found from the cluster")
	f.BoolVar(&fix, "fix", false, "apply the safe, reversible repairs (lost taints and labels) after confirmation")
	f.BoolVarP(&yes, "yes", "y", false, "with --fix: repair without asking (scripts)")
	f.StringVar(&bundle, "bundle", "", "write a support bundle (FILE.tar.gz) of what doctor read, secrets redacted")
	f.DurationVar(&grace, "stall-grace", k3s.StallGrace, "how long the uninitialized taint may stay before F1 is reported")
	return cmd
}

// sshCluster builds the in-memory inventory of doctor --ssh: one host per target, named by the
// target's host part, role server until the cluster says otherwise. The override layer
// (--ssh-user, --ssh-key-path, ...; K3STRAP_*) applies as for a file.
func (a *app) sshCluster(targets []string) (*inventory.Cluster, error) {
	c := &inventory.Cluster{}
	c.Metadata.Name = "doctor"
	for _, t := range targets {
		user, hostport, ok := strings.Cut(t, "@")
		if !ok {
			user, hostport = "", t
		}
		host, port := hostport, 0
		if h, p, err := net.SplitHostPort(hostport); err == nil {
			n, err := inventory.ParsePort(p)
			if err != nil {
				return nil, usageError{fmt.Errorf("--ssh %s: %w", t, err)}
			}
			host, port = h, n
		}
		host = inventory.NormalizeAddress(host)
		if host == "" {
			return nil, usageError{fmt.Errorf("--ssh %q: no host", t)}
		}
		c.Spec.Hosts = append(c.Spec.Hosts, inventory.Host{Name: host, Address: host, Role: inventory.RoleServer,
			SSH: inventory.SSH{User: user, Port: port}})
	}
	if errs := applyOverrides(c, a.v); len(errs) > 0 {
		return nil, errs
	}
	c.ApplyDefaults()
	return c, nil
}

// confirmRepairs asks on the terminal before doctor --fix changes anything (--yes: no question;
// no terminal and no --yes: refused, the commands are printed instead).
func (a *app) confirmRepairs(yes bool) func([]string) bool {
	return func(repairs []string) bool {
		if yes {
			return true
		}
		f, ok := a.stdin.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			fmt.Fprintln(a.stderr, "doctor --fix: not a terminal; give --yes to repair without asking")
			return false
		}
		fmt.Fprintln(a.stderr, "doctor --fix will change the cluster:")
		for _, r := range repairs {
			fmt.Fprintln(a.stderr, "  "+r)
		}
		fmt.Fprint(a.stderr, "apply these repairs? [y/N] ")
		line, _ := bufio.NewReader(f).ReadString('\n')
		return strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
	}
}
