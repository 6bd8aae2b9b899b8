// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// upgrading reports whether apply changes the K3s version of an installed host.
func (s *session) upgrading(hs *hostState) bool {
	want := s.in.cluster.Spec.K3s.Version
	have := hs.facts.K3s.BinaryVersion
	return want != "" && have != "" && have != want
}

// firstServerStep converges the server that initialises the cluster: its token file (the
// inventory's, the one already there, the one of a K3s installed without k3strap, or a new
// one), its files, the install script and the service (re)start. When its K3s version changes
// and other nodes can take its pods, it is drained first (the supervise step uncordons it).
//
// Reads: the first server's facts and plan. Writes: its plan's token file; s.boot.firstResult,
// s.boot.firstDrained.
type firstServerStep struct{}

func (firstServerStep) Phase() events.Phase { return events.PhaseFirstServer }

func (firstServerStep) Summary() string {
	return "converge the first server: token file, files (uploaded only when changed), install script, (re)start"
}

func (firstServerStep) Run(ctx context.Context, s *session) error {
	hs := s.first
	if hs.facts == nil {
		return s.hostFailure(hs, "connect", KindInstall, fmt.Errorf("the first server is unreachable: %w", hs.connErr))
	}
	em := s.in.emitter(events.PhaseFirstServer)
	em.Started("first server " + hs.host.Name)
	if err := s.firstServerToken(ctx, hs); err != nil {
		return err
	}
	if s.upgrading(hs) && len(s.in.cluster.Spec.Hosts) > 1 {
		if err := s.drain(ctx, hs, hs); err != nil {
			return err
		}
		s.boot.firstDrained = !s.in.opts.NoDrain
	}
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	s.boot.firstResult = res
	// What the host got so far: a run stopped before the server is up still says so (the
	// supervisor, then the bring-up step, complete it).
	hs.setResult(res.status(), res.describe()+"; K3s not up yet when the run ended")
	em.Finished(events.StatusOK, res.describe())
	return nil
}

// Preview reports what converging the first server would change.
func (firstServerStep) Preview(ctx context.Context, s *session) error {
	hs := s.first
	if hs.facts == nil {
		return s.hostFailure(hs, "connect", KindInstall, fmt.Errorf("the first server is unreachable: %w", hs.connErr))
	}
	if err := s.firstServerToken(ctx, hs); err != nil {
		return err
	}
	_, err := s.converge(ctx, hs)
	return err
}

// firstServerToken decides the first server's token file: the inventory's token; else the
// one already on the host (never regenerated); else the token of a K3s installed without
// k3strap (read back); else a new one from crypto/rand.
func (s *session) firstServerToken(ctx context.Context, hs *hostState) error {
	if t := s.in.cluster.Spec.K3s.Token; t != "" {
		hs.plan.SetToken(t, false)
		return nil
	}
	if hs.facts.K3s.Files[k3s.PathTokenFile] != "" {
		hs.plan.SetToken("existing", true)
		return nil
	}
	if hs.facts.K3s.TokenPresent {
		b, err := hs.c().ReadFile(ctx, k3s.PathServerToken)
		if err != nil {
			return s.hostFailure(hs, "token", KindInstall, fmt.Errorf("reading the existing K3s token: %w", err))
		}
		hs.plan.SetToken(inventory.Secret(TokenPassword(strings.TrimSpace(string(b)))), false)
		return nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	hs.plan.SetToken(inventory.Secret(hex.EncodeToString(buf)), false)
	return nil
}

// TokenPassword returns the password part of a K3s token: the text after "::server:" of a
// full token K10<ca hash>::server:<password> (fixtures token-format.txt), or the token itself.
func TokenPassword(token string) string {
	if _, p, ok := strings.Cut(token, "::server:"); ok {
		return p
	}
	if _, p, ok := strings.Cut(token, "::node:"); ok {
		return p
	}
	return token
}
