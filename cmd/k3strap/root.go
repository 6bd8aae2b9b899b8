// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"golang.org/x/term"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet"
	"github.com/k3strap/k3strap/frontend"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/preflight"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// app is one invocation: streams, settings and the chosen front-end.
type app struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	v              *viper.Viper

	file    string
	output  string
	quiet   bool
	verbose bool
	logFile string

	// in is the -f input, read once (input.go).
	in *input
	// command is the command that runs ("render", "fleet status"), for messages.
	command string
	// loaded is the inventory the command loaded (load reads the file once per run); loadErr
	// its error.
	loaded  *inventory.Cluster
	loadErr error

	// fleetView, set by a fleet run, makes --output auto show the fleet's dashboard instead of
	// the cluster's (fleet.go); plain is the sink it falls back to.
	fleetView func(plain events.Sink) events.Sink

	closers []func()
	// cancel cancels the context of the command that runs (the terminal UI's q key).
	cancel context.CancelFunc
}

// run executes k3strap with args and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, v: NewViper(), cancel: cancel}
	defer a.close()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	a.close() // front-ends finish (the terminal UI draws its last frame) before errors print
	if err == nil {
		return 0
	}
	code := exitCode(err)
	var f *installer.Failure
	var il inventory.ErrorList
	switch {
	case errors.As(err, &il):
		fmt.Fprintln(stderr, "error: the inventory is not valid:")
		printErrorList(stderr, il, maxPrintedErrors)
		return code
	case errors.As(err, &f):
		// Already reported through events.
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "error:", frontend.StripControl(err.Error()))
		return code
	default:
		fmt.Fprintln(stderr, "error:", frontend.StripControl(err.Error()))
	}
	return code
}

type usageError struct{ error }

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "k3strap",
		Short: "Bootstrap K3s clusters (and Rancher) over SSH from one inventory file",
		Long: "k3strap takes Linux hosts reachable over SSH to a working K3s cluster, refusing up front the\n" +
			"configurations known to break and watching the first server until its network really exists.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentBuild().Version, // version.go: -X main.version, else the toolchain's stamp
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.command = strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
		warnEnv(a.stderr, os.Environ())                    // env.go: deprecated and unknown K3STRAP_* names
		if err := checkOutput(cmd, a.output); err != nil { // output.go
			return err
		}
		return checkFlagRanges(cmd) // flags.go
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&a.file, "file", "f", "", "inventory file (env K3STRAP_FILE)")
	pf.StringVarP(&a.output, "output", "o", "auto", "output: auto (terminal UI on a terminal, plain otherwise), plain, json")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "only warnings, errors and the summary")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "also show remote command lines (secrets masked)")
	pf.StringVar(&a.logFile, "log-file", "", "also write every event as a plain line (verbose) to this file")
	for _, o := range OverrideKeys() {
		if o.Secret {
			continue // secrets come from the environment only, never a command line
		}
		name := flagName(o.Key)
		pf.String(name, "", o.Usage+" (env "+o.Env+")")
		_ = a.v.BindPFlag(o.Key, pf.Lookup(name))
	}
	// One file per command: validate.go, preflight.go, render.go, apply.go, upgrade.go, ...
	root.AddCommand(a.validateCmd(), a.preflightCmd(), a.renderCmd(), a.applyCmd(), a.upgradeCmd(), a.resetCmd(), a.kubeconfigCmd(), a.checkCmd(), a.doctorCmd(), a.versionCmd(), a.initCmd(), a.stepsCmd(),
		a.backupCmd(), a.restoreCmd(), a.removeNodeCmd(), a.rotateCmd(), a.bundleCmd(), a.firstbootCmd())
	root.AddCommand(a.schemaCmd(), a.manCmd(), a.timelineCmd())
	a.fleetCommands(root) // fleet.go: fleet files, `k3strap fleet`
	// cobra adds help and completion when it runs; added now, they get examples, man pages,
	// and -o checking like every command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	groupsRun(root)
	usageArgs(root)
	describeSteps(root)
	setExamples(root)           // examples.go
	a.registerCompletions(root) // completion.go
	return root
}

// groupsRun makes each command under c that only groups others (k3strap, rotate, fleet,
// completion) runnable: it prints its help, after the root's checks (so `k3strap rotate -o
// bogus` is refused with exit 2 like every command), and refuses arguments that name no
// subcommand.
func groupsRun(c *cobra.Command) {
	if !c.Runnable() && c.HasSubCommands() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		c.Args = unknownSubcommand // cobra.NoArgs with the names close to a mistyped one
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's own default for its suggestions
		}
	}
	for _, sub := range c.Commands() {
		groupsRun(sub)
	}
}

