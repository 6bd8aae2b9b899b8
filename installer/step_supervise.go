package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
)

// superviseStep follows the first server's bring-up from the (re)start the first-server step
// made until every milestone is reached (service active, API ready, node registered,
// uninitialized taint gone, PodCIDR, subnet.env, Ready), diagnosing a stall (F1, crash loop,
// timeout) with evidence. After an upgrade it waits for the node on the new version and
// uncordons it.
type superviseStep struct{}

func (superviseStep) Phase() events.Phase { return events.PhaseSupervise }

func (superviseStep) Summary() string {
	return "supervise the first server's bring-up to every milestone; diagnose F1, crash loops and timeouts"
}

func (superviseStep) Run(ctx context.Context, s *session) error {
	hs := s.first
	res := s.firstResult
	sup := &supervisor{s: s, hs: hs, em: s.in.emitter(events.PhaseSupervise)}
	if err := sup.run(ctx, res); err != nil {
		hs.setResult(events.StatusFailed, "bring-up: "+firstLine(err))
		return err
	}
	if s.upgrading(hs) {
		if err := s.waitNode(ctx, hs, s.nodeView(), s.in.cluster.Spec.K3s.Version); err != nil {
			return s.hostFailure(hs, "upgrade", KindBringUp, err)
		}
		if s.firstDrained {
			if err := s.uncordon(ctx, hs, hs); err != nil {
				return err
			}
		}
		res.upgradedFrom = hs.facts.K3s.BinaryVersion
	}
	hs.setResult(res.status(), res.describe())
	return nil
}
