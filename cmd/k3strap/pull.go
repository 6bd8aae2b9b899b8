// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/firstboot"
	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/fleet/sitestatus"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/pull"
)

// pullCmd groups pull mode (docs/edge-pull.md): `run` on the box (the timer runs it), `install`
// writes the service and timer, `status` prints the last run's status.
func (a *app) pullCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pull",
		Short: "Pull mode: the box fetches its site's desired state from Git or HTTPS, verifies its signature or digest, and converges itself when it changed",
	}
	cmd.AddCommand(a.pullRunCmd(), a.pullInstallCmd(), a.pullStatusCmd())
	return cmd
}

// loadPullConfig reads the configuration; an invalid one is a usage error (exit 2).
func loadPullConfig(path string) (*pull.Config, error) {
	c, err := pull.LoadConfig(path)
	if err != nil {
		return nil, usageError{err}
	}
	if c.Host == "" {
		hn, err := os.Hostname()
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: no host set and this machine's host name is unknown (%v) — fix: set host: to this box's inventory host", path, err)}
		}
		c.Host, _, _ = strings.Cut(hn, ".")
	}
	return c, nil
}

// pullRunCmd fetches, verifies and converges once (the timer runs it every interval).
func (a *app) pullRunCmd() *cobra.Command {
	var config string
	var force bool
	var timeout, joinTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run [--config " + pull.ConfigPath + "]",
		Short: "On the box: fetch the desired state, verify it (signature by a pinned key, or pinned sha256), converge in local mode when the verified revision is not the applied one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadPullConfig(config)
			if err != nil {
				return err
			}
			r := &pull.Runner{Config: c, Log: a.stdout, Force: force,
				Converge: a.pullConverge(c, timeout, joinTimeout),
				Exit:     func(err error) (int, string) { return exitSummary(pullError(err)) }}
			st, err := r.Run(cmd.Context())
			// The one place a pull run's status leaves the box (beside status.json and the
			// journal): see reportPullStatus.
			a.reportPullStatus(cmd.Context(), c, st)
			return pullError(err)
		},
	}
	cmd.Flags().StringVarP(&config, "config", "c", pull.ConfigPath, "the pull configuration (docs/edge-pull.md)")
	cmd.Flags().BoolVar(&force, "force", false, "converge even when the verified revision is the applied one")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "bring-up timeout of this box's K3s")
	cmd.Flags().DurationVar(&joinTimeout, "join-timeout", installer.DefaultJoinTimeout, "how long a joining box waits for the cluster's API")
	return cmd
}

// reportPullStatus sends a pull run's status to the management cluster when the
// configuration names one (management:), as the site's own credential, and records how that
// went in the box's status.json (Status.Report); a failure to report also goes to the journal
// (stderr) and never changes the run's exit code.
func (a *app) reportPullStatus(ctx context.Context, c *pull.Config, st pull.Status) {
	m := c.Management
	if m == nil || ctx.Err() != nil {
		return
	}
	s := pullSiteStatus(st, localNodes(ctx, k3sKubeconfig))
	rep := &pull.Report{Reported: true, Server: sitestatus.Server(m.Kubeconfig), Site: m.Site}
	if err := sitestatus.Write(ctx, m.Kubeconfig, m.Site, s); err != nil {
		rep.Reported, rep.Message = false, err.Error()
		fmt.Fprintf(a.stderr, "k3strap pull: the status was not reported to the management cluster %s (status.json has the run and this error): %v\n", rep.Server, err)
	} else {
		fmt.Fprintf(a.stdout, "k3strap pull: status reported to the management cluster %s as site %s\n", rep.Server, m.Site)
	}
	st.Report = rep
	if err := pull.WriteStatus(c.StateDir, st); err != nil {
		fmt.Fprintf(a.stderr, "k3strap pull: writing %s: %v\n", pull.StatusName, err)
	}
}

// k3sKubeconfig is the admin kubeconfig a K3s server writes (docs/k3s.md "Files").
const k3sKubeconfig = "/etc/rancher/k3s/k3s.yaml"

// localNodes is what the local server's API says of the cluster's nodes (fleet.Observe),
// through its admin kubeconfig: nil on an agent box, or when the API does not answer within
// 10 s.
func localNodes(ctx context.Context, kubeconfig string) *fleet.Observed {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return fleet.Observe(nodes.Items, time.Now())
}

// pullSiteStatus is the SiteStatus of a pull run's status st (and the nodes the box sees, nil
// when unknown): its revisions, whether the source answered, the run's outcome, and the run's
// time as LastSeen.
func pullSiteStatus(st pull.Status, nodes *fleet.Observed) sitestatus.Status {
	reachable := st.SourceReachable
	out := sitestatus.Status{
		Source:          sitestatus.SourcePull,
		DesiredRevision: st.DesiredRevision,
		AppliedRevision: st.AppliedRevision,
		SourceReachable: &reachable,
		LastSeen:        st.Time,
		LastResult: &sitestatus.Result{Command: "pull", ExitCode: st.Result.ExitCode, ExitMeaning: st.Result.ExitMeaning,
			Message: st.Result.Message, Time: st.Time},
	}
	if !reachable {
		out.SourceMessage = st.SourceMessage
	}
	if nodes != nil {
		out.Version, out.NodesReady, out.NodesTotal = strings.Join(nodes.Versions, ","), nodes.Ready, nodes.Nodes
	}
	return out
}

