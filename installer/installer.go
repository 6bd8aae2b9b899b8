// Package installer takes hosts from an inventory to a running K3s cluster over SSH, in
// phases: Connect → GatherFacts → Preflight → (per host) Upload → Configure → Install →
// InitServer → Supervise → Join → Kubeconfig. It emits events and prints nothing; re-running
// after any failure is safe because every step compares what the host has with what it should
// have (checksums gathered with the facts) before changing anything.
package installer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// ExitCode is a process exit code of k3strap (documented in the README).
type ExitCode int

// Exit codes.
const (
	ExitOK        ExitCode = 0
	ExitError     ExitCode = 1 // unexpected error
	ExitInvalid   ExitCode = 2 // invalid inventory or command line
	ExitPreflight ExitCode = 3 // preflight found errors (unreachable hosts included)
	ExitInstall   ExitCode = 4 // a host step failed
	ExitBringUp   ExitCode = 5 // the first server did not come up (stall diagnosed or timeout)
	ExitCancelled ExitCode = 130
)

// Failure is an error with the exit code it maps to and the explanation shown to the user.
type Failure struct {
	Code  ExitCode
	Phase string
	Host  string
	Info  events.ErrorInfo
}

func (f *Failure) Error() string {
	msg := f.Info.Message
	if f.Host != "" && !strings.HasPrefix(msg, f.Host) {
		msg = f.Host + ": " + msg
	}
	if f.Info.Fix != "" {
		msg += " — fix: " + f.Info.Fix
	}
	return msg
}

// CodeOf returns the exit code for err: a Failure's code, ExitCancelled for context
// cancellation, ExitError otherwise, ExitOK for nil.
func CodeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var f *Failure
	if errors.As(err, &f) {
		return f.Code
	}
	if errors.Is(err, context.Canceled) {
		return ExitCancelled
	}
	return ExitError
}

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
	// Timeout bounds the first server's bring-up (default 10 min).
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
	// ConcurrentUploads bounds large artifact uploads in flight across hosts (default 5).
	ConcurrentUploads int
	// KeepaliveInterval is the SSH keepalive period; a link is declared dead after 3 missed
	// (default 10 s).
	KeepaliveInterval time.Duration
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
	// ReconcileTaints makes apply repair node taint and label drift (issue 4); without it
	// drift is only reported.
	ReconcileTaints bool
}

