package installer

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
	kc := kube.Kubectl{R: first.client}
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
				if rest.status == "" {
					rest.setResult(events.StatusSkipped, "not joined: server "+hs.host.Name+" failed first")
				}
			}
			break
		}
	}
	s.each(ctx, agents, func(ctx context.Context, hs *hostState) {
		if err := s.joinOne(ctx, hs, token, kc); err != nil {
			failed = append(failed, hs.host.Name)
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

func (s *session) joinOne(ctx context.Context, hs *hostState, token inventory.Secret, kc kube.Kubectl) error {
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
func (s *session) waitNode(ctx context.Context, hs *hostState, kc kube.Kubectl) error {
	deadline := time.Now().Add(s.in.opts.Timeout)
	wantEtcd := hs.host.Role == inventory.RoleServer && len(s.in.cluster.Servers()) > 1
	lastWhy := "not registered yet"
	for {
		n, err := kc.GetNode(ctx, hs.host.Name)
		if err == nil {
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
