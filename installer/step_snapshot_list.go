// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// snapshotListStep lists the snapshots on the first server (k3s etcd-snapshot ls).
//
// Reads: the first server. Writes: s.day2.snapshots.
type snapshotListStep struct{}

func (snapshotListStep) Phase() events.Phase { return events.PhaseSnapshotList }

func (snapshotListStep) Summary() string {
	return "list the etcd snapshots on the first server (k3s etcd-snapshot ls)"
}

func (snapshotListStep) Run(ctx context.Context, s *session) error {
	out, err := s.first.sh(ctx, "etcd-snapshot ls", snapshotListScript, "")
	if err != nil {
		return s.hostFailure(s.first, "list", KindInstall, err)
	}
	em := s.in.emitter(events.PhaseSnapshotList)
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 {
			continue
		}
		sn := Snapshot{Name: f[0], Location: f[1], Size: f[2], Created: f[3]}
		s.d2().snapshots = append(s.d2().snapshots, sn)
		em.Info(s.first.host.Name, fmt.Sprintf("%s  %s bytes  %s  %s", sn.Name, sn.Size, sn.Created, sn.Location))
	}
	s.first.setResult(events.StatusUnchanged, fmt.Sprintf("%d snapshots", len(s.d2().snapshots)))
	return nil
}