func (o *Options) defaults() {
	if o.StallGrace <= 0 {
		o.StallGrace = 60 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 400 * time.Millisecond
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	if o.ConcurrentUploads <= 0 {
		o.ConcurrentUploads = 5
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = remote.DefaultKeepaliveInterval
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.UpgradeBatchPercent <= 0 {
		o.UpgradeBatchPercent = 10
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
	if sink == nil {
		sink = events.Discard
	}
	return &Installer{cluster: c, opts: opts, sink: sink}
}

func (in *Installer) emitter(phase string) events.Emitter {
	return events.Emitter{Sink: in.sink, Phase: phase}
}

// hostState is one host during a run.
type hostState struct {
	host *inventory.Host
	// client is the host's connection; read it through c() (a retry may replace it).
	client *remote.Client
	facts  *facts.Host
	plan   *HostPlan
	// connErr is why the host could not be reached.
	connErr error

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

// session is one run: connections and facts of every selected host.
type session struct {
	in    *Installer
	hosts []*hostState // inventory order

	khMu sync.Mutex
	kh   map[string]*remote.KnownHosts

	sshcfg    sshConfigFile
	bastionMu sync.Mutex
	bastions  map[string]*remote.Client

	// planner is set by commands that change hosts; gather then also checksums the first
	// server's add-on manifests.
	planner *Planner
	// rancherURL is set once Rancher answers (issue 5), for the summary.
	rancherURL string
	// rancherPasswordFile is the local 0600 file holding a generated Rancher bootstrap
	// password; rancherPasswordNew says this run wrote it (issue 5, summary).
	rancherPasswordFile string
	rancherPasswordNew  bool
	// uploadSlots bounds artifact uploads in flight (ConcurrentUploads).
	uploadSlots chan struct{}
	// command is the k3strap command running (apply, upgrade, reset, ...), for messages.
	command string
}

func (in *Installer) newSession() *session {
	s := &session{in: in, uploadSlots: make(chan struct{}, in.opts.ConcurrentUploads), command: "apply"}
	sel := map[string]bool{}
	for _, n := range in.opts.Hosts {
		sel[n] = true
	}
	for i := range in.cluster.Spec.Hosts {
		h := &in.cluster.Spec.Hosts[i]
		if len(sel) > 0 && !sel[h.Name] {
			continue
		}
		s.hosts = append(s.hosts, &hostState{host: h})
	}
	return s
}

func (s *session) close() {
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

// knownHosts returns the shared known_hosts verifier for path.
func (s *session) knownHosts(path string) *remote.KnownHosts {
	s.khMu.Lock()
	defer s.khMu.Unlock()
	if kh, ok := s.kh[path]; ok {
		return kh
	}
	em := s.in.emitter("connect")
	kh := &remote.KnownHosts{Path: path, OnRecord: func(addr, fp string) {
		em.Warn(hostForAddress(s, addr), fmt.Sprintf("recorded host key %s for %s in %s (trust on first use)", fp, addr, path))
	}}
	if s.kh == nil {
		s.kh = map[string]*remote.KnownHosts{}
	}
	s.kh[path] = kh
	return kh
}

func hostForAddress(s *session, addr string) string {
	for _, hs := range s.hosts {
		if strings.HasPrefix(addr, hs.host.Address+":") || strings.HasPrefix(addr, "["+hs.host.Address+"]") {
			return hs.host.Name
		}
	}
	return ""
}

// connect dials every host in parallel. Unreachable hosts keep connErr; the SSH preflight
// check reports them.
func (s *session) connect(ctx context.Context) {
	em := s.in.emitter("connect")
	em.Started(fmt.Sprintf("connecting to %d hosts", len(s.hosts)))
	s.each(ctx, s.hosts, func(ctx context.Context, hs *hostState) {
		cfg, err := s.remoteConfig(ctx, hs.host)
		if err != nil {
			hs.connErr = err
			em.Step(hs.host.Name, "connect", events.StatusFailed, err.Error())
			return
		}
		c, err := s.dial(ctx, hs, cfg)
		if err != nil {
			hs.connErr = err
			em.Step(hs.host.Name, "connect", events.StatusFailed, err.Error())
			return
		}
		hs.setClient(c)
		via := ""
		if cfg.Via != nil {
			via = " via " + cfg.Via.Address()
		}
		em.Step(hs.host.Name, "connect", events.StatusOK, fmt.Sprintf("connected to %s as %s%s", c.Address(), cfg.User, via))
	})
	em.Finished(events.StatusOK, "")
}

// gather runs the facts script on every reachable host: one command per host.
func (s *session) gather(ctx context.Context) {
	em := s.in.emitter("facts")
	em.Started("gathering facts")
	s.each(ctx, s.reachable(), func(ctx context.Context, hs *hostState) {
		// The managed paths do not depend on the architecture; plan with a placeholder to list
		// them (airgap file names come from the inventory).
		paths := managedPaths(s.in.cluster, hs.host)
		if s.planner != nil && s.in.cluster.IsFirstServer(hs.host) {
			if addons, err := s.planner.addonFiles(); err == nil {
				for _, f := range addons {
					paths = append(paths, f.Path)
				}
			}
		}
		script := facts.Script(facts.ScriptInput{Files: paths, SudoPasswordOnStdin: hs.c().HasSudoPassword()})
		cmd := remote.Script("gather facts", script)
		cmd.PasswordStdin = true
		sent := time.Now()
		res, err := hs.c().Run(ctx, cmd)
		received := time.Now()
		if err == nil && res.ExitCode != 0 {
			err = &remote.CommandError{Host: hs.host.Name, Command: cmd.String(), ExitCode: res.ExitCode, Stderr: strings.TrimSpace(string(res.Stderr))}
		}
		if err != nil {
			hs.connErr = err
			em.Step(hs.host.Name, "facts", events.StatusFailed, err.Error())
			return
		}
		f, err := facts.Parse(res.Stdout)
		if err != nil {
			hs.connErr = fmt.Errorf("reading the facts document: %w", err)
			em.Step(hs.host.Name, "facts", events.StatusFailed, hs.connErr.Error())
			return
		}
		f.Name = hs.host.Name
		f.SetClockSkew(sent, received)
		hs.facts = f
		em.Step(hs.host.Name, "facts", events.StatusOK, fmt.Sprintf("%s %s, kernel %s, %s", f.OS.PrettyName, f.Arch, f.KernelRelease, describeK3s(f)))
	})
	em.Finished(events.StatusOK, "")
}

func describeK3s(f *facts.Host) string {
	if !f.K3s.Installed() {
		return "no K3s"
	}
	s := "K3s " + f.K3s.BinaryVersion
	if f.K3s.Service != "" {
		s += fmt.Sprintf(" (%s %s)", f.K3s.Service, f.K3s.ServiceActive)
	}
	return s
}

// managedPaths lists the files whose checksums the facts script reports for h.
func managedPaths(c *inventory.Cluster, h *inventory.Host) []string {
	paths := []string{PathTokenFile, PathConfig, PathInstallScript}
	if c.Spec.K3s.Install == inventory.Airgap {
		paths = append(paths, PathBinary)
		seen := map[string]bool{}
		for _, a := range c.Spec.K3s.Airgap {
			if a.Images != "" {
				p := DirImages + "/" + baseName(a.Images)
				if !seen[p] {
					seen[p] = true
					paths = append(paths, p)
				}
			}
		}
	}
	svc := ServiceName(h.Role)
	paths = append(paths, DirSystemd+"/"+svc+".service", DirSystemd+"/"+svc+".service.env")
	sort.Strings(paths[3:])
	return paths
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
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

// preflight judges the gathered facts and emits every finding. It returns a Failure with
// ExitPreflight when errors remain after --ignore-preflight-errors.
func (s *session) preflight() (*preflight.Report, error) {
	em := s.in.emitter("preflight")
	em.Started("running preflight checks")
	input := &preflight.Input{Cluster: s.in.cluster, Facts: map[string]*facts.Host{}, Unreachable: map[string]error{}}
	for _, hs := range s.hosts {
		if hs.facts != nil {
			input.Facts[hs.host.Name] = hs.facts
		}
		if hs.connErr != nil {
			input.Unreachable[hs.host.Name] = hs.connErr
		}
	}
	rep := preflight.Run(input, s.in.opts.IgnorePreflight)
	for _, f := range rep.Findings {
		sev := string(f.Severity)
		if f.Ignored {
			sev = "ignored"
		}
		em.Finding(f.Host, events.PreflightResult{Check: f.Check, Severity: sev, Message: f.Message, Fix: f.Fix})
	}
	errs := rep.Errors()
	if len(errs) > 0 {
		hosts := map[string]bool{}
		var checks []string
		seen := map[string]bool{}
		for _, f := range errs {
			hosts[f.Host] = true
			if !seen[f.Check] {
				seen[f.Check] = true
				checks = append(checks, f.Check)
			}
			if hs := s.state(f.Host); hs != nil {
				hs.setResult(events.StatusFailed, "preflight: "+f.Check)
			}
		}
		em.Finished(events.StatusFailed, fmt.Sprintf("%d preflight errors", len(errs)))
		return rep, &Failure{Code: ExitPreflight, Phase: "preflight", Info: events.ErrorInfo{
			Message: fmt.Sprintf("preflight found %d errors (%s); nothing was changed on any host", len(errs), strings.Join(checks, ", ")),
			Fix:     "fix the findings above, or skip a check you accept with --ignore-preflight-errors=" + strings.Join(checks, ","),
			Resume:  "re-run the same command",
		}}
	}
	em.Finished(events.StatusOK, fmt.Sprintf("%d warnings", len(rep.Warnings())))
	return rep, nil
}

// Preflight connects, gathers facts and runs the checks; it changes nothing.
func (in *Installer) Preflight(ctx context.Context) (*preflight.Report, error) {
	start := time.Now()
	s := in.newSession()
	s.command = "preflight"
	defer s.close()
	s.connect(ctx)
	s.gather(ctx)
	var rep *preflight.Report
	err := ctx.Err()
	if err == nil {
		rep, err = s.preflight()
	}
	err = s.finish(ctx, err)
	s.summary("preflight", start, err, "")
	return rep, err
}

// summary emits the run's summary event.
func (s *session) summary(command string, start time.Time, err error, kubeconfig string) {
	sum := events.SummaryInfo{Command: command, OK: err == nil, ExitCode: int(CodeOf(err)), Kubeconfig: kubeconfig,
		RancherURL: s.rancherURL, RancherPasswordFile: s.rancherPasswordFile, RancherPasswordNew: s.rancherPasswordNew,
		Seconds: time.Since(start).Seconds()}
	var failed []string
	for _, hs := range s.hosts {
		hs.mu.Lock()
		st, msg := hs.status, hs.message
		hs.mu.Unlock()
		if st == "" {
			if hs.connErr != nil {
				st, msg = events.StatusFailed, hs.connErr.Error()
			} else if err != nil {
				st, msg = events.StatusSkipped, "not reached"
			} else {
				st = events.StatusOK
			}
		}
		if st == events.StatusFailed {
			failed = append(failed, hs.host.Name)
		}
		hr := events.HostResult{Host: hs.host.Name, Role: string(hs.host.Role), Status: st, Message: msg}
		if c := hs.c(); c != nil {
			cs := c.Stats()
			hr.SSHCommands, hr.FileTransfers = cs.Commands, cs.FileTransfers
		}
		sum.Hosts = append(sum.Hosts, hr)
	}
	file := s.in.cluster.Source
	if file == "" {
		file = "FILE"
	}
	switch {
	case err == nil && command == "apply":
		if kubeconfig != "" {
			sum.Next = append(sum.Next, "export KUBECONFIG="+kubeconfig, "kubectl get nodes")
		}
	case err != nil && len(failed) > 0:
		again := "re-running resumes where it stopped"
		if command == "preflight" {
			again = "again once the findings are fixed"
		}
		sum.Next = append(sum.Next, "look at: "+strings.Join(failed, ", "), fmt.Sprintf("k3strap %s -f %s   # %s", command, file, again))
	}
	s.in.emitter(command).Summary(sum)
}
