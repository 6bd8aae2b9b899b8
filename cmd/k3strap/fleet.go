// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/frontend/tui"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// Fleet rollouts (docs/fleet.md): apply, upgrade, preflight, check, doctor and validate take a
// fleet file (kind: Fleet) as well as an inventory, and `k3strap fleet status` reports on a
// fleet. The per-cluster commands stay as they are: fleetAware wraps them.

// fleetFlags are the flags a command gains for fleets.
type fleetFlags struct {
	shard  string
	state  string
	rerun  bool
	sites  []string
	yes    *bool
	ownYes bool
}

// fleetCommands makes apply, upgrade, preflight, check, doctor and validate take a fleet file
// and adds `k3strap fleet`.
func (a *app) fleetCommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "apply", "upgrade", "preflight", "check", "doctor", "validate":
			a.fleetAware(c)
		}
	}
	root.AddCommand(a.fleetCmd())
}

// changesSites says whether a command changes the sites (the rollout policy applies).
func changesSites(name string) bool { return name == "apply" || name == "upgrade" }

// fleetAware adds the fleet flags to cmd and runs it over a fleet when -f names a fleet file;
// an inventory runs the command as before.
func (a *app) fleetAware(cmd *cobra.Command) {
	ff := &fleetFlags{}
	f := cmd.Flags()
	if cmd.Name() != "validate" {
		f.StringVar(&ff.shard, "shard", "", "fleets: run only part I of N of the sites (I/N; split by a hash of the site name, docs/fleet.md)")
		f.StringVar(&ff.state, "state", "", "fleets: the state file (default next to the fleet file: FLEET.state.json, FLEET.shard-I-of-N.state.json)")
		f.StringSliceVar(&ff.sites, "site", nil, "fleets: only these sites (repeatable)")
	}
	if changesSites(cmd.Name()) {
		f.BoolVar(&ff.rerun, "rerun", false, "fleets: run done sites again although their inventory did not change (default: check them)")
	}
	if y := f.Lookup("yes"); y == nil && changesSites(cmd.Name()) {
		ff.ownYes = true
		ff.yes = f.BoolP("yes", "y", false, "fleets: do not ask before each wave when rollout.pause is set (for scripts)")
	}
	orig := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// The input is read once (a FIFO or stdin cannot be read twice); a fleet file runs
		// the fleet, anything else goes to the command, which loads the same bytes.
		if p, _ := a.inputPath(); p != "" {
			in, err := a.readInput()
			if err != nil {
				return err
			}
			if fleet.IsFleet(in.data) {
				return a.runFleet(c, in, ff)
			}
		}
		for _, n := range []string{"shard", "state", "site", "rerun"} {
			if fl := f.Lookup(n); fl != nil && fl.Changed {
				return usageError{fmt.Errorf("--%s is for fleets: give -f a fleet file (kind: %s)", n, fleet.Kind)}
			}
		}
		return orig(c, args)
	}
	long := cmd.Long
	if long == "" {
		long = cmd.Short + "."
	}
	cmd.Long = long + "\n\nWith a fleet file (kind: " + fleet.Kind + ") it runs on every site of the fleet" + map[bool]string{
		true:  " under the rollout policy: a canary, then waves, stopping on failure; progress is kept in a state file so that a re-run continues (done sites are checked, not run again).",
		false: ", rollout.concurrency sites at once; the outcome is kept in the fleet's state file (`k3strap fleet status`).",
	}[changesSites(cmd.Name())] + " See docs/fleet.md."
}

// perClusterOnly returns the flags that name one cluster's hosts or output, refused with a
// fleet, each with what to do instead.
func perClusterOnly() map[string]string {
	return map[string]string{
		"host":              "hosts are per site: give --site to choose sites",
		"api-address":       "each site's API address is its own: set spec.k3s.apiEndpoint in the site inventory",
		"ask-sudo-password": "a fleet runs unattended: use ssh.sudoPasswordEnv or ssh.sudoPasswordFile (spec.defaults.ssh in the fleet file)",
		"ssh":               "doctor --ssh needs no inventory; a fleet names its sites' inventories",
		"fix":               "repairs are per cluster: run `k3strap doctor --fix -f SITE.yaml` on the site",
		"bundle":            "support bundles are per cluster: run `k3strap doctor --bundle FILE -f SITE.yaml` on the site",
		"watch":             "--watch follows one cluster's upgrade: run it with the site's inventory",
		// A site with changes pending would count as a failed site (and could stop the rollout).
		"detailed-exitcode": "pending changes are per cluster: run `k3strap apply --dry-run --detailed-exitcode -f SITE.yaml` on each site",
	}
}

