// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// joinAgentsStep brings the agents up in parallel (bounded by --concurrency), each converged
// with the join token and waited for until Ready with its labels and taints; agents whose K3s
// version changes go in batches of --upgrade-batch percent, each drained and uncordoned. One
// agent failing does not stop the others; the step then fails naming every agent to look at.
// Hosts that could not be planned (unreachable with the SSH check ignored) are named too.
//
// Reads: s.join.token, s.join.notJoined, agents' plan, facts, staging. Writes: host results.
type joinAgentsStep struct{}

func (joinAgentsStep) Phase() events.Phase { return events.PhaseJoinAgents }

func (joinAgentsStep) Summary() string {
	return "join agents in parallel (upgrades in batches, drained and uncordoned); each Ready with its labels and taints"
}

func (joinAgentsStep) Run(ctx context.Context, s *session) error {
	failed := append([]string(nil), s.join.notJoined...)
	for _, hs := range s.hosts {
		if hs.plan == nil && hs != s.first {
			failed = append(failed, hs.host.Name)
		}
	}
	var agents, upgrades []*hostState
	for _, hs := range s.joining(inventory.RoleAgent) {
		if s.upgrading(hs) {
			upgrades = append(upgrades, hs)
		} else {
			agents = append(agents, hs)
		}
	}
	if len(agents)+len(upgrades) == 0 {
		return joinFailure(events.PhaseJoinAgents, failed)
	}
	if err := s.joinToken(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	join := func(ctx context.Context, hs *hostState) {
		if err := s.joinOne(ctx, s.first, hs); err != nil {
			mu.Lock()
			failed = append(failed, hs.host.Name)
			mu.Unlock()
		}
	}
	s.each(ctx, agents, join)
	if n := len(upgrades); n > 0 {
		size := max(1, n*s.in.opts.UpgradeBatchPercent/100)
		em := s.in.emitter(events.PhaseJoinAgents)
		for i := 0; i < n && ctx.Err() == nil; i += size {
			batch := upgrades[i:min(n, i+size)]
			var names []string
			for _, hs := range batch {
				names = append(names, hs.host.Name)
			}
			em.Info("", fmt.Sprintf("upgrading agents %s (batch %d of %d)", strings.Join(names, ", "), i/size+1, (n+size-1)/size))
			s.each(ctx, batch, join)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return joinFailure(events.PhaseJoinAgents, failed)
}

// Preview reports what joining each agent would change.
func (joinAgentsStep) Preview(ctx context.Context, s *session) error {
	return s.previewJoins(ctx, s.joining(inventory.RoleAgent))
}