// unknownSubcommand refuses the arguments of a command that only groups others, as cobra does
// for one that cannot run: the unknown name and the subcommands close to it.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		msg += " — did you mean " + strings.Join(near, " or ") + "?"
	}
	return errors.New(msg)
}

// usageArgs makes a wrong number of arguments, on every command under c, a usage error (exit
// 2) like a bad flag.
func usageArgs(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// flagName turns an override key ("ssh.keyPath") into a flag name ("ssh-key-path").
func flagName(key string) string {
	var b strings.Builder
	for i, r := range key {
		switch {
		case r == '.':
			b.WriteByte('-')
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r + ('a' - 'A'))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// load reads and validates the inventory named by -f or K3STRAP_FILE.
func (a *app) load() (*inventory.Cluster, error) {
	if a.loaded != nil || a.loadErr != nil {
		return a.loaded, a.loadErr
	}
	a.loaded, a.loadErr = a.loadFile()
	return a.loaded, a.loadErr
}

// loadFile reads (readInput: once, cancellable; "-" is stdin) and validates the inventory
// named by -f (or $K3STRAP_FILE). A fleet file reaching a command that works on one cluster
// is refused with what to give instead.
func (a *app) loadFile() (*inventory.Cluster, error) {
	in, err := a.readInput()
	if err != nil {
		return nil, err
	}
	if fleet.IsFleet(in.data) {
		return nil, usageError{fmt.Errorf("%s is a fleet file (kind: %s); `%s` works on one cluster — fix: pass a site's inventory (kind: %s), e.g. -f sites/SITE.yaml; apply, upgrade, preflight, check, doctor and validate take a fleet file",
			in.source, fleet.Kind, a.commandName(), inventory.Kind)}
	}
	return inventory.Parse(in.source, in.data, inventory.LoadOptions{Override: overrideLayer(a.v)})
}

// commandName is the command that runs, for messages ("this command" before it is known).
func (a *app) commandName() string {
	if a.command == "" {
		return "this command"
	}
	return a.command
}

// sink builds the front-end for a run: plain lines, JSON lines, plus --log-file.
func (a *app) sink() (events.Sink, error) {
	var sinks []events.Sink
	switch a.output {
	case "json":
		sinks = append(sinks, &frontend.JSON{W: a.stdout, Verbose: a.verbose, Quiet: a.quiet})
	case "auto":
		sinks = append(sinks, a.autoSink()) // ui.go
	case "plain":
		sinks = append(sinks, &frontend.Plain{W: a.stdout, Verbose: a.verbose, Quiet: a.quiet, Terminal: isTerminal(a.stdout)})
	default:
		return nil, usageError{fmt.Errorf("--output %q: want auto, plain or json", a.output)}
	}
	if a.logFile != "" {
		f, err := os.OpenFile(a.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, usageError{fmt.Errorf("--log-file: %w", err)}
		}
		// The log holds every remote command: 0600 even when the file existed with another mode.
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Mode().Perm() != 0o600 {
			if err := f.Chmod(0o600); err != nil {
				_ = f.Close()
				return nil, usageError{fmt.Errorf("--log-file: making %s private (0600): %w", a.logFile, err)}
			}
		}
		a.closers = append(a.closers, func() { _ = f.Close() })
		sinks = append(sinks, &frontend.Plain{W: f, Verbose: true})
	}
	return events.Tee(sinks...), nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// runFlags are the flags of commands that connect to hosts.
type runFlags struct {
	dryRun            bool
	detailedExitCode  bool
	concurrentUploads int
	keepalive         time.Duration
	noDrain           bool
	force             bool
	upgradeBatch      int
	sshConfig         string
	ignore            []string
	insecure          bool
	kubeconfigOut     string
	apiAddress        string
	stallGrace        time.Duration
	timeout           time.Duration
	concurrency       int
	hosts             []string
	askSudo           bool
	pollInterval      time.Duration
	hostTranscripts   string
	local             bool
}

func (rf *runFlags) register(cmd *cobra.Command, apply bool) {
	f := cmd.Flags()
	f.DurationVar(&rf.keepalive, "ssh-keepalive", remote.DefaultKeepaliveInterval, "SSH keepalive period; a link is declared dead after 3 unanswered")
	f.StringVar(&rf.sshConfig, "ssh-config", "", "OpenSSH client config consulted for what the inventory leaves unset (default ~/.ssh/config; none to skip)")
	f.StringSliceVar(&rf.ignore, "ignore-preflight-errors", nil, "preflight checks whose errors become warnings: ID,ID,... or all")
	f.BoolVar(&rf.insecure, "insecure-ignore-host-key", false, "do not verify SSH host keys (dangerous; prints a warning per host)")
	f.IntVar(&rf.concurrency, "concurrency", installer.DefaultConcurrency, "hosts worked on at once")
	f.StringSliceVar(&rf.hosts, "host", nil, "limit to these hosts (repeatable)")
	f.BoolVar(&rf.askSudo, "ask-sudo-password", false, "ask once for the sudo password on the terminal")
	// For contributors (docs/development.md, "Host transcripts"): hidden from help.
	f.StringVar(&rf.hostTranscripts, "record-host-transcripts", "", "directory to record every host's exchanges to, secrets masked (replay tests)")
	_ = f.MarkHidden("record-host-transcripts")
	f.BoolVar(&rf.local, "local", false, "local mode: run on the host itself, without SSH (the host --host names, else the one named as this machine); the run works on that host only")
	if apply {
		f.StringVar(&rf.kubeconfigOut, "kubeconfig-out", "", "where to write the kubeconfig (default ./<cluster name>.kubeconfig)")
		f.StringVar(&rf.apiAddress, "api-address", "", "address clients use for the API server (default: the first server's address)")
		f.DurationVar(&rf.stallGrace, "stall-grace", k3s.StallGrace, "how long the uninitialized taint may stay before the stall is diagnosed")
		f.DurationVar(&rf.timeout, "timeout", installer.DefaultTimeout, "how long each bring-up wait may last, counted from its own start: the first server from its (re)start, each joining node, the CNI rollout")
		f.DurationVar(&rf.pollInterval, "poll-interval", installer.DefaultPollInterval, "how often the bring-up supervisor looks")
		f.BoolVar(&rf.dryRun, "dry-run", false, "connect, gather facts, run preflight and show what would change (diffs included); change nothing")
		f.BoolVar(&rf.detailedExitCode, "detailed-exitcode", false, "with --dry-run: exit 9 when changes are pending, 0 when there is nothing to do (terraform's -detailed-exitcode)")
		f.IntVar(&rf.concurrentUploads, "concurrent-uploads", installer.DefaultConcurrentUploads, "large uploads (binary, images) in flight at once across hosts")
		f.BoolVar(&rf.noDrain, "no-drain", false, "do not drain nodes before upgrading them")
		f.BoolVar(&rf.force, "force", false, "allow a K3s downgrade (turns the ExistingInstall check's downgrade error into a warning)")
		f.IntVar(&rf.upgradeBatch, "upgrade-batch", installer.DefaultUpgradeBatchPercent, "percentage of agents upgraded at once (at least one)")
	}
}

// installerFor builds the installer for c with the command's run flags (tweak adjusts the
// options a command adds) and the chosen front-end.
func (a *app) installerFor(c *inventory.Cluster, rf *runFlags, tweak func(*installer.Options)) (*installer.Installer, error) {
	opts, err := a.installerOptions(c, rf)
	if err != nil {
		return nil, err
	}
	if tweak != nil {
		tweak(&opts)
	}
	sink, err := a.sink()
	if err != nil {
		return nil, err
	}
	return installer.New(c, opts, sink), nil
}

// loadInstaller loads the inventory and builds its installer (installerFor).
func (a *app) loadInstaller(rf *runFlags, tweak func(*installer.Options)) (*installer.Installer, error) {
	c, err := a.load()
	if err != nil {
		return nil, err
	}
	return a.installerFor(c, rf, tweak)
}

func (a *app) installerOptions(c *inventory.Cluster, rf *runFlags) (installer.Options, error) {
	ignore := rf.ignore
	if rf.force && !slices.ContainsFunc(ignore, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "all") }) {
		ignore = append(append([]string(nil), ignore...), "ExistingInstall")
	}
	ign, err := preflight.ParseIgnore(ignore)
	if err != nil {
		return installer.Options{}, usageError{fmt.Errorf("--ignore-preflight-errors: %w", err)}
	}
	if rf.detailedExitCode && !rf.dryRun {
		return installer.Options{}, usageError{errors.New("--detailed-exitcode reports a dry-run's pending changes — fix: add --dry-run")}
	}
	pw, err := a.sudoPassword(c, rf.askSudo)
	if err != nil {
		return installer.Options{}, err
	}
	hosts, err := a.localMode(c, rf)
	if err != nil {
		return installer.Options{}, err
	}
	return installer.Options{
		Exit:                  exitSummary,
		IgnorePreflight:       ign,
		InsecureIgnoreHostKey: rf.insecure,
		KubeconfigOut:         rf.kubeconfigOut,
		APIAddress:            rf.apiAddress,
		StallGrace:            rf.stallGrace,
		Timeout:               rf.timeout,
		PollInterval:          rf.pollInterval,
		Concurrency:           rf.concurrency,
		SudoPassword:          pw,
		Hosts:                 hosts,
		DryRun:                rf.dryRun,
		DetailedExitCode:      rf.detailedExitCode,
		ConcurrentUploads:     rf.concurrentUploads,
		KeepaliveInterval:     rf.keepalive,
		NoDrain:               rf.noDrain,
		UpgradeBatchPercent:   rf.upgradeBatch,
		SSHConfig:             rf.sshConfig,
		HostTranscripts:       rf.hostTranscripts,
	}, nil
}

// sudoPassword reads the sudo password from ssh.sudoPasswordEnv, ssh.sudoPasswordFile, or
// asks once on the terminal with --ask-sudo-password. It is never echoed or logged.
func (a *app) sudoPassword(c *inventory.Cluster, ask bool) (inventory.Secret, error) {
	s := c.Spec.SSH
	if s.SudoPasswordEnv != "" {
		if v := os.Getenv(s.SudoPasswordEnv); v != "" {
			return inventory.Secret(v), nil
		}
		return "", usageError{fmt.Errorf("ssh.sudoPasswordEnv names %s, which is not set", s.SudoPasswordEnv)}
	}
	if s.SudoPasswordFile != "" {
		p := c.ResolvePath(s.SudoPasswordFile)
		// Like ssh with private keys: a password others can read is refused.
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
			return "", usageError{fmt.Errorf("ssh.sudoPasswordFile %s is readable by others (mode %04o): run chmod 600 %s", p, st.Mode().Perm(), p)}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", usageError{fmt.Errorf("ssh.sudoPasswordFile: %w", err)}
		}
		return inventory.Secret(strings.TrimRight(string(b), "\r\n")), nil
	}
	if !ask {
		return "", nil
	}
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usageError{errors.New("--ask-sudo-password needs a terminal; for headless runs use ssh.sudoPasswordEnv or ssh.sudoPasswordFile")}
	}
	fmt.Fprint(a.stderr, "sudo password: ")
	pw, err := a.readTerminal(func() (string, error) {
		b, err := term.ReadPassword(int(f.Fd()))
		return string(b), err
	})
	fmt.Fprintln(a.stderr)
	if err != nil {
		return "", err
	}
	return inventory.Secret(pw), nil
}

