// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/netcheck"
	"github.com/k3strap/k3strap/preflight"
)

// preflightState is what the plan and preflight steps learn for the steps after them (apply,
// upgrade, preflight; the day-two commands run plan without preflight).
type preflightState struct {
	// binaryReleases are the releases inside the airgap binaries, by architecture (plan step;
	// preflight's AirgapRelease judges them).
	binaryReleases map[string]preflight.BinaryRelease
	// report is the preflight step's report; excluded its verdict on which hosts kernelPolicy
	// exclude keeps out of the CNI, by host name (nil before preflight ran, e.g. in `check` or
	// the day-two commands, which judge no kernel).
	report   *preflight.Report
	excluded map[string]preflight.ExcludedHost
	// paths is the path check's report (paths step; preflight's NodePaths and PathMTU judge
	// it); nil when the command runs no path check.
	paths *netcheck.PathReport
	// proxy is the proxy evidence by host name (preflight step, proxy_evidence.go; the Proxy
	// and NoProxy checks judge it).
	proxy map[string]*facts.ProxyFacts
}

// bootState is the first server's bring-up: started by first-server (apply, upgrade) or
// cluster-reset (restore), followed by supervise, waited for by bring-up.
type bootState struct {
	// firstResult is what the first-server (or cluster-reset) step changed on the first server:
	// supervise reads when the service was started. firstDrained says first-server drained the
	// first server for an upgrade (bring-up uncordons it).
	firstResult  convergeResult
	firstDrained bool
	// bringUp is the first server's supervisor, started by the supervise step.
	bringUp *bringUp
}

// joinState is what the join steps share (apply, upgrade).
type joinState struct {
	// token is the join token read from the first server once it is up.
	token inventory.Secret
	// notJoined names the servers join-servers could not join (join-agents fails naming them
	// once the agents are done).
	notJoined []string
	// apiDate is the Date of the API's answer to wait-api, apiLocal this host's clock when it
	// came (local mode joins: the clock check).
	apiDate, apiLocal time.Time
}

// outputs are what a run leaves for the summary and the caller.
type outputs struct {
	// kubeconfig is the path the kubeconfig step wrote; kubeconfigReq what `k3strap kubeconfig`
	// was asked for.
	kubeconfig    string
	kubeconfigReq KubeconfigRequest
	// rancherURL is set once Rancher answers; rancherPasswordFile is the local 0600 file
	// holding a generated Rancher bootstrap password, rancherPasswordNew says this run wrote it.
	rancherURL          string
	rancherPasswordFile string
	rancherPasswordNew  bool
}

// session is one run of a command: its hosts with their connections, facts and plans, and
// what each step learned for the steps after it.
type session struct {
	in    *Installer
	hosts []*hostState // inventory order
	// first is the first server's state (nil when the inventory has none).
	first *hostState
	// command is the k3strap command running (apply, upgrade, reset, ...), for messages.
	command string
	// current is the step running, named in failures.
	current events.Phase
	// abort stops the run's steps with a failure found by background work (runSteps sets it).
	abort context.CancelCauseFunc
	// background is the work steps left running (the supervisor, staging uploads); runSteps
	// waits for it before the session closes.
	background sync.WaitGroup
	// closers run when the session closes, last added first (the lock's release).
	closers []func()
	// nodes is the shared view of the cluster's nodes through the first server (join,
	// bring-up and the day-two restarts wait on it), made once by nodeView (nodesOnce: the
	// joins ask for it concurrently).
	nodes     *nodeView
	nodesOnce sync.Once

	// What steps hand forward, typed by the stage that writes it; each step's doc comment
	// says what it reads and writes. docs/architecture.md tables which command uses which.
	pre  preflightState
	boot bootState
	join joinState
	out  outputs
	// doctor is `k3strap doctor`'s state (doctor.go); day2 the day-two commands' (day2.go).
	doctor *doctorState
	day2   *day2State

	khMu sync.Mutex
	kh   map[string]*remote.KnownHosts
	// recorded are the host keys recorded in this run (trust on first use).
	recorded []RecordedKey

	sshcfg    sshConfigFile
	bastionMu sync.Mutex
	bastions  map[string]*remote.Client

	// uploadSlots bounds artifact uploads in flight (ConcurrentUploads).
	uploadSlots chan struct{}
	// planner builds every host's plan (once, in the plan step) and lists the paths facts
	// checksum.
	planner *plan.Planner
}

