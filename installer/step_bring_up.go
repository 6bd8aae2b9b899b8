// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
)

// bringUpStep waits until the first server's supervisor (started by the supervise step) saw
// every milestone, including the first node's own subnet.env and Ready; after an upgrade it
// waits for the node on the new version and uncordons it (the supervise step already did,
// before any other server was touched).
//
// Reads: s.boot.bringUp, s.boot.firstResult, s.boot.firstDrained. Writes: the first server's host
// result.
type bringUpStep struct{}

func (bringUpStep) Phase() events.Phase { return events.PhaseBringUp }

func (bringUpStep) Summary() string {
	return "wait until the first server reached every milestone (subnet.env, Ready); uncordon it after an upgrade"
}

func (bringUpStep) Run(ctx context.Context, s *session) error {
	return s.firstUp(ctx)
}

// Preview says what would be waited for.
func (bringUpStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseBringUp).Info(s.first.host.Name, fmt.Sprintf("would wait until %s reached every milestone", s.first.host.Name))
	return ctx.Err()
}

// firstUp waits for the first server's supervisor to finish and, once, completes its result:
// after an upgrade the node must be Ready on the new version, and is uncordoned when it was
// drained. It returns the supervisor's failure, if any.
func (s *session) firstUp(ctx context.Context) error {
	bu := s.boot.bringUp
	select {
	case <-bu.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if bu.err != nil {
		return bu.err
	}
	if bu.finished {
		return nil
	}
	bu.finished = true
	hs, res := s.first, s.boot.firstResult
	if s.upgrading(hs) {
		if err := s.waitNode(ctx, hs, s.nodeView(), s.in.cluster.Spec.K3s.Version, res); err != nil {
			return s.hostFailure(hs, "upgrade", KindBringUp, err)
		}
		if s.boot.firstDrained {
			if err := s.uncordon(ctx, hs, hs); err != nil {
				return err
			}
		}
		res.upgradedFrom = hs.facts.K3s.BinaryVersion
	}
	hs.setResult(res.status(), res.describe())
	return nil
}