// runFleet runs cmd over the fleet file in (already read).
func (a *app) runFleet(cmd *cobra.Command, in *input, ff *fleetFlags) error {
	name := cmd.Name()
	var bad error
	refused := perClusterOnly()
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if why, ok := refused[fl.Name]; ok && bad == nil {
			bad = usageError{fmt.Errorf("--%s does not go with a fleet file: %s", fl.Name, why)}
		}
	})
	if bad != nil {
		return bad
	}
	f, err := a.parseFleet(in, fleet.LoadOptions{Override: overrideLayer(a.v)})
	if err != nil {
		return err
	}
	if name == "validate" {
		return a.validateFleet(cmd, f)
	}
	sel := fleet.Selection{Names: ff.sites}
	if ff.shard != "" {
		if sel.Shard, err = fleet.ParseShard(ff.shard); err != nil {
			return usageError{err}
		}
	}
	rf, err := runFlagsOf(cmd)
	if err != nil {
		return err
	}
	dryRun := rf.dryRun
	if rf.kubeconfigOut != "" {
		if st, err := os.Stat(rf.kubeconfigOut); err != nil || !st.IsDir() {
			return usageError{fmt.Errorf("--kubeconfig-out with a fleet names a directory (each site's kubeconfig is DIR/<site>.kubeconfig): %s is not one", rf.kubeconfigOut)}
		}
	}
	opts := fleet.RunOptions{
		Command:   name,
		Changes:   changesSites(name) && !dryRun,
		Record:    !dryRun,
		Rerun:     ff.rerun,
		StatePath: ff.state,
		Run:       a.siteRunner(cmd, rf),
		Exit:      exitSummary,
	}
	if opts.Changes && f.Spec.Rollout.Pause && !(ff.yes != nil && *ff.yes) {
		opts.Confirm = a.confirmWave
		if _, _, ok := a.terminalSize(); !ok {
			return usageError{errors.New("rollout.pause asks before each wave, and stdin is not a terminal: pass --yes to roll out without asking")}
		}
	}
	plan, err := f.Plan(sel, opts.Changes)
	if err != nil {
		return usageError{err}
	}
	a.fleetView = a.fleetDashboard(f, plan, &opts)
	sink, err := a.sink()
	if err != nil {
		return err
	}
	opts.Sink = sink
	return fleet.Run(cmd.Context(), f, plan, opts)
}

// parseFleet loads the fleet file in (read once). A fleet read from stdin is refused: its
// site paths and its state file are found next to the fleet file, which stdin has not.
func (a *app) parseFleet(in *input, opts fleet.LoadOptions) (*fleet.Fleet, error) {
	if in.path == stdinPath {
		return nil, usageError{fmt.Errorf("%s holds a fleet file: a fleet's site inventories and state file are found next to the fleet file — fix: give its path, -f FLEET.yaml", in.source)}
	}
	return fleet.Parse(in.source, in.data, opts)
}

// confirmWave asks on the terminal before a wave (rollout.pause). Ctrl-C while it waits for
// the answer cancels the run (the read of the answer is left behind; the process ends).
func (a *app) confirmWave(ctx context.Context, next fleet.Wave, of int) (bool, error) {
	type answer struct {
		yes bool
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		yes, err := a.confirm(fmt.Sprintf("start wave %d of %d (%s)?", next.Number, of, strings.Join(next.Names(), ", ")))
		ch <- answer{yes, err}
	}()
	select {
	case ans := <-ch:
		return ans.yes, ans.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// runFlagsOf returns the run flags cmd was given: a runFlags registered on a scratch command
// takes the value of every flag set on cmd (the command's own runFlags live in its closure).
func runFlagsOf(cmd *cobra.Command) (*runFlags, error) {
	rf := &runFlags{}
	scratch := &cobra.Command{}
	rf.register(scratch, cmd.Flags().Lookup("kubeconfig-out") != nil)
	var err error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		to := scratch.Flags().Lookup(fl.Name)
		if to == nil || err != nil {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			err = to.Value.(pflag.SliceValue).Replace(sv.GetSlice())
		} else {
			err = to.Value.Set(fl.Value.String())
		}
	})
	return rf, err
}

