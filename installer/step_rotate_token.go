// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// rotateTokenStep replaces the server token and restarts every node with it.
//
// Reads: the inventory's token; the first server's token. Writes: every host's token file; host
// results.
type rotateTokenStep struct{}

func (rotateTokenStep) Phase() events.Phase { return events.PhaseRotateToken }

func (rotateTokenStep) Summary() string {
	return "k3s token rotate on the first server (new token: K3STRAP_K3S_TOKEN or generated); token file on every node; restart servers one at a time, then agents"
}

func (rotateTokenStep) Run(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRotateToken)
	newTok := TokenPassword(s.in.cluster.Spec.K3s.Token.Reveal())
	if newTok == "" {
		var err error
		if newTok, err = newSecretHex(32); err != nil {
			return err
		}
	} else {
		cur, err := s.first.c().ReadFile(ctx, k3s.PathServerToken)
		if err == nil && TokenPassword(strings.TrimSpace(string(cur))) == newTok {
			return &Failure{Kind: KindInvalid, Phase: events.PhaseRotateToken, Info: events.ErrorInfo{
				Message: "the inventory's token (spec.k3s.token or K3STRAP_K3S_TOKEN) is already the cluster's token",
				Fix:     "set K3STRAP_K3S_TOKEN to the new token, or leave spec.k3s.token and K3STRAP_K3S_TOKEN unset to have one generated",
			}}
		}
	}
	if _, err := s.first.sh(ctx, "token rotate", tokenRotateScript, newTok+"\n"); err != nil {
		return s.hostFailure(s.first, "token rotate", KindInstall, err)
	}
	em.Step(s.first.host.Name, "token", events.StatusChanged, "server token rotated (the old token no longer joins)")
	var failed []string
	for _, hs := range s.hosts {
		if hs.c() == nil {
			failed = append(failed, hs.host.Name)
			continue
		}
		if _, err := hs.sh(ctx, "token file", tokenFileScript, newTok+"\n", k3s.PathTokenFile); err != nil {
			_ = s.hostFailure(hs, "token file", KindInstall, err)
			failed = append(failed, hs.host.Name)
		}
	}
	if len(failed) > 0 {
		return &Failure{Kind: KindInstall, Phase: events.PhaseRotateToken, Info: events.ErrorInfo{
			Message: "the token file could not be updated on " + strings.Join(failed, ", "),
			Fix:     "make the hosts reachable; until then they cannot rejoin after a restart",
			Resume:  "re-run `k3strap rotate token` with K3STRAP_K3S_TOKEN set to the new token",
		}}
	}
	em.Info("", fmt.Sprintf("token file %s updated on %d nodes", k3s.PathTokenFile, len(s.hosts)))
	return s.rotateEach(ctx, func(ctx context.Context, hs *hostState) error {
		return s.restartAndWait(ctx, hs, "restart", nil)
	})
}

// Preview says what would change.
func (rotateTokenStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRotateToken)
	em.Info(s.first.host.Name, "would run k3s token rotate with a new token, write "+k3s.PathTokenFile+" on every node and restart them (servers one at a time, then agents)")
	return ctx.Err()
}