// pullError maps pull's errors to the exit table: bad configuration, a missing ref and refused
// (unverified) desired state are invalid input (exit 2); an unreachable source is a deferred
// site (exit 10: the box keeps its state, the next run retries).
func pullError(err error) error {
	var ce *pull.ConfigError
	var re *pull.RefError
	var rf *pull.RefusedError
	var ue *pull.UnreachableError
	switch {
	case err == nil:
		return nil
	case errors.As(err, new(usageError)):
		return err
	case errors.As(err, &ce), errors.As(err, &re), errors.As(err, &rf):
		return usageError{err}
	case errors.As(err, &ue):
		return &installer.Failure{Kind: installer.KindDeferred, Step: "fetch", Info: events.ErrorInfo{Message: ue.Error(), Fix: "the box keeps its state; the next run retries"}}
	}
	return err
}

// pullConverge converges this box to a verified inventory: host c.Host in local mode (any other
// host the inventory marks local is reached as usual), the token from the inventory or
// c.TokenFile, the same engine as `firstboot run` (localInstaller), taint drift repaired.
func (a *app) pullConverge(c *pull.Config, timeout, joinTimeout time.Duration) pull.Converger {
	return func(ctx context.Context, path string) (bool, error) {
		inv, err := inventory.Load(path, inventory.LoadOptions{})
		if err != nil {
			return false, err
		}
		h := inv.Host(c.Host)
		if h == nil {
			return false, usageError{fmt.Errorf("%s: no host %s in the inventory (this box, %s's host) — fix: set host: in %s to this box's inventory host, or add it to the inventory", c.SourceString(), c.Host, c.Path, c.Path)}
		}
		if l := inv.LocalHost(); l != nil && l.Name != h.Name {
			l.Connection = inventory.ConnectionSSH
		}
		h.Connection = inventory.ConnectionLocal
		if inv.Spec.K3s.Token == "" {
			tok, err := readToken(c.TokenFile)
			if err != nil {
				return false, usageError{fmt.Errorf("the cluster token: %v — fix: put it in %s (mode 0600; `firstboot seed` payloads carry it)", err, c.TokenFile)}
			}
			inv.Spec.K3s.Token = tok
		}
		collect := &firstboot.Collector{}
		// The repository is the truth: node taint and label drift is repaired, as `apply
		// --reconcile-taints` does (K3s's own taints are never removed).
		in, _, err := a.localInstaller(inv, h, c.StateDir, timeout, joinTimeout, collect, func(o *installer.Options) { o.ReconcileTaints = true })
		if err != nil {
			return false, err
		}
		if inv.IsFirstServer(h) {
			err = in.Apply(ctx)
		} else {
			err = in.JoinLocal(ctx)
		}
		var fs firstboot.Status
		if err != nil {
			fs.State = firstboot.StateFailed
		}
		collect.Fill(&fs)
		if err != nil && fs.Message != "" {
			err = &pull.ConvergeError{Step: fs.Step, Msg: fs.Message, Fix: fs.Fix, Err: err}
		}
		return fs.Changed, err
	}
}

// pullInstallCmd writes the service and timer and enables the timer; running it again with the
// same configuration changes nothing.
func (a *app) pullInstallCmd() *cobra.Command {
	var config, binary, root string
	var noStart bool
	cmd := &cobra.Command{
		Use:   "install [--config " + pull.ConfigPath + "]",
		Short: "On the box: write " + pull.ServiceName + " and " + pull.TimerName + " (every interval of the configuration) and enable the timer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadPullConfig(config)
			if err != nil {
				return err
			}
			if binary == "" {
				if binary, err = os.Executable(); err != nil {
					return fmt.Errorf("the k3strap binary the unit runs: %w (give it with --binary)", err)
				}
			}
			changed, err := pull.InstallUnits(root, binary, c)
			if err != nil {
				return err
			}
			what := "unchanged"
			if changed {
				what = "written"
			}
			fmt.Fprintf(a.stdout, "%s and %s %s in %s (every %s)\n", pull.ServiceName, pull.TimerName, what, root+pull.UnitDir, time.Duration(c.Interval))
			if noStart || root != "/" {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			steps := [][]string{{"systemctl", "enable", "--now", pull.TimerName}}
			if changed {
				steps = append([][]string{{"systemctl", "daemon-reload"}}, steps...)
			}
			for _, s := range steps {
				if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
					return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
				}
			}
			fmt.Fprintf(a.stdout, "%s enabled; the status is in %s/%s, the journal: journalctl -u %s\n", pull.TimerName, c.StateDir, pull.StatusName, pull.ServiceName)
			return nil
		},
	}
	cmd.Flags().StringVarP(&config, "config", "c", pull.ConfigPath, "the pull configuration (docs/edge-pull.md)")
	cmd.Flags().StringVar(&binary, "binary", "", "the k3strap binary the service runs (default: this one)")
	cmd.Flags().StringVar(&root, "root", "/", "write the units under this root (image builders); only / enables the timer")
	cmd.Flags().BoolVar(&noStart, "no-start", false, "write the units, do not reload systemd or enable the timer")
	return cmd
}

// pullStatusCmd prints status.json of the configuration's state directory.
func (a *app) pullStatusCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "status [--config " + pull.ConfigPath + "]",
		Short: "Print the last pull run's status line (-o json: status.json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadPullConfig(config)
			if err != nil {
				return err
			}
			st, err := pull.ReadStatus(c.StateDir)
			if err != nil {
				return err
			}
			if a.output == "json" {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
				return nil
			}
			if st.Result.State == "" {
				fmt.Fprintf(a.stdout, "k3strap pull: no run yet (%s/%s is absent)\n", c.StateDir, pull.StatusName)
				return nil
			}
			fmt.Fprintln(a.stdout, st.Line())
			return nil
		},
	}
	cmd.Flags().StringVarP(&config, "config", "c", pull.ConfigPath, "the pull configuration (docs/edge-pull.md)")
	return cmd
}
