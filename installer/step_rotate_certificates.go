// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
)

// rotateCertificatesStep runs `k3s certificate rotate` with K3s stopped on every node (servers one
// at a time, then agents), each restarted and checked as a bring-up.
//
// Reads: connections. Writes: host results.
type rotateCertificatesStep struct{}

func (rotateCertificatesStep) Phase() events.Phase { return events.PhaseRotateCertificates }

func (rotateCertificatesStep) Summary() string {
	return "k3s certificate rotate with K3s stopped: servers one at a time, then agents; each Ready again before the next"
}

func (rotateCertificatesStep) Run(ctx context.Context, s *session) error {
	return s.rotateEach(ctx, func(ctx context.Context, hs *hostState) error {
		return s.restartAndWait(ctx, hs, "rotate", func() error {
			_, err := hs.sh(ctx, "certificate rotate", certRotateScript, "")
			return err
		})
	})
}

// Preview names the order.
func (rotateCertificatesStep) Preview(ctx context.Context, s *session) error {
	servers, agents := s.rotationOrder()
	for _, hs := range append(servers, agents...) {
		s.in.emitter(events.PhaseRotateCertificates).Info(hs.host.Name, "would stop K3s, run k3s certificate rotate, start it and wait until the node is Ready")
	}
	return ctx.Err()
}
