package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// lockStep takes the cluster's run lock on the first server (refreshed in the background and
// released when the session closes), so that no two k3strap runs change the cluster at once.
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
	s.onClose(lk.unlock)
	return nil
}

// Preview says which lock the run would take.
func (lockStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseLock).Info(s.first.host.Name, fmt.Sprintf("would take the cluster lock %s on %s for the run", k3s.PathLock, s.first.host.Name))
	return ctx.Err()
}
