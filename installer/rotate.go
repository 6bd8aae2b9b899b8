// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// rotationOrder is servers one at a time (the first server first), then the agents.
func (s *session) rotationOrder() (servers, agents []*hostState) {
	servers = append([]*hostState{s.first}, s.others(inventory.RoleServer)...)
	return servers, s.others(inventory.RoleAgent)
}

// rotateEach runs one's rotation on the servers one at a time, then on the agents in
// parallel, stopping at the first server that fails.
func (s *session) rotateEach(ctx context.Context, one func(ctx context.Context, hs *hostState) error) error {
	servers, agents := s.rotationOrder()
	for _, hs := range servers {
		if hs.c() == nil {
			return s.hostFailure(hs, "connect", KindInstall, fmt.Errorf("unreachable: %s", errText(hs.connErr)))
		}
		if err := one(ctx, hs); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	var failed []string
	s.each(ctx, agents, func(ctx context.Context, hs *hostState) {
		var err error
		if hs.c() == nil {
			err = s.hostFailure(hs, "connect", KindInstall, fmt.Errorf("unreachable: %s", errText(hs.connErr)))
		} else {
			err = one(ctx, hs)
		}
		if err != nil {
			mu.Lock()
			failed = append(failed, hs.host.Name)
			mu.Unlock()
		}
	})
	if len(failed) > 0 {
		return &Failure{Kind: KindInstall, Phase: s.current, Info: events.ErrorInfo{
			Message: "failed on " + strings.Join(failed, ", "), Fix: "see each host's error above",
			Resume: "re-run `k3strap " + strings.Replace(s.command, "-", " ", 1) + "`"}}
	}
	return nil
}
