// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// joinServersStep brings the further servers up one at a time (etcd quorum), once the first
// server's uninitialized taint is gone (the strict join gate, docs/k3s.md "Join gates"): each converged
// with the join token and waited for until Ready, carrying its labels and taints and an etcd
// member, before the next starts. A server that does not join stops further server joins;
// the agents still join, and the join-agents step fails naming it.
//
// Reads: s.boot.bringUp (gate passed), joining servers' plan and facts. Writes: s.join.token,
// s.join.notJoined, host results.
type joinServersStep struct{}

func (joinServersStep) Phase() events.Phase { return events.PhaseJoinServers }

func (joinServersStep) Summary() string {
	return "join further servers one at a time (etcd quorum): each Ready and an etcd member before the next"
}

func (joinServersStep) Run(ctx context.Context, s *session) error {
	servers := s.joining(inventory.RoleServer)
	if len(servers) == 0 {
		return nil
	}
	// Servers wait for the strict gate: the first server's node exists and its uninitialized
	// taint is gone (the supervise step may have returned earlier, for agents).
	if s.boot.bringUp != nil {
		if err := s.waitGate(ctx, s.boot.bringUp.gate); err != nil {
			return err
		}
	}
	if err := s.joinToken(ctx); err != nil {
		return err
	}
	em := s.in.emitter(events.PhaseJoinServers)
	for _, hs := range servers {
		em.Step(hs.host.Name, "join", events.StatusRunning, "server "+hs.host.Name+": one at a time")
		if err := s.joinOne(ctx, s.first, hs); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A server that did not join stops further server joins: quorum must not be risked.
			for _, rest := range servers {
				rest.setResultIfUnset(events.StatusSkipped, "not joined: server "+hs.host.Name+" failed first")
			}
			s.join.notJoined = append(s.join.notJoined, hs.host.Name)
			return nil
		}
	}
	return nil
}

// Preview reports what joining each further server would change.
func (joinServersStep) Preview(ctx context.Context, s *session) error {
	return s.previewJoins(ctx, s.joining(inventory.RoleServer))
}

// joining returns the hosts of role that join the first server in this run (planned, not
// the first server), in inventory order.
func (s *session) joining(role inventory.Role) []*hostState {
	var out []*hostState
	for _, hs := range s.hosts {
		if hs != s.first && hs.plan != nil && hs.host.Role == role {
			out = append(out, hs)
		}
	}
	return out
}

// joinToken reads the join token from the first server, once per run.
func (s *session) joinToken(ctx context.Context) error {
	if s.join.token != "" {
		return nil
	}
	b, err := s.first.c().ReadFile(ctx, k3s.PathServerToken)
	if err != nil {
		return s.hostFailure(s.first, "token", KindInstall, fmt.Errorf("reading the join token: %w", err))
	}
	s.join.token = inventory.Secret(strings.TrimSpace(string(b)))
	return nil
}

// previewJoins reports what converging each joining host would change. Its token is the one
// on the first server, or a placeholder when the first server does not exist yet.
func (s *session) previewJoins(ctx context.Context, hosts []*hostState) error {
	if len(hosts) == 0 {
		return nil
	}
	token := inventory.Secret("(the first server's new token)")
	if s.first.facts != nil && s.first.facts.K3s.TokenPresent {
		if err := s.joinToken(ctx); err != nil {
			return err
		}
		token = s.join.token
	}
	for _, hs := range hosts {
		hs.plan.SetToken(token, false)
		if _, err := s.converge(ctx, hs); err != nil {
			return err
		}
	}
	return nil
}
