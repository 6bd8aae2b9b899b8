// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// snapshotCopyStep copies the snapshot and the server token (restoring needs the token the
// snapshot was taken with) to the workstation: files 0600, checksums compared with the host's,
// and a NAME.sha256 file beside them.
//
// Reads: s.day2.backup, s.day2.saved. Writes: s.day2.local (files on the workstation).
type snapshotCopyStep struct{}

func (snapshotCopyStep) Phase() events.Phase { return events.PhaseSnapshotCopy }

func (snapshotCopyStep) Summary() string {
	return "with --to: copy the snapshot and the token to the workstation (0600, sha256 checked)"
}

func (snapshotCopyStep) Run(ctx context.Context, s *session) error {
	d := s.d2()
	if d.backup.To == "" || d.saved == "" {
		return nil
	}
	em := s.in.emitter(events.PhaseSnapshotCopy)
	if err := os.MkdirAll(d.backup.To, 0o700); err != nil {
		return &Failure{Kind: KindInstall, Phase: events.PhaseSnapshotCopy, Info: events.ErrorInfo{Message: err.Error(), Fix: "give --to a directory you can write"}}
	}
	name := path.Base(d.saved)
	var sums bytes.Buffer
	for _, f := range []struct{ remote, local string }{
		{d.saved, filepath.Join(d.backup.To, name)},
		{k3s.PathServerToken, filepath.Join(d.backup.To, name+".token")},
	} {
		data, err := s.first.c().Download(ctx, f.remote)
		if err != nil {
			return s.hostFailure(s.first, "copy", KindInstall, fmt.Errorf("copying %s: %w", f.remote, err))
		}
		out, err := s.first.sh(ctx, "sha256sum", sha256Script, "", f.remote)
		if err != nil {
			return s.hostFailure(s.first, "copy", KindInstall, err)
		}
		sum := sha256.Sum256(data)
		local := hex.EncodeToString(sum[:])
		if strings.TrimSpace(out) != local {
			return s.hostFailure(s.first, "copy", KindInstall, fmt.Errorf("%s: checksum of the copy differs from the host's (the file changed or the transfer broke); re-run", f.remote))
		}
		if err := writeFile0600(f.local, data); err != nil {
			return &Failure{Kind: KindInstall, Phase: events.PhaseSnapshotCopy, Info: events.ErrorInfo{Message: err.Error()}}
		}
		fmt.Fprintf(&sums, "%s  %s\n", local, filepath.Base(f.local))
		d.local = append(d.local, f.local)
	}
	sumFile := filepath.Join(d.backup.To, name+".sha256")
	if err := writeFile0600(sumFile, sums.Bytes()); err != nil {
		return &Failure{Kind: KindInstall, Phase: events.PhaseSnapshotCopy, Info: events.ErrorInfo{Message: err.Error()}}
	}
	em.Step(s.first.host.Name, "copy", events.StatusChanged, fmt.Sprintf("copied to %s (snapshot, token, sha256; mode 0600)", d.backup.To))
	return nil
}

// Preview says where the copy would go.
func (snapshotCopyStep) Preview(ctx context.Context, s *session) error {
	if to := s.d2().backup.To; to != "" {
		s.in.emitter(events.PhaseSnapshotCopy).Info(s.first.host.Name, "would copy the snapshot and the token to "+to+" (0600, sha256 checked)")
	}
	return ctx.Err()
}

// writeFile0600 writes data to p atomically with mode 0600.
func writeFile0600(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".k3strap-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}
