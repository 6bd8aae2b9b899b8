// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package installer runs k3strap's commands against the hosts of an inventory over SSH. Each
// command is an ordered list of named steps (commands.go; `k3strap steps` prints them), each
// step in its own file step_<phase>.go; the engine (engine.go) runs them on a session
// (session.go) that holds the hosts and the state steps hand forward, typed by the stage that
// writes it. Work that needs no session lives in packages below: plan (what each host should
// hold), drift (node taints and labels), sucwatch, rancherapi, lock, kube (the Kubernetes API through client-go over SSH)
// and remote (SSH). It emits events and prints nothing; re-running after any failure is safe
// because every step compares what the host has with what it should have (checksums gathered
// with the facts) before changing anything. docs/architecture.md draws it.
package installer

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/preflight"
)

// Options tune a run.
type Options struct {
	// IgnorePreflight turns the named checks' errors into warnings.
	IgnorePreflight preflight.Ignore
	// InsecureIgnoreHostKey skips host key verification (a warning is emitted per host).
	InsecureIgnoreHostKey bool
	// KubeconfigOut is where apply writes the kubeconfig ("" = <cluster name>.kubeconfig).
	KubeconfigOut string
	// APIAddress replaces the first server's address in the kubeconfig (and is added to
	// tls-san), e.g. a load balancer or a DNS name.
	APIAddress string
	// StallGrace is how long the uninitialized taint may stay before the supervisor diagnoses
	// a stall (default 60 s).
	StallGrace time.Duration
	// Timeout bounds each wait of a bring-up separately, counted from that wait's own start:
	// the first server's from its (re)start, each joining or restarted node's, the CNI
	// rollout's (default 10 min; bringup.Deadline, docs/architecture.md "Bring-up judgement").
	Timeout time.Duration
	// PollInterval is the supervisor's polling period on the host (default 400 ms; a
	// milestone is noticed within about one period).
	PollInterval time.Duration
	// Concurrency bounds hosts worked on at once (default 10).
	Concurrency int
	// SudoPassword is used for non-root users whose sudo asks for a password.
	SudoPassword inventory.Secret
	// Hosts limits the run to these host names (empty = all).
	Hosts []string
	// DryRun gathers facts and runs preflight, then reports what apply would upload, write
	// (diffed), run and restart, and changes nothing.
	DryRun bool
	// DetailedExitCode makes a successful dry-run that found changes end with a Failure of
	// KindChangesPending (terraform's -detailed-exitcode), so that scripts tell "nothing to do"
	// from "changes pending" by the exit code; without DryRun it does nothing.
	DetailedExitCode bool
	// ConcurrentUploads bounds large artifact uploads in flight across hosts (default 5).
	ConcurrentUploads int
	// KeepaliveInterval is the SSH keepalive period; a link is declared dead after 3 missed
	// (default 10 s).
	KeepaliveInterval time.Duration
	// HostTranscripts, when set, is a directory where each host's exchanges through the host
	// seam are recorded as <host>.jsonl (installer/remote/transcript; secrets masked), for
	// replay tests (docs/development.md, "Host transcripts").
	HostTranscripts string
	// Connect, when set, replaces dialling a host over SSH once its connection settings are
	// known: unit tests hand each host a transcript replay. It must return a Host or an error.
	Connect func(ctx context.Context, host *inventory.Host) (remote.Host, error)
	// SSHConfig is the OpenSSH client config consulted for what the inventory leaves unset
	// ("" = ~/.ssh/config, "none" = none).
	SSHConfig string
	// NoDrain skips draining nodes before upgrading them.
	NoDrain bool
	// UpgradeBatchPercent is the share of agents upgraded at once (default 10, at least one
	// agent per batch).
	UpgradeBatchPercent int
	// Retries is how often an idempotent step is retried after a transient transport failure
	// (default 3).
	Retries int
	// Exit maps a run's outcome to the process exit code and its meaning, which the summary
	// event carries (the command layer's table); nil reports 0 for success and 1 for any
	// failure.
	Exit func(error) (code int, meaning string)
	// ReconcileTaints makes apply repair node taint and label drift; without it
	// drift is only reported.
	ReconcileTaints bool
	// Prune makes apply remove the nodes that are no longer in the inventory
	// (step_remove_node.go); without it they are only reported.
	Prune bool
	// NodesListed, when set, is given the cluster's nodes each time the run lists them through
	// the first server (apply's reconcile-nodes step, check): a fleet records versions and readiness
	// from it (docs/fleet.md). It must not keep or change the slice.
	NodesListed func([]corev1.Node)
	// HostContact, when set, is told whether each host could be reached: once per host the
	// connect step dials (err nil when connected, else the *remote.ConnectError), and again with
	// the error when the facts step then loses the host. A fleet tells an offline site from a
	// failed one by it (fleet/unreachable.go, docs/fleet.md "Offline sites"). It is called from
	// several goroutines and must not block.
	HostContact func(host string, err error)
	// JoinTimeout bounds how long a box joining in local mode waits for the cluster's API
	// (JoinLocal's wait-api step; default DefaultJoinTimeout).
	JoinTimeout time.Duration
}

