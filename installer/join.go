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

// joinAll brings further servers up one at a time (etcd quorum), then agents in parallel
// bounded by Concurrency. Every host's result is reported; a failure of one host does not
// stop the others, but makes the run fail listing them.
func (s *session) joinAll(ctx context.Context, first *hostState) error {
	var servers, agents []*hostState
	for _, hs := range s.hosts {
		if hs == first || hs.plan == nil {
			continue
		}
		if hs.host.Role == inventory.RoleServer {
			servers = append(servers, hs)
		} else {
			agents = append(agents, hs)
		}
	}
	if len(servers)+len(agents) == 0 {
		return nil
	}
	b, err := first.client.ReadFile(ctx, PathServerToken)
	if err != nil {
		return s.hostFailure(first, "token", ExitInstall, fmt.Errorf("reading the join token: %w", err))
	}
	token := inventory.Secret(strings.TrimSpace(string(b)))
	kc := &nodeView{kc: kube.Kubectl{R: first.client}, interval: 500 * time.Millisecond}
	em := s.in.emitter("join")
	var failed []string
	for _, hs := range servers {
		em.Step(hs.host.Name, "join", events.StatusRunning, "joining server "+hs.host.Name)
		if err := s.joinOne(ctx, hs, token, kc); err != nil {
			failed = append(failed, hs.host.Name)
			if ctx.Err() != nil {
				return err
			}
			// A server that did not join stops further server joins: quorum must not be risked.
			for _, rest := range servers {
				rest.setResultIfUnset(events.StatusSkipped, "not joined: server "+hs.host.Name+" failed first")
			}
			break
		}
	}
	var mu sync.Mutex
	s.each(ctx, agents, func(ctx context.Context, hs *hostState) {
		if err := s.joinOne(ctx, hs, token, kc); err != nil {
			mu.Lock()
			failed = append(failed, hs.host.Name)
			mu.Unlock()
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		return &Failure{Code: ExitInstall, Phase: "join", Info: events.ErrorInfo{
			Message: fmt.Sprintf("%d hosts did not join: %s", len(failed), strings.Join(failed, ", ")),
			Fix:     "see each host's error above",
			Resume:  "re-run `k3strap apply`: hosts that joined are left unchanged",
		}}
	}
	return nil
}

func (s *session) joinOne(ctx context.Context, hs *hostState, token inventory.Secret, kc *nodeView) error {
	hs.plan.SetToken(token, false)
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	if err := s.waitNode(ctx, hs, kc); err != nil {
		hs.setResult(events.StatusFailed, err.Error())
		s.in.emitter("join").Fail(hs.host.Name, "join", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap apply`"})
		return err
	}
	hs.setResult(res.status(), res.describe())
	return nil
}

// waitNode polls the node through the first server until it is Ready and carries its declared
// labels and taints (servers of an HA cluster: also the etcd role).
func (s *session) waitNode(ctx context.Context, hs *hostState, kc *nodeView) error {
	deadline := time.Now().Add(s.in.opts.Timeout)
	wantEtcd := hs.host.Role == inventory.RoleServer && len(s.in.cluster.Servers()) > 1
	lastWhy := "not registered yet"
	for {
		n, err := kc.get(ctx, hs.host.Name)
		if err == nil && n != nil {
			why := nodeNotDone(n, hs.host, wantEtcd)
			if why == "" {
				s.in.emitter("join").Step(hs.host.Name, "node", events.StatusOK, "node Ready")
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
	kc       kube.Kubectl
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
		list, err := v.kc.ListNodes(ctx)
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

// nodeNotDone says what the node still lacks, "" when it is done.
func nodeNotDone(n *corev1.Node, h *inventory.Host, wantEtcd bool) string {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "not Ready"
	}
	for k, v := range h.Labels {
		if n.Labels[k] != v {
			return fmt.Sprintf("label %s=%s missing", k, v)
		}
	}
	for _, t := range h.Taints {
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
