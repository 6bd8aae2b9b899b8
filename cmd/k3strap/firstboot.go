// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/firstboot"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/pull"
)

// firstbootCmd groups zero-touch first boot (docs/edge-first-boot.md): `seed` on the
// workstation, `run` on the box (the systemd unit the seed installs runs it at every boot).
func (a *app) firstbootCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "firstboot",
		Short: "Zero-touch first boot: seeds that make edge boxes converge themselves in local mode at every boot",
	}
	cmd.AddCommand(a.firstbootSeedCmd(), a.firstbootRunCmd())
	return cmd
}

// firstbootSeedCmd writes, per host, a cloud-init NoCloud seed and the payload beside it.
// Exit 2 for a host not in the inventory, an invalid inventory or bundle (checksums).
func (a *app) firstbootSeedCmd() *cobra.Command {
	var out, binary, media, pullConfig string
	var hosts []string
	cmd := &cobra.Command{
		Use:   "seed -f FILE -O DIR [--host NAME]... [--pull-config FILE]",
		Short: "Write per host a cloud-init NoCloud seed (user-data, meta-data) and the k3strap payload (unit, inventory, token 0600, bundle)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("give the directory to write the seeds into with -O DIR")}
			}
			c, err := a.load()
			if err != nil {
				return err
			}
			in, err := a.readInput()
			if err != nil {
				return err
			}
			seeds, err := firstboot.Write(c, in.data, os.Getenv(envPrefixToken), firstboot.SeedOptions{
				Out: out, Hosts: hosts, Binary: binary, BundleOnMedia: media, PullConfig: pullConfig,
			})
			var se firstboot.SeedError
			var ce *pull.ConfigError
			if errors.As(err, &se) || errors.As(err, &ce) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			for _, s := range seeds {
				fmt.Fprintf(a.stdout, "%s: %s (instance-id %s)\n", s.Host, s.Dir, s.InstanceID)
			}
			fmt.Fprintf(a.stdout, "Put each host's directory on its box: as the NoCloud seed (/var/lib/cloud/seed/nocloud/, or a volume labelled cidata), or without cloud-init run `sh %s/install.sh` from it. The token is in %s/token (0600): keep the seeds as secret as the token.\n", firstboot.PayloadDir, firstboot.PayloadDir)
			if pullConfig != "" {
				fmt.Fprintf(a.stdout, "Each seed carries %s and the files it names: its box installs them in %s and enables %s (docs/edge-pull.md).\n", pullConfig, filepath.Dir(pull.ConfigPath), pull.TimerName)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output-dir", "O", "", "directory to write the seeds into (one subdirectory per host)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "write seeds for these hosts only (repeatable; default: every host)")
	cmd.Flags().StringVar(&binary, "binary", "", "the k3strap binary for the boxes (their architecture; default: this one)")
	cmd.Flags().StringVar(&media, "bundle-on-media", "", "the airgap bundle's absolute path on the box (removable media) instead of a copy in every seed")
	cmd.Flags().StringVar(&pullConfig, "pull-config", "", "a pull configuration (docs/edge-pull.md) whose files are on this machine: every seed carries it, and the box pulls its desired state from Git or HTTPS from its first boot on")
	return cmd
}

// envPrefixToken is the variable the token may come from (the inventory's override).
const envPrefixToken = EnvPrefix + "_K3S_TOKEN"

// firstbootRunCmd converges the box it runs on: the first server applies to itself, any other
// host waits for the cluster's API and joins. The outcome goes to the status file, the login
// and console lines, and (as every line of the run) the journal.
func (a *app) firstbootRunCmd() *cobra.Command {
	var dir string
	var banner bool
	var timeout, joinTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run [--dir /var/lib/k3strap]",
		Short: "On the box (the first-boot unit runs it at every boot): converge this host in local mode, status where a technician looks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.firstbootRun(cmd, firstboot.Reporter{Dir: dir, NoBanner: !banner}, timeout, joinTimeout)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", firstboot.BoxDir, "the payload directory install.sh wrote")
	cmd.Flags().BoolVar(&banner, "banner", true, "write the outcome's line for the login ("+firstboot.MotdPath+") and the console ("+firstboot.IssuePath+")")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "bring-up timeout of this box's K3s")
	cmd.Flags().DurationVar(&joinTimeout, "join-timeout", installer.DefaultJoinTimeout, "how long a joining box waits for the cluster's API")
	return cmd
}

