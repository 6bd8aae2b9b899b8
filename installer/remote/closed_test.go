// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"strings"
	"testing"
	"time"
)

// A connection the host ends (its kernel resets it, the host crashed and its network went
// away) is found dead at once — Done closed, Lost saying so — not at the next keepalive (an
// hour here); a connection closed on purpose is not.
func TestConnectionEndedByTheHostIsLost(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, func(cfg *Config) { cfg.KeepaliveInterval = time.Hour })
	s.mu.Lock()
	for _, sc := range s.conns {
		_ = sc.Close()
	}
	s.mu.Unlock()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a connection the host closed is not found dead within 5 s")
	}
	if err := c.Lost(); err == nil || !strings.Contains(err.Error(), "the connection was closed by the host or the network") {
		t.Fatalf("Lost() = %v", err)
	}

	own := s.dial(t, nil)
	_ = own.Close()
	time.Sleep(100 * time.Millisecond)
	if err := own.Lost(); err != nil {
		t.Errorf("a connection closed on purpose counts as lost: %v", err)
	}
}
