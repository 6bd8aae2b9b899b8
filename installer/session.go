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
	"github.com/k3strap/k3strap/preflight"
)

// hostState is one host during a run.
type hostState struct {
	host *inventory.Host
	// client is the host's connection; read it through c() (a retry may replace it).
	client *remote.Client
	facts  *facts.Host
	plan   *plan.HostPlan
	// connErr is why the host could not be reached.
	connErr error
	// planErr is why no plan could be built for the host (reported after preflight).
	planErr error
	// staged is closed when the stage step finished uploading the host's files (nil when it
	// stages nothing for the host).
	staged chan struct{}
	// staging is what the stage step did there: written by it before staged is closed, applied
	// to facts by the host's join (applyStaging), so that no other step sees facts change
	// under it.
	staging staging
	// fresh says the host ran no K3s when the facts were gathered: its node is created by this
	// run (K3s sets its labels and taints at registration).
	fresh bool
	// selected is false for the first server when --host left it out and the command added
	// it for the token, the API or the lock.
	selected bool

	mu      sync.Mutex
	status  events.Status
	message string
}

// c returns the host's current connection.
func (hs *hostState) c() *remote.Client {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.client
}

func (hs *hostState) setClient(c *remote.Client) {
	hs.mu.Lock()
	old := hs.client
	hs.client = c
	hs.mu.Unlock()
	if old != nil && old != c {
		_ = old.Close()
	}
}

func (hs *hostState) setResult(st events.Status, msg string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	// A failure is never overwritten by a later success message.
	if hs.status == events.StatusFailed && st != events.StatusFailed {
		return
	}
	hs.status, hs.message = st, msg
}

// setResultIfUnset records a result only when the host has none yet.
func (hs *hostState) setResultIfUnset(st events.Status, msg string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.status == "" {
		hs.status, hs.message = st, msg
	}
}

// appendNote adds a note to the host's summary message, keeping its status.
func (hs *hostState) appendNote(note string) { hs.note("", note) }

// note adds a note to the host's summary message and, unless the host failed, sets status st
// ("" keeps it; an unset status becomes ok).
func (hs *hostState) note(st events.Status, note string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.message = appendMsg(hs.message, note)
	switch {
	case hs.status == events.StatusFailed:
	case st != "":
		hs.status = st
	case hs.status == "":
		hs.status = events.StatusOK
	}
}

func appendMsg(msg, add string) string {
	if msg == "" {
		return add
	}
	return msg + "; " + add
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
	// bringUp is the first server's supervisor, started by the supervise step.
	bringUp *bringUp

	// binaryReleases are the releases inside the airgap binaries, by architecture (plan
	// step; preflight's AirgapRelease judges them).
	binaryReleases map[string]preflight.BinaryRelease
	// report is the preflight step's report; excluded its verdict on which hosts
	// kernelPolicy exclude keeps out of the CNI, by host name (nil before preflight ran, e.g.
	// in `check`, which has no facts).
	report   *preflight.Report
	excluded map[string]preflight.ExcludedHost
	// token is the join token read from the first server once it is up.
	token inventory.Secret
	// firstResult is what the first-server step changed on the first server (the supervise
	// step reads when the service was started); firstDrained says it drained the first
	// server for an upgrade (the supervise step uncordons it).
	firstResult  convergeResult
	firstDrained bool
	// closers run when the session closes, last added first (the lock's release).
	closers []func()
	// notJoined names the servers the join-servers step could not join (the join-agents step
	// fails naming them once the agents are done).
	notJoined []string
	// nodes is the shared view of the cluster's nodes through the first server.
	nodes *nodeView
	// kubeconfig is the path the kubeconfig step wrote, for the summary.
	kubeconfig string
	// kubeconfigReq is what `k3strap kubeconfig` was asked for.
	kubeconfigReq KubeconfigRequest

	khMu sync.Mutex
	kh   map[string]*remote.KnownHosts
	// recorded are the host keys recorded in this run (trust on first use).
	recorded []RecordedKey

	sshcfg    sshConfigFile
	bastionMu sync.Mutex
	bastions  map[string]*remote.Client

	// planner builds every host's plan (once, in the plan step) and lists the paths facts
	// checksum.
	planner *plan.Planner
	// rancherURL is set once Rancher answers, for the summary.
	rancherURL string
	// rancherPasswordFile is the local 0600 file holding a generated Rancher bootstrap
	// password; rancherPasswordNew says this run wrote it (summary).
	rancherPasswordFile string
	rancherPasswordNew  bool
	// uploadSlots bounds artifact uploads in flight (ConcurrentUploads).
	uploadSlots chan struct{}
	// doctor is `k3strap doctor`'s state (installer/doctor.go).
	doctor *doctorState
	// day2 is the state of the day-two commands (installer/day2.go).
	day2 *day2State
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
	if s.nodes == nil {
		s.nodes = &nodeView{first: s.first, interval: nodeListInterval(len(s.hosts)), watchFor: s.in.opts.Timeout + time.Minute}
		s.onClose(s.nodes.close)
	}
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
	hs.setResult(events.StatusFailed, step+": "+err.Error())
	fix := ""
	if errors.Is(err, remote.ErrSudoPassword) {
		fix = "allow NOPASSWD sudo for the SSH user, or give the sudo password (ssh.sudoPasswordEnv, ssh.sudoPasswordFile or --ask-sudo-password)"
	}
	return &Failure{Kind: kind, Phase: s.current, Step: step, Host: hs.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%s failed: %v", step, err),
		Fix:     fix,
		Resume:  fmt.Sprintf("fix the cause and re-run `k3strap %s`: finished steps are skipped, nothing is left half-written", s.command),
	}}
}

// nodesByName lists the cluster's nodes through the first server (retried after reconnecting,
// a list is idempotent), by name.
func (s *session) nodesByName(ctx context.Context) (map[string]*corev1.Node, error) {
	var nodes []corev1.Node
	err := s.retry(ctx, s.first, "listing nodes", func(ctx context.Context) error {
		var err error
		nodes, err = kube.Kubectl{R: s.first.c()}.ListNodes(ctx)
		return err
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
