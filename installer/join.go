package installer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
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
// when its K3s version changes).
func (s *session) joinOne(ctx context.Context, first, hs *hostState) error {
	if hs.staged != nil {
		select {
		case <-hs.staged:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	hs.plan.SetToken(s.token, false)
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
	if err := s.waitNode(ctx, hs, view, want, res); err != nil {
		hs.setResult(events.StatusFailed, err.Error())
		s.in.emitter(s.current).Fail(hs.host.Name, "join", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap apply`"})
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
	hs.setResult(res.status(), res.describe())
	return nil
}

// drain cordons and drains hs's node through the first server before an upgrade (unless
// NoDrain). A node that does not exist yet needs nothing.
func (s *session) drain(ctx context.Context, first, hs *hostState) error {
	em := s.in.emitter(events.PhaseUpgrade)
	if s.in.opts.NoDrain {
		em.Step(hs.host.Name, "drain", events.StatusSkipped, "--no-drain")
		return nil
	}
	kc := kube.Kubectl{R: first.c()}
	_, err := kc.Run(ctx, nil, "drain", hs.host.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=300s")
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil
		}
		return s.hostFailure(hs, "drain", KindInstall, fmt.Errorf("draining before the upgrade: %w (use --no-drain to skip)", err))
	}
	em.Step(hs.host.Name, "drain", events.StatusOK, "cordoned and drained for the upgrade to "+s.in.cluster.Spec.K3s.Version)
	return nil
}

// uncordon makes hs's node schedulable again after its upgrade.
func (s *session) uncordon(ctx context.Context, first, hs *hostState) error {
	kc := kube.Kubectl{R: first.c()}
	if _, err := kc.Run(ctx, nil, "uncordon", hs.host.Name); err != nil {
		return s.hostFailure(hs, "uncordon", KindInstall, err)
	}
	s.in.emitter(events.PhaseUpgrade).Step(hs.host.Name, "uncordon", events.StatusOK, "Ready on "+s.in.cluster.Spec.K3s.Version+", uncordoned")
	return nil
}

// waitNode polls the node through the first server until it is Ready, carries its declared
// labels and taints, runs version (when not ""), and — for servers of an HA cluster — is an
// etcd member.
//
// After a (re)start (res.started set) the node counts as Ready only once a kubelet of this
// start posted it: its Ready condition's heartbeat is no older than the start (host clock,
// from the measured clock skew, 2 s tolerance) — a Node Ready from before is not an answer.
func (s *session) waitNode(ctx context.Context, hs *hostState, kc *nodeView, version string, res convergeResult) error {
	var since time.Time
	if !res.started.IsZero() {
		since = res.started.Add(hs.facts.ClockSkew).Add(-2 * time.Second)
	}
	deadline := time.Now().Add(s.in.opts.Timeout)
	wantEtcd := hs.host.EtcdMember() && len(s.in.cluster.Servers()) > 1
	// A host kept out of the CNI (kernelPolicy exclude) has no pod network on a cluster
	// whose CNI k3strap deploys: its node may stay NotReady, so registering is enough.
	_, excluded := s.cniExcluded()[hs.host.Name]
	lastWhy := "not registered yet"
	for {
		n, err := kc.get(ctx, hs.host.Name)
		if err == nil && n != nil && excluded {
			s.in.emitter(s.current).Step(hs.host.Name, "node", events.StatusOK, "node registered (excluded from the CNI: Ready not required)")
			return nil
		}
		if err == nil && n != nil {
			// Labels and taints are K3s's to set at registration: required of a node this run
			// created; drift on an existing node is the reconcile step's (node-taint alone
			// never changes a registered node, docs/failure-modes.md F5).
			why := nodeNotDone(n, hs.host, wantEtcd, version, !hs.facts.K3s.Installed(), since)
			if why == "" {
				s.in.emitter(s.current).Step(hs.host.Name, "node", events.StatusOK, "node Ready"+map[bool]string{true: " on " + version, false: ""}[version != ""])
				return nil
			}
			lastWhy = why
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready after %s: %s (see `journalctl -u %s` on the host)", hs.host.Name, s.in.opts.Timeout, lastWhy, hs.plan.Service)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodeView shares one `kubectl get nodes` among every host waiting for its node: at most one
// list per interval whatever the number of waiters, so 500 agents cost one SSH channel on the
// first server per interval, not 500.
type nodeView struct {
	// first is the first server, read through its current connection (a retry may replace it).
	first    *hostState
	interval time.Duration

	mu    sync.Mutex
	at    time.Time
	nodes map[string]*corev1.Node
	err   error
}

// get returns the node named name as of the last list (refreshed when older than interval);
// nil when it is not registered.
func (v *nodeView) get(ctx context.Context, name string) (*corev1.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nodes == nil || time.Since(v.at) >= v.interval {
		list, err := kube.Kubectl{R: v.first.c()}.ListNodes(ctx)
		v.at, v.err = time.Now(), err
		if err == nil {
			v.nodes = map[string]*corev1.Node{}
			for i := range list {
				v.nodes[list[i].Name] = &list[i]
			}
		}
	}
	if v.err != nil {
		return nil, v.err
	}
	return v.nodes[name], nil
}

// nodeNotDone says what the node still lacks, "" when it is done. since (host clock) is the
// earliest Ready heartbeat that counts; zero accepts any.
func nodeNotDone(n *corev1.Node, h *inventory.Host, wantEtcd bool, version string, declared bool, since time.Time) string {
	ready, stale := false, false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
			stale = !since.IsZero() && c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second))
		}
	}
	if !ready {
		return "not Ready"
	}
	if stale {
		return "Ready only from before the restart (no heartbeat since)"
	}
	if version != "" && n.Status.NodeInfo.KubeletVersion != version {
		return fmt.Sprintf("still on %s, not %s", n.Status.NodeInfo.KubeletVersion, version)
	}
	for k, v := range h.Labels {
		if !declared {
			break
		}
		if n.Labels[k] != v {
			return fmt.Sprintf("label %s=%s missing", k, v)
		}
	}
	for _, t := range h.Taints {
		if !declared {
			break
		}
		found := false
		for _, nt := range n.Spec.Taints {
			if nt.Key == t.Key && nt.Value == t.Value && nt.Effect == t.Effect {
				found = true
			}
		}
		if !found {
			return "taint " + t.String() + " missing"
		}
	}
	if wantEtcd && n.Labels["node-role.kubernetes.io/etcd"] != "true" {
		return "not an etcd member yet"
	}
	return ""
}
