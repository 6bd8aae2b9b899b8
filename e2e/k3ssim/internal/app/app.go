// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the simulator's entry point: it dispatches `k3s server`, `k3s agent`,
// `k3s kubectl` (also when called as kubectl), --version and --help, and runs the
// simulated server, agent or joining server with its timeline.
package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/kubectl"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// Options is everything a run depends on, so tests can run several instances in one
// process.
type Options struct {
	// Args is the full argv (Args[0] decides whether we act as kubectl).
	Args []string
	// Getenv reads the environment; Environ lists it (KEY=VALUE).
	Getenv  func(string) string
	Environ []string
	// Root prefixes every absolute path (tests only; production: "").
	Root   paths.Root
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Version is the simulated K3s version (e.g. v1.36.3+k3s1).
	Version string
	// Hostname overrides the host name (tests; "" = the real one).
	Hostname string
	// Notify sends an sd_notify state ("READY=1"); nil uses NOTIFY_SOCKET via go-systemd.
	Notify func(state string)
}

// Banner is the first line of --help: the binary says it is a simulator.
const Banner = "k3s (k3strap K3s SIMULATOR — not K3s)"

func (o *Options) defaults() {
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Stdin == nil {
		o.Stdin = strings.NewReader("")
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Version == "" {
		o.Version = "v1.36.3+k3s1"
	}
	if o.Notify == nil {
		o.Notify = func(state string) { _, _ = daemon.SdNotify(false, state) }
	}
}

// Main runs the command in opts.Args until ctx ends and returns the process exit code.
func Main(ctx context.Context, opts Options) int {
	opts.defaults()
	args := opts.Args
	if len(args) == 0 {
		args = []string{"k3s"}
	}
	switch filepath.Base(args[0]) {
	case "kubectl":
		return runKubectl(ctx, opts, args[1:])
	case "crictl", "ctr":
		fmt.Fprintf(opts.Stderr, "%s: not available in the k3strap K3s simulator (no container runtime)\n", filepath.Base(args[0]))
		return 1
	}
	if len(args) < 2 {
		help(opts.Stdout)
		return 0
	}
	switch args[1] {
	case "--version", "-v", "version":
		fmt.Fprintf(opts.Stdout, "k3s version %s (k3strap-simulator)\ngo version %s\n", opts.Version, runtime.Version())
		return 0
	case "--help", "-h", "help":
		help(opts.Stdout)
		return 0
	case "server":
		return runServer(ctx, opts, args[2:])
	case "agent":
		return runAgent(ctx, opts, args[2:])
	case "kubectl":
		return runKubectl(ctx, opts, args[2:])
	case "etcd-snapshot":
		return runEtcdSnapshot(ctx, opts, args[2:]) // day2.go
	case "certificate":
		return runCertificate(ctx, opts, args[2:])
	case "token":
		return runToken(ctx, opts, args[2:])
	case "crictl", "ctr", "check-config", "secrets-encrypt", "completion":
		fmt.Fprintf(opts.Stderr, "k3s %s: not available in the k3strap K3s simulator\n", args[1])
		return 1
	default:
		fmt.Fprintf(opts.Stderr, "Incorrect Usage: unknown command %q\n\n", args[1])
		help(opts.Stderr)
		return 1
	}
}

func runKubectl(ctx context.Context, opts Options, args []string) int {
	return kubectl.Run(ctx, kubectl.Options{
		Args: args, Getenv: opts.Getenv, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
		DefaultKubeconfig: opts.Root.Path(paths.DefaultKubeconfig), Version: opts.Version,
	})
}

func help(w io.Writer) {
	fmt.Fprintf(w, `%s

This binary SIMULATES K3s v1.36 for k3strap's end-to-end tests. It runs no containers,
no kubelet and no network: it serves a Kubernetes API with simulated nodes and pods and
reproduces the log lines, files and timings of a real K3s.

USAGE:
   k3s [global options] command [command options] [arguments...]

COMMANDS:
   server   Run management server (simulated)
   agent    Run node agent (simulated)
   kubectl  Run kubectl (a small subset, against the simulated API)
   etcd-snapshot  save|ls|delete snapshots of the simulated datastore
   certificate    rotate (leaf certificates issued anew at the next start)
   token          rotate (the server token)

GLOBAL OPTIONS:
   --help, -h     show help
   --version, -v  print the version
`, Banner)
}
