// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// rejoinServersStep moves each other server's datastore aside and starts it, one at a time,
// waiting until it is Ready and an etcd member again.
//
// Reads: s.day2.restoreID. Writes: each server's restore-done record.
type rejoinServersStep struct{}

func (rejoinServersStep) Phase() events.Phase { return events.PhaseRejoinServers }

func (rejoinServersStep) Summary() string {
	return "other servers one at a time: move " + k3s.DirDB + " aside, start, wait until Ready and an etcd member"
}

func (rejoinServersStep) Run(ctx context.Context, s *session) error {
	d := s.d2()
	em := s.in.emitter(events.PhaseRejoinServers)
	for _, hs := range s.others(inventory.RoleServer) {
		if s.rejoined(ctx, hs) {
			em.Step(hs.host.Name, "rejoin", events.StatusUnchanged, "already rejoined (resumed run)")
			continue
		}
		aside := k3s.DirDB + "-k3strap-restore-" + d.restoreID
		_, err := hs.sh(ctx, "move db aside", moveDBAsideScript, "", k3s.DirDB, aside, k3s.Unit(string(hs.host.Role)))
		if err != nil {
			return s.hostFailure(hs, "move db aside", KindInstall, err)
		}
		em.Step(hs.host.Name, "db", events.StatusChanged, "etcd data moved to "+aside)
		if err := s.restartAndWait(ctx, hs, "rejoin", nil); err != nil {
			return err
		}
		if err := s.writeKV(ctx, hs, k3s.PathRestoreDone, map[string]string{"id": d.restoreID}); err != nil {
			return s.hostFailure(hs, "restore state", KindInstall, err)
		}
	}
	return nil
}

// Preview names the servers that would rejoin.
func (rejoinServersStep) Preview(ctx context.Context, s *session) error {
	for _, hs := range s.others(inventory.RoleServer) {
		s.in.emitter(events.PhaseRejoinServers).Info(hs.host.Name, "would move "+k3s.DirDB+" aside and rejoin")
	}
	return ctx.Err()
}