// siteRunner runs a command on one site with the per-cluster engine, as the command does for
// one inventory.
func (a *app) siteRunner(cmd *cobra.Command, rf *runFlags) fleet.SiteRunner {
	fl := cmd.Flags()
	prune, _ := fl.GetBool("prune")
	reconcile, _ := fl.GetBool("reconcile-taints")
	via, _ := fl.GetString("via")
	grace, _ := fl.GetDuration("stall-grace")
	return func(ctx context.Context, s *fleet.Site, command string, sink events.Sink, obs fleet.Observer) error {
		opts, err := a.installerOptions(s.Cluster, rf)
		if err != nil {
			return err
		}
		opts.ReconcileTaints, opts.Prune, opts.NodesListed, opts.HostContact = reconcile, prune, obs.Nodes, obs.HostContact
		if rf.kubeconfigOut != "" {
			opts.KubeconfigOut = filepath.Join(rf.kubeconfigOut, s.Name+".kubeconfig")
		}
		in := installer.New(s.Cluster, opts, sink)
		switch command {
		case "apply":
			return in.Apply(ctx)
		case "upgrade":
			v := via
			if v == "" {
				v = string(s.Cluster.UpgradeVia())
			}
			if v == string(inventory.UpgradeViaSUC) {
				return in.UpgradeSUC(ctx)
			}
			return in.Upgrade(ctx)
		case "preflight":
			_, err := in.Preflight(ctx)
			return err
		case "check":
			return in.Check(ctx)
		case "doctor":
			_, err := in.Doctor(ctx, installer.DoctorRequest{TaintGrace: grace})
			return err
		}
		return usageError{fmt.Errorf("%s does not run on a fleet", command)}
	}
}

// validateFleet is `k3strap validate -f FLEET`: every site inventory is valid (Load checked
// it) and passes the static preflight checks; then the rollout's waves are shown.
func (a *app) validateFleet(cmd *cobra.Command, f *fleet.Fleet) error {
	ignore, _ := cmd.Flags().GetStringSlice("ignore-preflight-errors")
	ign, err := preflight.ParseIgnore(ignore)
	if err != nil {
		return usageError{fmt.Errorf("--ignore-preflight-errors: %w", err)}
	}
	var failed []string
	for _, s := range f.Sites {
		rep := preflight.RunStatic(&preflight.Input{Cluster: s.Cluster, BinaryReleases: preflight.ReadBinaryReleases(s.Cluster)}, ign)
		printFindings(a.stdout, rep.Findings)
		if len(rep.Errors()) > 0 {
			failed = append(failed, s.Name)
		}
	}
	if len(failed) > 0 {
		return usageError{fmt.Errorf("%s: preflight errors found without connecting in site(s) %s; fix them as each fix says, or pass --ignore-preflight-errors", f.Source, strings.Join(failed, ", "))}
	}
	waves := f.PlanWaves(f.Sites, true)
	fmt.Fprintf(a.stdout, "%s: valid — fleet %s, %d sites; apply rolls out in %d wave(s):\n", f.Source, f.Metadata.Name, len(f.Sites), len(waves))
	for _, w := range waves {
		label := ""
		if w.Canary {
			label = " (canary)"
		}
		fmt.Fprintf(a.stdout, "  wave %d%s: %s\n", w.Number, label, strings.Join(w.Names(), ", "))
	}
	return nil
}

