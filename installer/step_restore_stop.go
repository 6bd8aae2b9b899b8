// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// restoreStopStep stops K3s on every server that still has to be restored or rejoined.
//
// Reads: s.day2.resetDone, restoreID. Writes: stops K3s on the servers.
type restoreStopStep struct{}

func (restoreStopStep) Phase() events.Phase { return events.PhaseRestoreStop }

func (restoreStopStep) Summary() string {
	return "stop K3s on every server not yet restored or rejoined"
}

func (restoreStopStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRestoreStop)
	for _, hs := range append([]*hostState{s.first}, s.others(inventory.RoleServer)...) {
		if (hs == s.first && s.d2().resetDone) || (hs != s.first && s.rejoined(ctx, hs)) {
			em.Step(hs.host.Name, "stop", events.StatusUnchanged, "already restored (resumed run)")
			continue
		}
		if _, err := hs.systemctl(ctx, "stop"); err != nil {
			return s.hostFailure(hs, "stop", KindInstall, err)
		}
		em.Step(hs.host.Name, "stop", events.StatusChanged, "K3s stopped")
	}
	return nil
}

// Preview names the servers that would be stopped.
func (restoreStopStep) Preview(ctx context.Context, s *session) error {
	for _, hs := range append([]*hostState{s.first}, s.others(inventory.RoleServer)...) {
		s.in.emitter(events.PhaseRestoreStop).Info(hs.host.Name, "would stop K3s")
	}
	return ctx.Err()
}
