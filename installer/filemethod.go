// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// fileMethodTimeout bounds deciding how files reach one host (starting SFTP, and on a host
// whose SFTP channel ended unanswered, one command that tells a missing sftp-server from a
// broken link).
const fileMethodTimeout = 30 * time.Second

// reportFileMethods decides, for every reachable host, how files reach it — SFTP, or on a host
// without an SFTP subsystem (Dropbear, BusyBox, OpenSSH hardened without `Subsystem sftp`)
// streamed over SSH sessions (remote.FileMethodSession) — and says so in one info line per host
// in the preflight phase: "file transfer: sftp" or "file transfer: session (...)". The decision
// is the connection's (made once, remembered); a host where it cannot be made now (a link
// failure) gets a debug line and its first upload reports the failure as usual.
func (s *session) reportFileMethods(ctx context.Context) {
	em := s.in.emitter(events.PhasePreflight)
	s.each(ctx, s.reachable(), func(ctx context.Context, hs *hostState) {
		ctx, cancel := context.WithTimeout(ctx, fileMethodTimeout)
		defer cancel()
		m, err := hs.c().FileMethod(ctx)
		switch {
		case err != nil:
			em.Debug(hs.host.Name, fmt.Sprintf("file transfer method not decided: %v", err))
		case m == remote.FileMethodLocal:
			em.Info(hs.host.Name, "file transfer: local (local mode: files written in place)")
		case m == remote.FileMethodSession:
			em.Info(hs.host.Name, "file transfer: session (the host offers no SFTP subsystem; uploads stream over SSH sessions, resumable and sha256-checked)")
		default:
			em.Info(hs.host.Name, "file transfer: sftp")
		}
	})
}
