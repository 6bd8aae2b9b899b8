// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/lock"
	"github.com/k3strap/k3strap/k3s"
)

// lockStep takes the cluster's run lock on the first server (refreshed in the background and
// released when the session closes), so that no two k3strap runs change the cluster at once.
//
// Reads: the first server's connection. Writes: the held lock, released by s.onClose.
type lockStep struct{}

func (lockStep) Phase() events.Phase { return events.PhaseLock }

func (lockStep) Summary() string {
	return "take the cluster run lock on the first server (held and refreshed until the run ends)"
}

func (lockStep) Run(ctx context.Context, s *session) error {
	if s.first.c() == nil {
		return s.hostFailure(s.first, "connect", KindInstall, fmt.Errorf("the first server is unreachable: %w", s.first.connErr))
	}
	lk, err := s.lock(ctx, s.first, s.command)
	if err != nil {
		return err
	}
	s.onClose(lk.Release)
	return nil
}

// Preview says which lock the run would take.
func (lockStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseLock).Info(s.first.host.Name, fmt.Sprintf("would take the cluster lock %s on %s for the run", k3s.PathLock, s.first.host.Name))
	return ctx.Err()
}

// lock takes the run lock on the first server (lock.Try), or fails naming who holds it. The
// lock is refreshed in the background until it is released.
func (s *session) lock(ctx context.Context, first *hostState, command string) (*lock.Held, error) {
	at, err := lock.Try(ctx, first.c(), command)
	if err != nil {
		return nil, s.hostFailure(first, "lock", KindInstall, err)
	}
	switch {
	case at.TookOver:
		s.in.emitter(events.PhaseLock).Warn(first.host.Name, fmt.Sprintf("took over a stale lock (%s s old) of %s", at.Age, at.Holder))
	case !at.Acquired:
		first.setResult(events.StatusFailed, "locked by "+at.Holder)
		return nil, &Failure{Kind: KindInstall, Phase: events.PhaseLock, Host: first.host.Name, Info: events.ErrorInfo{
			Message: fmt.Sprintf("another k3strap run holds the cluster lock on %s: %s (refreshed %s s ago)", first.host.Name, at.Holder, at.Age),
			Fix:     fmt.Sprintf("wait for it to finish; a lock not refreshed for %s, or whose run is gone from this machine, is taken over automatically (or remove %s on %s if you are sure)", lock.TTL, k3s.PathLock, first.host.Name),
			Resume:  "re-run the same command",
		}}
	}
	return lock.Hold(ctx, first.c, at), nil
}
