// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// clusterResetStep runs `k3s server --cluster-reset --cluster-reset-restore-path` on the first
// server (once per restore) and starts it; the supervise and bring-up steps follow its start.
//
// Reads: s.day2.restorePath, restoreID, resetDone. Writes: s.boot.firstResult (what supervise
// follows).
type clusterResetStep struct{}

func (clusterResetStep) Phase() events.Phase { return events.PhaseClusterReset }

func (clusterResetStep) Summary() string {
	return "on the first server: k3s server --cluster-reset --cluster-reset-restore-path=SNAPSHOT, then start it"
}

func (clusterResetStep) Run(ctx context.Context, s *session) error {
	d := s.d2()
	hs := s.first
	em := s.in.emitter(events.PhaseClusterReset)
	if !d.resetDone {
		em.Step(hs.host.Name, "cluster-reset", events.StatusRunning, "k3s server --cluster-reset --cluster-reset-restore-path="+d.restorePath)
		_, err := hs.shWithin(ctx, etcdTimeout, "cluster-reset", clusterResetScript, "", d.restorePath)
		if err != nil {
			return s.hostFailure(hs, "cluster-reset", KindInstall, err)
		}
		if err := s.writeKV(ctx, hs, k3s.PathRestoreState, map[string]string{"id": d.restoreID, "snapshot": d.restorePath, "reset": "1"}); err != nil {
			return s.hostFailure(hs, "restore state", KindInstall, err)
		}
		em.Step(hs.host.Name, "cluster-reset", events.StatusChanged, "etcd restored from the snapshot, membership reset to this server")
	}
	if d.resetDone && hs.serviceActive(ctx) {
		s.boot.firstResult = convergeResult{}
		return nil
	}
	at, err := hs.systemctl(ctx, "start")
	if err != nil {
		return s.hostFailure(hs, "start", KindInstall, err)
	}
	s.boot.firstResult = convergeResult{restarted: true, verb: "start", started: at}
	return nil
}

// Preview says what would run.
func (clusterResetStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseClusterReset).Info(s.first.host.Name, "would run k3s server --cluster-reset --cluster-reset-restore-path="+s.d2().snapshot+" and start K3s")
	return ctx.Err()
}