func (a *app) firstbootRun(cmd *cobra.Command, rep firstboot.Reporter, timeout, joinTimeout time.Duration) error {
	dir := rep.Dir
	st := firstboot.Status{State: firstboot.StateRunning, Started: time.Now().UTC().Truncate(time.Second)}
	fail := func(step string, err error, fix string) error {
		code, meaning := exitSummary(err)
		st.State, st.Step, st.Message, st.Fix, st.ExitCode, st.ExitMeaning = firstboot.StateFailed, step, err.Error(), fix, code, meaning
		if werr := rep.Write(st); werr != nil {
			fmt.Fprintf(a.stderr, "k3strap: writing the status: %v\n", werr)
		}
		fmt.Fprintln(a.stdout, st.Line())
		return err
	}
	var info firstboot.Info
	b, err := os.ReadFile(filepath.Join(dir, firstboot.SeedInfoName))
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		return fail("seed", usageError{fmt.Errorf("%s: %v", filepath.Join(dir, firstboot.SeedInfoName), err)},
			"write the seed again with `k3strap firstboot seed` and put it on the box")
	}
	st.Cluster, st.Host = info.Cluster, info.Host
	_ = rep.Write(st)
	if err := firstboot.CheckSeedClock(time.Now(), info); err != nil {
		var ce *firstboot.ClockError
		errors.As(err, &ce)
		return fail("clock", &installer.Failure{Kind: installer.KindPreflight, Step: "clock", Host: info.Host, Info: events.ErrorInfo{Message: ce.Msg, Fix: ce.Fix}}, ce.Fix)
	}
	if info.BundleSHA256 != "" {
		if err := checkBundle(info); err != nil {
			return fail("bundle", usageError{err}, "put the bundle the seed was written for at "+info.BundlePath+" (compare its sha256sum with seed.json's bundleSHA256), or write the seed again for this bundle")
		}
	}
	inv := filepath.Join(dir, firstboot.InventoryName)
	c, err := inventory.Load(inv, inventory.LoadOptions{})
	if err != nil {
		return fail("inventory", err, "write the seed again with `k3strap firstboot seed` from a valid inventory (`k3strap validate`)")
	}
	tok, err := readToken(filepath.Join(dir, firstboot.TokenName))
	if err != nil {
		return fail("token", usageError{err}, "write the seed again with `k3strap firstboot seed`: it carries the token in k3strap/token (0600)")
	}
	c.Spec.K3s.Token = tok
	h := c.LocalHost()
	if h == nil || h.Name != info.Host {
		return fail("inventory", usageError{fmt.Errorf("%s: no host %s with connection: local", inv, info.Host)}, "write the seed again with `k3strap firstboot seed --host "+info.Host+"`")
	}
	collect := &firstboot.Collector{}
	in, step, err := a.localInstaller(c, h, dir, timeout, joinTimeout, collect)
	if err != nil {
		return fail(step, err, "")
	}
	fmt.Fprintf(a.stdout, "k3strap first boot: host %s of cluster %s (%s), local mode\n", h.Name, c.Metadata.Name, h.Role)
	if c.IsFirstServer(h) {
		err = in.Apply(cmd.Context())
	} else {
		st.State, st.Message = firstboot.StateWaiting, "waiting for the cluster's API at "+c.RegistrationURL()
		_ = rep.Write(st)
		err = in.JoinLocal(cmd.Context())
	}
	code, meaning := exitSummary(err)
	st.ExitCode, st.ExitMeaning, st.Message = code, meaning, ""
	st.State = firstboot.StateConverged
	if err != nil {
		st.State = firstboot.StateFailed
	}
	collect.Fill(&st)
	if st.State == firstboot.StateFailed && st.Message == "" {
		st.Message = err.Error()
	}
	if werr := rep.Write(st); werr != nil {
		fmt.Fprintf(a.stderr, "k3strap: writing the status: %v\n", werr)
	}
	fmt.Fprintln(a.stdout, st.Line())
	return err
}

// localInstaller is the engine for host h of c on this box in local mode, the one way `firstboot
// run` and `pull run` converge a box: this host only, the kubeconfig written into dir, every
// event through collect (which keeps what the status needs) to the output sink. On error it
// returns the step that failed ("options", "output"). mods adjust the options (pull mode
// repairs taint drift).
func (a *app) localInstaller(c *inventory.Cluster, h *inventory.Host, dir string, timeout, joinTimeout time.Duration, collect *firstboot.Collector, mods ...func(*installer.Options)) (*installer.Installer, string, error) {
	opts, err := a.installerOptions(c, &runFlags{timeout: timeout, hosts: []string{h.Name}, concurrency: 1, keepalive: 10 * time.Second,
		kubeconfigOut: filepath.Join(dir, "kubeconfig"), stallGrace: k3s.StallGrace})
	if err != nil {
		return nil, "options", err
	}
	opts.JoinTimeout = joinTimeout
	for _, m := range mods {
		m(&opts)
	}
	sink, err := a.sink()
	if err != nil {
		return nil, "output", err
	}
	collect.Next = sink
	return installer.New(c, opts, collect), "", nil
}

// checkBundle checks that the bundle seed.json names is there with the sha256 recorded.
func checkBundle(info firstboot.Info) error {
	f, err := os.Open(info.BundlePath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the airgap bundle is not at %s (removable media not inserted or not mounted?)", info.BundlePath)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading the airgap bundle %s: %w", info.BundlePath, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != info.BundleSHA256 {
		return fmt.Errorf("the airgap bundle %s has sha256 %s, not %s as the seed says: it is damaged or another bundle", info.BundlePath, got, info.BundleSHA256)
	}
	return nil
}

// readToken reads the token file (its first line); a file readable by others is refused.
func readToken(p string) (inventory.Secret, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %04o): the token is a secret", p, fi.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("%s is empty", p)
	}
	return inventory.Secret(tok), nil
}
