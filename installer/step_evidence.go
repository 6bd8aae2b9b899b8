// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
)

// evidenceStep gathers facts and evidence from every reachable host (doctor): one SSH command
// each (facts.DoctorNodeScript: K3s version and unit, restarts, journal, config files,
// subnet.env, certificate expiry, disk, memory, clock), and matches each host to its node.
//
// Reads: connections; s.doctor.view. Writes: s.doctor.nodes, s.doctor.nodeOf.
type evidenceStep struct{}

func (evidenceStep) Phase() events.Phase { return events.PhaseEvidence }

func (evidenceStep) Summary() string {
	return "gather facts and evidence from every node, one command each (K3s unit, restarts, journal, config, subnet.env, certificates, disk, memory, clock)"
}

func (evidenceStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseEvidence)
	em.Started(fmt.Sprintf("gathering evidence from %d hosts", len(s.hosts)))
	s.doctorEvidence(ctx, s.hosts)
	em.Finished(phaseOutcome(s.hosts, "read", func(hs *hostState) bool {
		ne := s.doctor.nodes[hs.host.Name]
		return ne != nil && ne.Err == ""
	}))
	return ctx.Err()
}

// doctorEvidence gathers hosts in parallel and matches them to nodes.
func (s *session) doctorEvidence(ctx context.Context, hosts []*hostState) {
	ds := s.doctor
	s.each(ctx, hosts, func(ctx context.Context, hs *hostState) { s.doctorGather(ctx, hs) })
	for _, hs := range hosts {
		ne := ds.nodes[hs.host.Name]
		if ne == nil {
			continue
		}
		ne.Node = ds.matchNode(hs, ne.Facts)
		ds.nodeOf[hs.host.Name] = ne.Node
		if ne.Err == "" {
			hs.setResultIfUnset(events.StatusOK, "evidence gathered")
		}
	}
}
