// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// restartAgentsStep restarts every agent (in parallel) and waits for its node; then the
// restore is recorded as done.
//
// Reads: s.day2.restoreID, restorePath. Writes: the first server's restore state (done).
type restartAgentsStep struct{}

func (restartAgentsStep) Phase() events.Phase { return events.PhaseRestartAgents }

func (restartAgentsStep) Summary() string {
	return "restart the agents and wait until their nodes are Ready; record the restore as done"
}

func (restartAgentsStep) Run(ctx context.Context, s *session) error {
	var mu sync.Mutex
	var firstErr error
	s.each(ctx, s.others(inventory.RoleAgent), func(ctx context.Context, hs *hostState) {
		if err := s.restartAndWait(ctx, hs, "restart", nil); err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	})
	if firstErr != nil {
		return firstErr
	}
	d := s.d2()
	if err := s.writeKV(ctx, s.first, k3s.PathRestoreState, map[string]string{"id": d.restoreID, "snapshot": d.restorePath, "reset": "1", "done": time.Now().UTC().Format(time.RFC3339)}); err != nil {
		return s.hostFailure(s.first, "restore state", KindInstall, err)
	}
	return nil
}

// Preview names the agents that would restart.
func (restartAgentsStep) Preview(ctx context.Context, s *session) error {
	for _, hs := range s.others(inventory.RoleAgent) {
		s.in.emitter(events.PhaseRestartAgents).Info(hs.host.Name, "would restart K3s")
	}
	return ctx.Err()
}