// DefaultJoinTimeout is how long a box joining in local mode waits for the cluster's API by
// default: its first server may be plugged in later the same day.
const DefaultJoinTimeout = 30 * time.Minute

// The defaults of Options, the one place they are written: the command line's flags show and
// use them (cmd/k3strap/root.go), a zero option takes them (defaults).
const (
	// DefaultTimeout is a server's or agent's bring-up timeout (--timeout).
	DefaultTimeout = 10 * time.Minute
	// DefaultPollInterval is how often the bring-up supervisor looks (--poll-interval).
	DefaultPollInterval = 400 * time.Millisecond
	// DefaultConcurrency is how many hosts are worked on at once (--concurrency).
	DefaultConcurrency = 10
	// DefaultConcurrentUploads is how many large uploads are in flight at once across hosts
	// (--concurrent-uploads).
	DefaultConcurrentUploads = 5
	// DefaultRetries is how often a lost connection is re-established before a host fails.
	DefaultRetries = 3
	// DefaultUpgradeBatchPercent is the percentage of agents upgraded at once (--upgrade-batch).
	DefaultUpgradeBatchPercent = 10
)

func (o *Options) defaults() {
	if o.Exit == nil {
		o.Exit = func(err error) (int, string) {
			if err == nil {
				return 0, "success"
			}
			return 1, "error"
		}
	}
	if o.StallGrace <= 0 {
		o.StallGrace = k3s.StallGrace
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ConcurrentUploads <= 0 {
		o.ConcurrentUploads = DefaultConcurrentUploads
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = remote.DefaultKeepaliveInterval
	}
	if o.Retries <= 0 {
		o.Retries = DefaultRetries
	}
	if o.UpgradeBatchPercent <= 0 {
		o.UpgradeBatchPercent = DefaultUpgradeBatchPercent
	}
}

// Installer runs k3strap's commands against one inventory.
type Installer struct {
	cluster *inventory.Cluster
	opts    Options
	sink    events.Sink
}

// New returns an Installer for c emitting to sink.
func New(c *inventory.Cluster, opts Options, sink events.Sink) *Installer {
	opts.defaults()
	// --api-address "[fd00::1]" is the same address as "fd00::1": kept bare, as the
	// inventory's (tls-san needs it bare; the kubeconfig URL adds the brackets once).
	opts.APIAddress = inventory.NormalizeAddress(opts.APIAddress)
	if opts.APIAddress != "" && c.APIAddress != opts.APIAddress {
		cc := *c // the caller's inventory stays as it was
		cc.APIAddress = opts.APIAddress
		c = &cc
	}
	if sink == nil {
		sink = events.Discard
	}
	return &Installer{cluster: c, opts: opts, sink: sink}
}

func (in *Installer) emitter(phase events.Phase) events.Emitter {
	return events.Emitter{Sink: in.sink, Phase: phase}
}
