// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/installer/remote/transcript"
)

// recordTranscript wraps hs's new connection c in a transcript recorder appending to
// <Options.HostTranscripts>/<host>.jsonl (a reconnect appends a new hello). The file is
// closed with the connection. An unwritable directory fails the connection with the path.
func (s *session) recordTranscript(hs *hostState, c remote.Host) (remote.Host, error) {
	dir := s.in.opts.HostTranscripts
	if err := os.MkdirAll(dir, 0o700); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("host transcripts: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, hs.host.Name+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("host transcripts: %w", err)
	}
	return transcript.NewRecorder(c, f), nil
}
