// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/bringup"
	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/preflight"
)

func joinFailure(phase events.Phase, failed []string) error {
	if len(failed) == 0 {
		return nil
	}
	sort.Strings(failed)
	return &Failure{Kind: KindInstall, Phase: phase, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%d hosts did not join: %s", len(failed), strings.Join(failed, ", ")),
		Fix:     "see each host's error above",
		Resume:  "re-run `k3strap apply`: hosts that joined are left unchanged",
	}}
}

// joinOne converges a joining host and waits for its node (drained before and uncordoned after
// when its K3s version changes). A failure of the host (not a cancellation) is reported as the
// host's error event here, whichever stage it came from (upload, install, start, drain, the
// wait for its node): the join steps' own error only names the hosts and points here.
func (s *session) joinOne(ctx context.Context, first, hs *hostState) error {
	err := s.joinHost(ctx, first, hs)
	if err == nil || ctx.Err() != nil {
		// Cancelled (Ctrl-C, or another failure stopped the run): not this host's failure;
		// the run's own error says why.
		return err
	}
	step, info := "join", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap apply`"}
	var f *Failure
	if errors.As(err, &f) {
		step, info = f.Step, f.Info
	}
	s.in.emitter(s.current).Fail(hs.host.Name, step, info)
	return err
}

// joinHost is joinOne's work, its failure not yet reported.
func (s *session) joinHost(ctx context.Context, first, hs *hostState) error {
	if hs.staged != nil {
		select {
		case <-hs.staged:
			s.applyStaging(hs)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	hs.plan.SetToken(s.join.token, false)
	view := s.nodeView()
	upgrade := s.upgrading(hs)
	want := ""
	if upgrade {
		want = s.in.cluster.Spec.K3s.Version
		if err := s.drain(ctx, first, hs); err != nil {
			return err
		}
	}
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	// What the host got so far: a run stopped while its node is awaited still says so.
	hs.setResult(res.status(), res.describe()+"; its node was not Ready yet when the run ended")
	if err := s.waitNode(ctx, hs, view, want, res); err != nil {
		if ctx.Err() != nil {
			// Cancelled (Ctrl-C, or another failure stopped the run): not this host's failure;
			// the run's own error says why.
			return err
		}
		hs.setResult(events.StatusFailed, err.Error())
		return err
	}
	if upgrade {
		if !s.in.opts.NoDrain {
			if err := s.uncordon(ctx, first, hs); err != nil {
				return err
			}
		}
		res.upgradedFrom = hs.facts.K3s.BinaryVersion
	}
	if hs.fresh {
		s.recordDeclared(ctx, first, hs, view)
	}
	hs.setResult(res.status(), res.describe())
	return nil
}

// recordDeclared writes, on a node this run created (waitNode saw it carry its declared taints
// and labels), the annotations that record what the inventory declared (drift.AnnotationTaints,
// drift.AnnotationLabels) and the CNI label — now, while the first server may still be coming
// up, so that the reconcile-nodes step at the end of apply finds nothing to write. Best effort:
// whatever fails here, that step reports and writes.
func (s *session) recordDeclared(ctx context.Context, first, hs *hostState, view *nodeView) {
	n, err := view.get(ctx, hs.host.Name)
	if err != nil || n == nil {
		return
	}
	_ = first.withAPI(ctx, func(a *kube.API) error { return s.recordDeclaredOn(ctx, a, hs, n) })
}

// recordDeclaredOn writes, through api, the annotations that record what the inventory
// declared for hs's node n (read just before; it carries its declared taints and labels) and
// the CNI label: drift.RepairCNILabel, which never changes a taint — so a node may write them
// on its own Node (NodeRestriction refuses a kubelet's change of its taints, not of its
// annotations or of labels outside kubernetes.io). The error is the API's; the caller may
// ignore it (the reconcile step of a later run writes the record too).
func (s *session) recordDeclaredOn(ctx context.Context, api drift.API, hs *hostState, n *corev1.Node) error {
	_, wrote, err := drift.ReconcileFrom(ctx, api, s.desired(hs), drift.RepairCNILabel, n, nil)
	if err == nil && wrote {
		s.in.emitter(s.current).Debug(hs.host.Name, "recorded the declared taints and labels in "+drift.AnnotationTaints+" / "+drift.AnnotationLabels)
	}
	return err
}

// drain cordons and drains hs's node through the first server before an upgrade (unless
// NoDrain). A node that does not exist yet needs nothing.
func (s *session) drain(ctx context.Context, first, hs *hostState) error {
	em := s.in.emitter(events.PhaseUpgrade)
	if s.in.opts.NoDrain {
		em.Step(hs.host.Name, "drain", events.StatusSkipped, "--no-drain")
		return nil
	}
	err := first.withAPI(ctx, func(a *kube.API) error { return a.Drain(ctx, hs.host.Name, 300*time.Second) })
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return s.hostFailure(hs, "drain", KindInstall, fmt.Errorf("draining before the upgrade: %w (use --no-drain to skip)", err))
	}
	em.Step(hs.host.Name, "drain", events.StatusOK, "cordoned and drained for the upgrade to "+s.in.cluster.Spec.K3s.Version)
	return nil
}

// uncordon makes hs's node schedulable again after its upgrade.
func (s *session) uncordon(ctx context.Context, first, hs *hostState) error {
	if err := first.withAPI(ctx, func(a *kube.API) error { return a.Uncordon(ctx, hs.host.Name) }); err != nil {
		return s.hostFailure(hs, "uncordon", KindInstall, err)
	}
	s.in.emitter(events.PhaseUpgrade).Step(hs.host.Name, "uncordon", events.StatusOK, "Ready on "+s.in.cluster.Spec.K3s.Version+", uncordoned")
	return nil
}

// waitNode polls the node through the first server and feeds each look to the node judge
// (bringup.NodeWait) until it is done: Ready, carrying its declared labels and taints and —
// a new node of a cluster whose embedded flannel runs — flannel's lease, running version (when
// not ""), and — for servers of an HA cluster — an etcd member. It ends early,
// saying so, when hs's own connection is found dead (the host lost power or its network: its
// node will not come), and at the deadline (bringup.Deadline: --timeout from the wait's
// start). While it waits, the nodes awaited are said at most every heartbeatEvery
// (nodeView.beat).
//
// After a (re)start (res.started set) the node counts as Ready only once a kubelet of this
// start posted it (bringup.Fresh since bringup.Since the start): a Node Ready from before is not
// an answer.
func (s *session) waitNode(ctx context.Context, hs *hostState, kc *nodeView, version string, res convergeResult) error {
	// A host kept out of the CNI (kernelPolicy exclude) has no pod network on a cluster
	// whose CNI k3strap deploys: its node may stay NotReady, so registering is enough.
	_, excluded := s.cniExcluded()[hs.host.Name]
	nw := &bringup.NodeWait{
		Host: hs.host, Taints: s.in.cluster.HostTaints(hs.host), Service: hs.plan.Service, Version: version, Declared: hs.fresh, Excluded: excluded,
		WantFlannel: hs.fresh && s.in.cluster.EmbeddedFlannel(),
		WantEtcd:    hs.host.EtcdMember() && len(s.in.cluster.Servers()) > 1,
		Since:       bringup.Since(res.started, hs.facts.ClockSkew),
		Deadline:    s.waitDeadline(),
	}
	wctx, stop := whileReachable(ctx, hs)
	defer stop()
	defer kc.done(hs.host.Name)
	kc.follow()
	for {
		mark := kc.mark()
		n, err := kc.get(wctx, hs.host.Name)
		var lost error
		if wctx.Err() != nil && ctx.Err() == nil {
			lost = context.Cause(wctx)
		}
		v := nw.Observe(n, err == nil, lost, time.Now())
		if v.Kind == bringup.Up {
			s.in.emitter(s.current).Step(hs.host.Name, "node", events.StatusOK, v.Message)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if v.Err != nil {
			return v.Err
		}
		kc.beat(s.in.emitter(s.current), hs.host.Name, v.Why, nw.Deadline.Start, nw.Deadline.At())
		if err := kc.wait(wctx, mark); err != nil && ctx.Err() != nil {
			return err
		}
	}
}

// whileReachable returns a context that ends, with a *hostLost as its cause, when hs's
// connection is found dead (remote.Client.Lost); stop releases it.
func whileReachable(ctx context.Context, hs *hostState) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	lost, why := lostHost(hs)
	if lost != nil {
		go func() {
			select {
			case <-cctx.Done():
			case <-lost:
				if err := why(); err != nil {
					cancel(err)
				}
			}
		}()
	}
	return cctx, func() { cancel(nil) }
}

// beat records what host's wait lacks and, at most every heartbeatEvery for all waiters
// together, says in one info event which nodes the run waits for, why and for how long.
func (v *nodeView) beat(em events.Emitter, host, why string, since, deadline time.Time) {
	v.mu.Lock()
	if v.waits == nil {
		v.waits = map[string]nodeWait{}
		v.lastBeat = time.Now()
	}
	v.waits[host] = nodeWait{why: why, since: since, deadline: deadline}
	now := time.Now()
	if now.Sub(v.lastBeat) < heartbeatEvery {
		v.mu.Unlock()
		return
	}
	v.lastBeat = now
	names := slices.Sorted(maps.Keys(v.waits))
	var parts []string
	var last time.Time
	for i, n := range names {
		w := v.waits[n]
		if w.deadline.After(last) {
			last = w.deadline
		}
		if i < 5 {
			parts = append(parts, fmt.Sprintf("%s (%s, %s)", n, w.why, now.Sub(w.since).Round(time.Second)))
		}
	}
	if len(names) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(names)-5))
	}
	v.mu.Unlock()
	em.Info("", fmt.Sprintf("waiting for %s: %s; timeout in %s", plural(len(names), "node", "nodes"), strings.Join(parts, ", "), last.Sub(now).Round(time.Second)))
}

// done removes host from the nodes awaited.
func (v *nodeView) done(host string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.waits, host)
}

// nodeWait is what one waiter lacks, since when and until when it waits.
type nodeWait struct {
	why             string
	since, deadline time.Time
}

// nodeListInterval is how often the shared node list is refreshed for a cluster of n hosts:
// 250 ms for small clusters (a joined node is seen Ready about 1/8 s after it is, on average),
// growing by 10 ms per host up to 2 s, so that a list (about 5 kB of JSON per node) costs the
// first server at most about 2.5 MB/s however large the fleet.
func nodeListInterval(n int) time.Duration {
	return min(max(250*time.Millisecond, time.Duration(n)*10*time.Millisecond), 2*time.Second)
}

// nodeView shares one view of the nodes among every host waiting for its node. It follows a
// watch of the Nodes through the first server's API (kube.WatchNodes over the SSH connection,
// started by the first waiter): a change wakes the waiters at once. A list of the nodes
// refreshes the view at most once per interval whatever the number of waiters (so 500 agents
// cost one API request per interval, not 500), and only every
// nodeWatchedInterval while the watch streams (a safety net for anything it missed).
type nodeView struct {
	// first is the first server, read through its current connection (a retry may replace it).
	first    *hostState
	interval time.Duration
	// watchFor bounds the watch (on the host too); close ends it.
	watchFor time.Duration

	mu    sync.Mutex
	at    time.Time
	nodes map[string]*corev1.Node
	err   error
	// live is true while the watch delivers events; changed is closed (and replaced) at each.
	live     bool
	changed  chan struct{}
	watching bool
	stop     context.CancelFunc
	// waits is what each waiter still waits for (beat), lastBeat when it was last said.
	waits    map[string]nodeWait
	lastBeat time.Time
}

// nodeWatchedInterval is how often the view is listed while the watch streams.
const nodeWatchedInterval = 5 * time.Second

// get returns the node named name as of the view (listed again when older than the interval);
// nil when it is not registered.
func (v *nodeView) get(ctx context.Context, name string) (*corev1.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.refresh(ctx); err != nil {
		return nil, err
	}
	return v.nodes[name], nil
}

// all returns every node by name as of the view: as the watch keeps it while it streams,
// else listed again when older than the interval. The nodes are shared: read them, do not
// change them.
func (v *nodeView) all(ctx context.Context) (map[string]*corev1.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live || v.nodes == nil {
		if err := v.refresh(ctx); err != nil {
			return nil, err
		}
	}
	return maps.Clone(v.nodes), nil
}

// current reports whether the view's watch delivers events (the view is up to date).
func (v *nodeView) current() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.live
}

// refresh lists the nodes again when the view is older than its interval; v.mu is held.
func (v *nodeView) refresh(ctx context.Context) error {
	every := v.interval
	if v.live {
		every = nodeWatchedInterval
	}
	if v.nodes == nil || time.Since(v.at) >= every {
		var list []corev1.Node
		err := v.first.withAPI(ctx, func(a *kube.API) (err error) {
			list, err = a.ListNodes(ctx)
			return err
		})
		v.at, v.err = time.Now(), err
		if err == nil {
			nodes := map[string]*corev1.Node{}
			for i := range list {
				n := &list[i]
				// A list that started before a watch event and ended after it is older
				// than what the watch delivered.
				if old := v.nodes[n.Name]; old != nil && newerVersion(old.ResourceVersion, n.ResourceVersion) {
					n = old
				}
				nodes[n.Name] = n
			}
			v.nodes = nodes
		}
	}
	return v.err
}

// newerVersion says whether resourceVersion a is newer than b. Resource versions are opaque
// in the Kubernetes API; K3s's (etcd's and kine's) are increasing integers, and anything else
// counts as not newer.
func newerVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// mark returns what wait waits on: take it before reading the view, so that a change between
// the read and the wait is not missed.
func (v *nodeView) mark() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// follow starts the watch once (it ends with close, or after watchFor).
func (v *nodeView) follow() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.watching {
		return
	}
	v.watching = true
	v.changed = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), v.watchFor)
	v.stop = cancel
	go v.watch(ctx)
}

// close ends the watch (safe to call when none runs).
func (v *nodeView) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stop != nil {
		v.stop()
	}
}

// watch applies the watch's events to the view until ctx ends; a watch that ends or fails is
// started again after a second (at most 5 failures in a row: the lists go on regardless).
func (v *nodeView) watch(ctx context.Context) {
	for fails := 0; ctx.Err() == nil && fails < 5; {
		left := time.Until(deadlineOr(ctx, time.Now().Add(v.watchFor)))
		err := v.first.withAPI(ctx, func(a *kube.API) error {
			return kube.WatchNodes(ctx, a, left, func(ev kube.NodeEvent) {
				v.mu.Lock()
				defer v.mu.Unlock()
				if v.nodes == nil {
					v.nodes = map[string]*corev1.Node{}
				}
				if ev.Type == "DELETED" {
					delete(v.nodes, ev.Node.Name)
				} else {
					n := ev.Node
					v.nodes[n.Name] = &n
				}
				v.live = true
				close(v.changed)
				v.changed = make(chan struct{})
			})
		})
		v.mu.Lock()
		v.live = false
		v.mu.Unlock()
		if err != nil {
			fails++
		} else {
			fails = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func deadlineOr(ctx context.Context, t time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return t
}

// wait returns after the watch delivered a change since mark, after the list interval, or when
// ctx ends (its error).
func (v *nodeView) wait(ctx context.Context, mark <-chan struct{}) error {
	v.mu.Lock()
	every := v.interval
	if v.live {
		every = nodeWatchedInterval
	}
	v.mu.Unlock()
	t := time.NewTimer(every)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-mark:
	case <-t.C:
	}
	return nil
}

// cniExcluded returns the hosts kernelPolicy exclude keeps out of the CNI: the verdict the
// preflight step printed, by host name (empty when preflight did not run).
func (s *session) cniExcluded() map[string]preflight.ExcludedHost {
	return s.pre.excluded
}