// newSession returns the session of cmd: the hosts --host selected (all when none was), in
// inventory order, plus the first server when cmd needs it.
func (in *Installer) newSession(cmd command) *session {
	s := &session{in: in, uploadSlots: make(chan struct{}, in.opts.ConcurrentUploads), command: cmd.name,
		planner: &plan.Planner{Cluster: in.cluster}}
	sel := map[string]bool{}
	for _, n := range in.opts.Hosts {
		sel[n] = true
	}
	first := in.cluster.FirstServer()
	for i := range in.cluster.Spec.Hosts {
		h := &in.cluster.Spec.Hosts[i]
		isFirst := first != nil && h.Name == first.Name
		selected := len(sel) == 0 || sel[h.Name]
		if !selected && !(isFirst && cmd.withFirst) {
			continue
		}
		hs := &hostState{host: h, selected: selected}
		if isFirst {
			s.first = hs
		}
		s.hosts = append(s.hosts, hs)
	}
	return s
}

// onClose registers fn to run when the session closes, before the connections close.
func (s *session) onClose(fn func()) { s.closers = append(s.closers, fn) }

// nodeView returns the session's shared view of the nodes through the first server.
func (s *session) nodeView() *nodeView {
	s.nodesOnce.Do(func() {
		s.nodes = &nodeView{first: s.first, interval: nodeListInterval(len(s.hosts)), watchFor: s.in.opts.Timeout + time.Minute}
		s.onClose(s.nodes.close)
	})
	return s.nodes
}

func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	for _, hs := range s.hosts {
		if c := hs.c(); c != nil {
			_ = c.Close()
		}
	}
	s.bastionMu.Lock()
	defer s.bastionMu.Unlock()
	for _, b := range s.bastions {
		_ = b.Close()
	}
}

func (s *session) state(name string) *hostState {
	for _, hs := range s.hosts {
		if hs.host.Name == name {
			return hs
		}
	}
	return nil
}

// each runs fn for every host with bounded concurrency and waits for all; it never stops early
// (one host failing does not hide the others).
func (s *session) each(ctx context.Context, hosts []*hostState, fn func(ctx context.Context, hs *hostState)) {
	var g errgroup.Group
	g.SetLimit(s.in.opts.Concurrency)
	for _, hs := range hosts {
		g.Go(func() error { fn(ctx, hs); return nil })
	}
	_ = g.Wait()
}

func (s *session) reachable() []*hostState {
	var out []*hostState
	for _, hs := range s.hosts {
		if hs.c() != nil && hs.connErr == nil {
			out = append(out, hs)
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}

func firstLine(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Info.Message
	}
	return err.Error()
}

// hostFailure records err as hs's failure in step (a stage of the current step) and returns
// the Failure.
func (s *session) hostFailure(hs *hostState, step string, kind Kind, err error) error {
	// A cancelled operation (Ctrl-C, or another failure stopped the run) is not the host's
	// failure: its result keeps what it got; the run's own error says why it stopped.
	if !errors.Is(err, context.Canceled) {
		hs.setResult(events.StatusFailed, step+": "+err.Error())
	}
	fix := ""
	var se *remote.SudoError
	switch {
	case errors.As(err, &se):
		fix = se.Fix()
	case errors.Is(err, remote.ErrSudoPassword):
		fix = "allow NOPASSWD sudo for the SSH user, or give the sudo password (ssh.sudoPasswordEnv, ssh.sudoPasswordFile or --ask-sudo-password)"
	}
	return &Failure{Kind: kind, Phase: s.current, Step: step, Host: hs.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%s failed: %v", step, err),
		Fix:     fix,
		Resume:  fmt.Sprintf("fix the cause and re-run `k3strap %s`: finished steps are skipped, nothing is left half-written", s.command),
	}}
}

// currentNodes is the cluster's nodes by name for the steps after the joins: the run's node
// view when the joins kept it up to date (its watch streams), else a fresh list
// (nodesByName); opts.NodesListed is told either way.
func (s *session) currentNodes(ctx context.Context) (map[string]*corev1.Node, error) {
	if s.nodes == nil || !s.nodes.current() {
		return s.nodesByName(ctx)
	}
	byName, err := s.nodes.all(ctx)
	if err != nil {
		return s.nodesByName(ctx)
	}
	if f := s.in.opts.NodesListed; f != nil {
		list := make([]corev1.Node, 0, len(byName))
		for _, n := range byName {
			list = append(list, *n)
		}
		f(list)
	}
	return byName, nil
}

// nodesByName lists the cluster's nodes through the first server (retried after reconnecting,
// a list is idempotent), by name.
func (s *session) nodesByName(ctx context.Context) (map[string]*corev1.Node, error) {
	var nodes []corev1.Node
	err := s.retry(ctx, s.first, "listing nodes", func(ctx context.Context) error {
		return s.first.withAPI(ctx, func(a *kube.API) (err error) {
			nodes, err = a.ListNodes(ctx)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if f := s.in.opts.NodesListed; f != nil {
		f(nodes)
	}
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	return byName, nil
}
