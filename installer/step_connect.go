// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// connectStep dials every host of the session in parallel (or only the first server, for
// commands that work through it). Unreachable hosts keep their error: preflight's SSH check
// reports them; commands without preflight fail on an unreachable first server here.
//
// Reads: the inventory hosts (the first server only with firstOnly). Writes: each hostState's
// connection (c()) or connErr; the known_hosts records.
type connectStep struct {
	firstOnly bool
}

func (connectStep) Phase() events.Phase { return events.PhaseConnect }

func (c connectStep) Summary() string {
	if c.firstOnly {
		return "connect to the first server over SSH (host keys verified, sudo checked)"
	}
	return "connect to every host over SSH in parallel (host keys verified, sudo checked)"
}

func (c connectStep) Run(ctx context.Context, s *session) error {
	// reset works on any hosts; a box joining by itself (join-local) has only itself.
	if s.first == nil && (c.firstOnly || (s.command != "reset" && s.command != joinLocalName)) {
		return errNoServer(events.PhaseConnect)
	}
	hosts := s.hosts
	if c.firstOnly {
		hosts = []*hostState{s.first}
	}
	s.connect(ctx, hosts)
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.firstOnly && s.first.connErr != nil {
		return s.hostFailure(s.first, "connect", KindInstall, s.first.connErr)
	}
	return nil
}

// knownHosts returns the shared known_hosts verifier for path.
func (s *session) knownHosts(path string) *remote.KnownHosts {
	s.khMu.Lock()
	defer s.khMu.Unlock()
	if kh, ok := s.kh[path]; ok {
		return kh
	}
	em := s.in.emitter(events.PhaseConnect)
	kh := &remote.KnownHosts{Path: path, OnRecord: func(addr, fp string) {
		s.khMu.Lock()
		s.recorded = append(s.recorded, RecordedKey{Address: addr, Fingerprint: fp, KnownHosts: path})
		s.khMu.Unlock()
		em.Warn(hostForAddress(s, addr), fmt.Sprintf("recorded host key %s for %s in %s (trust on first use)", fp, addr, path))
	}}
	if s.kh == nil {
		s.kh = map[string]*remote.KnownHosts{}
	}
	s.kh[path] = kh
	return kh
}

func hostForAddress(s *session, addr string) string {
	for _, hs := range s.hosts {
		if strings.HasPrefix(addr, hs.host.Address+":") || strings.HasPrefix(addr, "["+hs.host.Address+"]") {
			return hs.host.Name
		}
	}
	return ""
}

// connect dials every host in parallel. Unreachable hosts keep connErr; the SSH preflight
// check reports them.
func (s *session) connect(ctx context.Context, hosts []*hostState) {
	em := s.in.emitter(events.PhaseConnect)
	em.Started(fmt.Sprintf("connecting to %d hosts", len(hosts)))
	s.each(ctx, hosts, func(ctx context.Context, hs *hostState) {
		cfg, err := s.remoteConfig(ctx, hs.host)
		if err != nil {
			hs.connErr = err
			em.Step(hs.host.Name, "connect", events.StatusFailed, err.Error())
			return
		}
		c, err := s.dial(ctx, hs, cfg)
		if err != nil {
			hs.connErr = err
			st := events.StatusFailed
			if errors.Is(err, context.Canceled) {
				st = events.StatusSkipped // stopped, not failed: the run's error says why
			}
			s.contact(hs, err)
			em.Step(hs.host.Name, "connect", st, err.Error())
			return
		}
		hs.setClient(c)
		s.contact(hs, nil)
		via := ""
		switch {
		case cfg.Via != nil:
			via = " via " + cfg.Via.Address()
		case cfg.ProxyCommand != "":
			via = " via ProxyCommand"
		}
		if hs.host.IsLocal() {
			em.Step(hs.host.Name, "connect", events.StatusOK, "local mode: k3strap runs on this host, as "+c.User())
			return
		}
		em.Step(hs.host.Name, "connect", events.StatusOK, fmt.Sprintf("connected to %s as %s%s", c.Address(), cfg.User, via))
	})
	st, msg := phaseOutcome(hosts, "connected", func(hs *hostState) bool { return hs.connErr == nil && hs.c() != nil })
	if ctx.Err() != nil && st == events.StatusFailed {
		// Stopped, not failed: the run's own error says why.
		n := 0
		for _, hs := range hosts {
			if hs.connErr == nil && hs.c() != nil {
				n++
			}
		}
		st, msg = events.StatusSkipped, fmt.Sprintf("stopped while connecting (%d of %d hosts connected)", n, len(hosts))
	}
	em.Finished(st, msg)
}

// contact tells Options.HostContact whether hs could be reached (err nil: it was).
func (s *session) contact(hs *hostState, err error) {
	if f := s.in.opts.HostContact; f != nil {
		f(hs.host.Name, err)
	}
}

// phaseOutcome is the status and message of a phase that did something to every host of
// hosts: ok when it worked on all of them ("3 of 3 hosts connected"), failed when it failed on
// any, naming those ("1 of 3 hosts connected; failed: w1, w2"; "none of 3 hosts connected").
func phaseOutcome(hosts []*hostState, did string, ok func(*hostState) bool) (events.Status, string) {
	var failed []string
	for _, hs := range hosts {
		if !ok(hs) {
			failed = append(failed, hs.host.Name)
		}
	}
	n := len(hosts)
	switch {
	case len(failed) == 0:
		return events.StatusOK, fmt.Sprintf("%d of %d hosts %s", n, n, did)
	case len(failed) == n:
		return events.StatusFailed, fmt.Sprintf("none of %d hosts %s; failed: %s", n, did, strings.Join(failed, ", "))
	}
	return events.StatusFailed, fmt.Sprintf("%d of %d hosts %s; failed: %s", n-len(failed), n, did, strings.Join(failed, ", "))
}
