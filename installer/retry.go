// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// newBackoff is the retry schedule for transport failures: 1 s, 2 s, 4 s ... at most 10 s
// apart, at most retries attempts after the first, bounded by ctx.
func newBackoff(ctx context.Context, retries int) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Second
	b.MaxInterval = 10 * time.Second
	b.MaxElapsedTime = 0
	return backoff.WithContext(backoff.WithMaxRetries(b, uint64(retries)), ctx)
}

// dial connects to a host, retrying connection setup with backoff when the host answered but
// the connection failed (refused, reset, or a handshake that did not finish in time on a slow
// or lossy link), and once when the TCP connect itself timed out (a lossy link can lose the
// SYN and its retransmissions). Permanent failures (remote.IsTransient) are not retried: a
// host that does not answer twice, a host key or known_hosts problem, a key file that cannot
// be read, a key the host refuses, an ssh-agent that does not answer, cancellation.
func (s *session) dial(ctx context.Context, hs *hostState, cfg remote.Config) (remote.Host, error) {
	return s.dialRetry(ctx, hs, cfg, 1)
}

// dialRetry is dial with connectRetries retries of a TCP connect timeout. Reconnecting after a
// link was found dead uses none: a host that no longer answers fails within the connect
// timeout.
func (s *session) dialRetry(ctx context.Context, hs *hostState, cfg remote.Config, connectRetries int) (remote.Host, error) {
	if s.in.opts.Connect != nil {
		return s.in.opts.Connect(ctx, hs.host)
	}
	if hs.host.IsLocal() {
		// Local mode (connection: local): k3strap runs on the host; nothing is dialed.
		return s.dialLocal(ctx, hs, cfg)
	}
	var c *remote.Client
	attempt := 0
	err := backoff.RetryNotify(func() error {
		attempt++
		var err error
		c, err = remote.Dial(ctx, cfg)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		if !remote.IsTransient(err) {
			if !connectTimeout(err) || connectRetries == 0 {
				return backoff.Permanent(err)
			}
			connectRetries--
		}
		return err
	}, newBackoff(ctx, s.in.opts.Retries), func(err error, wait time.Duration) {
		// Called only when another attempt follows.
		s.in.emitter(events.PhaseConnect).Warn(hs.host.Name, fmt.Sprintf("connection attempt %d failed, retrying in %s: %v", attempt, wait.Round(100*time.Millisecond), err))
	})
	if err != nil {
		return nil, err // never a typed nil *remote.Client inside the interface
	}
	if s.in.opts.HostTranscripts != "" {
		return s.recordTranscript(hs, c)
	}
	return c, nil
}

// connectTimeout reports whether err is a TCP connect that got no answer in time.
func connectTimeout(err error) bool {
	var ce *remote.ConnectError
	var ne net.Error
	return errors.As(err, &ce) && ce.Step == "connect" && errors.As(err, &ne) && ne.Timeout()
}

// reconnect replaces hs's connection after a transport failure.
func (s *session) reconnect(ctx context.Context, hs *hostState) error {
	cfg, err := s.remoteConfig(ctx, hs.host)
	if err != nil {
		return err
	}
	c, err := s.dialRetry(ctx, hs, cfg, 0)
	if err != nil {
		return err
	}
	hs.setClient(c)
	return nil
}

// madeProgress wraps the transient failure of an attempt that moved its step forward (an
// upload that sent bytes the next attempt resumes from): the retry budget starts afresh.
type madeProgress struct{ error }

func (m madeProgress) Unwrap() error { return m.error }

// retry runs an idempotent step and, when it fails for a transient transport reason (the
// connection dropped, a channel could not be opened), reconnects and runs it again with
// backoff, up to Options.Retries times in a row without progress (an attempt that returns
// madeProgress resets the count). Other failures — a command that ran and failed, sudo,
// cancellation, a host that no longer answers — are returned at once. Steps that are not
// idempotent must not use it.
func (s *session) retry(ctx context.Context, hs *hostState, label string, fn func(ctx context.Context) error) error {
	b := newBackoff(ctx, s.in.opts.Retries)
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		var mp madeProgress
		if errors.As(err, &mp) {
			err = mp.error
			b.Reset()
		}
		if !remote.IsTransient(err) || ctx.Err() != nil {
			return err
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return err
		}
		if attempt == 1 {
			// The first reconnect is immediate: a link found dead is tried again at once, and a
			// host that no longer answers fails within the connect timeout.
			wait = 0
		}
		s.in.emitter(events.PhaseRetry).Emit(events.Event{Type: events.Warning, Host: hs.host.Name,
			Message: fmt.Sprintf("%s failed on attempt %d (%v); reconnecting and retrying", label, attempt, err)})
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if rerr := s.reconnect(ctx, hs); rerr != nil {
			if !remote.IsTransient(rerr) {
				return errors.Join(err, rerr)
			}
			// The next attempt fails on the closed connection and reconnects again.
		}
	}
}
