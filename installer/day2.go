// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

// Day two: etcd snapshots and restore, removing and replacing nodes, rotating
// certificates and the token. Each is a command of the step engine (commandFor → day2Command),
// with the same output modes, dry-run and exit codes as apply. docs/day2.md describes them.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// snapshotName is the name K3s gives the snapshot before -<node>-<unix time>: Name, else
// K3s's default "on-demand" (docs.k3s.io "etcd-snapshot").
func (b BackupRequest) snapshotName() string {
	if b.Name == "" {
		return "on-demand"
	}
	return b.Name
}

// day2State is what the day-two steps of one run share.
type day2State struct {
	backup   BackupRequest
	snapshot string // restore: NAME or PATH as given
	remove   []string
	newToken inventory.Secret

	// saved is the path of the snapshot the backup step saved on the first server.
	saved string
	// local are the files the backup copied to the workstation.
	local     []string
	snapshots []Snapshot
	// restore: its id and the snapshot's path on the first server, whether the first server
	// was already reset (resumed run).
	restoreID, restorePath string
	resetDone              bool
}

func (s *session) d2() *day2State {
	if s.day2 == nil {
		s.day2 = &day2State{}
	}
	return s.day2
}

// restartAndWait stops hs's K3s, runs mid when given (e.g. certificate rotate, which needs K3s
// stopped), starts it and waits for its node as bring-up does: Ready from a heartbeat of this
// start, labels, taints and (servers of an HA cluster) etcd membership. The stop is waited for
// before the start, so that no heartbeat of the old process passes for one of the new.
func (s *session) restartAndWait(ctx context.Context, hs *hostState, what string, mid func() error) error {
	em := s.in.emitter(s.current)
	em.Step(hs.host.Name, what, events.StatusRunning, "")
	var at time.Time
	_, err := hs.systemctl(ctx, "stop")
	if err == nil && mid != nil {
		err = mid()
	}
	if err == nil {
		at, err = hs.systemctl(ctx, "start")
	}
	if err != nil {
		return s.hostFailure(hs, what, KindInstall, err)
	}
	if err := s.waitNode(ctx, hs, s.nodeView(), "", convergeResult{started: at, restarted: true}); err != nil {
		return s.hostFailure(hs, what, KindInstall, err)
	}
	hs.setResult(events.StatusChanged, what+": done, node Ready")
	em.Step(hs.host.Name, what, events.StatusChanged, "restarted, node Ready")
	return nil
}

// newSecretHex returns n random bytes as hex.
func newSecretHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// remoteReset uninstalls K3s on a host (scripts/reset.sh).
func remoteReset() remote.Cmd {
	return remote.Script("reset", resetScript).AsRoot().WithTimeout(resetTimeout)
}
