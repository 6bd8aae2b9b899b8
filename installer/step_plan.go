// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/preflight"
)

// planStep builds every reachable host's plan, once: the files it should hold (config.yaml,
// token file, install script, airgap artifacts with verified checksums, the first server's
// add-on manifests), the install environment and the service. Preflight judges these plans
// and every later step writes exactly them. It also reads the release inside each airgap
// binary (AirgapRelease). A host whose plan cannot be built keeps the
// error; the preflight step reports it after the findings.
//
// Reads: hostState.facts; the inventory. Writes: hostState.plan (or planErr); s.pre.binaryReleases.
type planStep struct{}

func (planStep) Phase() events.Phase { return events.PhasePlan }

func (planStep) Summary() string {
	return "build each host's plan once: config.yaml, token file, artifacts (checksums verified), manifests, install environment"
}

func (planStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhasePlan)
	em.Started("planning every host")
	// The release inside each airgap binary, for preflight's AirgapRelease check: a binary of
	// another release than spec.k3s.version is refused before anything is installed.
	s.pre.binaryReleases = preflight.ReadBinaryReleases(s.in.cluster)
	for _, hs := range s.hosts {
		if hs.facts == nil {
			continue // unreachable: preflight's SSH check reports it
		}
		p, err := s.planner.PlanHost(hs.host, hs.facts)
		if err != nil {
			hs.planErr = err
			em.Step(hs.host.Name, "plan", events.StatusFailed, err.Error())
			continue
		}
		hs.plan = p
	}
	em.Finished(events.StatusOK, "")
	return ctx.Err()
}