// registerDay2 adds the flags every day-two command (backup, restore, remove-node, rotate;
// docs/day2.md) shares with apply that matter to it.
func registerDay2(cmd *cobra.Command, rf *runFlags, watches bool) {
	rf.register(cmd, false)
	f := cmd.Flags()
	f.BoolVar(&rf.dryRun, "dry-run", false, "connect and show what would be done; change nothing")
	if watches {
		f.DurationVar(&rf.timeout, "timeout", installer.DefaultTimeout, "how long each restarted node may take to be Ready again, counted from when its wait begins")
		f.DurationVar(&rf.stallGrace, "stall-grace", k3s.StallGrace, "how long the uninitialized taint may stay before the stall is diagnosed")
	}
}

// confirm asks a yes/no question on the terminal; without a terminal it refuses and says to
// pass --yes. Ctrl-C while it waits for the answer returns the cancellation (exit 130).
func (a *app) confirm(question string) (bool, error) {
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, usageError{fmt.Errorf("%s — not asked: stdin is not a terminal; pass --yes to confirm", question)}
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, err := a.readTerminal(func() (string, error) { return bufio.NewReader(f).ReadString('\n') })
	if err != nil {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// readTerminal runs read (a read of an answer on the terminal, stdin) apart from the command
// and returns its result, or the run's cancellation as soon as Ctrl-C cancels it: the read is
// left behind, the terminal's state (echo) restored, and the process ends.
func (a *app) readTerminal(read func() (string, error)) (string, error) {
	ctx := a.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var restore func()
	if f, ok := a.stdin.(*os.File); ok {
		if st, err := term.GetState(int(f.Fd())); err == nil {
			restore = func() { _ = term.Restore(int(f.Fd()), st) }
		}
	}
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := read()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		if restore != nil {
			restore()
		}
		fmt.Fprintln(a.stderr)
		return "", fmt.Errorf("cancelled while waiting for an answer on the terminal: %w", ctx.Err())
	}
}