// fleetCmd is `k3strap fleet`: reports on a fleet.
func (a *app) fleetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Report on a fleet of sites (apply, upgrade, preflight, check and doctor take a fleet file with -f)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(a.fleetStatusCmd())
	return c
}

// fleetStatusCmd is `k3strap fleet status`: the state files' view of every site.
func (a *app) fleetStatusCmd() *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:   "status -f FLEET [--state FILE ...]",
		Short: "Print per site the rollout's last result, version and nodes Ready as last seen, doctor's verdict, and the totals",
		Long: "status reads the fleet's state files — by default the one next to the fleet file and every shard's\n" +
			"(FLEET.state.json, FLEET.shard-I-of-N.state.json), or those given with --state — and merges them: per site the\n" +
			"newest record of each command wins. It connects to no host: versions and nodes Ready are as the last apply or\n" +
			"check saw them (`k3strap check -f FLEET` refreshes them). --output json prints the report as one JSON object.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f *fleet.Fleet
			if p, _ := a.inputPath(); p != "" {
				in, err := a.readInput()
				if err != nil {
					return err
				}
				if !fleet.IsFleet(in.data) {
					return usageError{fmt.Errorf("%s is not a fleet file (kind: %s) — fix: give `fleet status` the fleet file with -f; for one cluster run `k3strap check -f %s`", in.source, fleet.Kind, in.path)}
				}
				if f, err = a.parseFleet(in, fleet.LoadOptions{Override: overrideLayer(a.v), SkipFileChecks: true}); err != nil {
					return err
				}
				if len(states) == 0 {
					states = fleet.StatePaths(in.path)
				}
			}
			if f == nil && len(states) == 0 {
				return usageError{errors.New("give the fleet file with -f (its state files are found next to it), or state files with --state")}
			}
			read := map[string]*fleet.State{}
			for _, p := range states {
				st, err := fleet.ReadState(p)
				if err != nil {
					if errors.As(err, new(*fleet.StateError)) {
						return err // names the file and the fix; exit 2 (exitcodes.go)
					}
					return usageError{fmt.Errorf("--state %s: %w", p, err)}
				}
				read[p] = st
			}
			if err := fleet.CheckStates(f, read); err != nil {
				return err
			}
			rep := fleet.Status(f, read, fleet.Held)
			if a.output == "json" {
				return json.NewEncoder(a.stdout).Encode(rep)
			}
			// Messages in state files came from hosts: terminal-safe, as every text shown.
			var buf bytes.Buffer
			if err := rep.WriteText(&buf, time.Now()); err != nil {
				return err
			}
			_, err := io.WriteString(a.stdout, frontend.StripControl(buf.String()))
			return err
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "state files to merge (repeatable; default: the fleet file's and its shards')")
	return cmd
}

// fleetDashboard returns the fleet's terminal view for --output auto (ui.go's autoSink calls
// it when the dashboard fits the terminal): the waves of plan, q/ctrl+c cancelling the run, and
// the questions of rollout.pause asked on it.
func (a *app) fleetDashboard(f *fleet.Fleet, plan fleet.Plan, opts *fleet.RunOptions) func(plain events.Sink) events.Sink {
	return func(plain events.Sink) events.Sink {
		fo := tui.FleetOptions{Fleet: f.Metadata.Name, Command: opts.Command, Verbose: a.verbose, Cancel: a.cancel, Fallback: plain}
		for _, w := range plan.Waves {
			fo.Waves = append(fo.Waves, tui.FleetWave{Number: w.Number, Canary: w.Canary, Sites: w.Names()})
		}
		s := tui.StartFleet(a.terminal(), fo)
		if opts.Confirm != nil {
			opts.Confirm = func(ctx context.Context, next fleet.Wave, of int) (bool, error) {
				return s.Ask(ctx, fmt.Sprintf("start wave %d of %d (%d %s)?", next.Number, of, len(next.Sites), map[bool]string{true: "site", false: "sites"}[len(next.Sites) == 1]))
			}
		}
		a.closers = append(a.closers, func() {
			if err := s.Finish(nil); err != nil {
				fmt.Fprintln(a.stderr, "terminal UI:", err, "(use --output plain)")
			}
		})
		return s
	}
}
