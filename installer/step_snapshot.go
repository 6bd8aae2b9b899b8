// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

var savedRE = regexp.MustCompile(`Snapshot (\S+) saved`)

// snapshotDir is the snapshot directory on the first server: the inventory's
// etcd-snapshot-dir, else K3s's default.
func (s *session) snapshotDir() string {
	if s.first != nil {
		cfg := s.in.cluster.HostConfig(s.first.host)
		if d, ok := cfg.Extra["etcd-snapshot-dir"].(string); ok && d != "" {
			return d
		}
	}
	return k3s.DirSnapshots
}

// snapshotStep saves an etcd snapshot on the first server.
//
// Reads: s.day2.backup. Writes: s.day2.saved.
type snapshotStep struct{}

func (snapshotStep) Phase() events.Phase { return events.PhaseSnapshot }

func (snapshotStep) Summary() string {
	return "save an etcd snapshot on the first server (k3s etcd-snapshot save)"
}

func (snapshotStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseSnapshot)
	em.Step(s.first.host.Name, "snapshot", events.StatusRunning, "k3s etcd-snapshot save")
	out, err := s.first.shWithin(ctx, etcdTimeout, "etcd-snapshot save", snapshotSaveScript, "", s.d2().backup.Name)
	if err != nil {
		return s.hostFailure(s.first, "snapshot", KindInstall, fmt.Errorf("k3s etcd-snapshot save: %s", k3s.Mask(err.Error())))
	}
	m := savedRE.FindStringSubmatch(out)
	if m == nil {
		return s.hostFailure(s.first, "snapshot", KindInstall, fmt.Errorf("k3s etcd-snapshot save did not name the snapshot: %s", k3s.Mask(strings.TrimSpace(out))))
	}
	s.d2().saved = path.Join(s.snapshotDir(), m[1])
	s.first.setResult(events.StatusChanged, "snapshot "+m[1]+" saved")
	em.Step(s.first.host.Name, "snapshot", events.StatusChanged, "snapshot saved: "+s.d2().saved)
	return nil
}

// restoreCommands are the commands that restore the snapshot this backup saved (file is the
// inventory): by its full name on the first server and, with --to, from the copy on this
// machine. A name given to backup restores too (the newest snapshot of that name), which the
// comment says.
func (d *day2State) restoreCommands(file string) []string {
	name := path.Base(d.saved)
	out := []string{shellescape.QuoteCommand([]string{"k3strap", "restore", "-f", file, "--snapshot", name}) +
		"   # or --snapshot " + shellescape.Quote(d.backup.snapshotName()) + ": the newest snapshot of that name"}
	if len(d.local) > 0 {
		local := d.local[0]
		if abs, err := filepath.Abs(local); err == nil {
			local = abs
		}
		out = append(out, shellescape.QuoteCommand([]string{"k3strap", "restore", "-f", file, "--snapshot", local})+
			"   # from the copy on this machine (uploaded to the first server)")
	}
	return out
}

// Preview says what would be saved.
func (snapshotStep) Preview(ctx context.Context, s *session) error {
	name := s.d2().backup.snapshotName()
	s.in.emitter(events.PhaseSnapshot).Info(s.first.host.Name, fmt.Sprintf("would run `k3s etcd-snapshot save` (%s-%s-<time> in %s)", name, s.first.host.Name, s.snapshotDir()))
	return ctx.Err()
}
