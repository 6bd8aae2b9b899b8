package installer

import (
	"context"
	"errors"
	"fmt"
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

// dial connects to a host, retrying connection setup with backoff when it failed fast and
// transiently (refused, reset: sshd restarting or over MaxStartups). A host that does not
// answer within the connect timeout, or refuses our key or host key, fails at once.
func (s *session) dial(ctx context.Context, hs *hostState, cfg remote.Config) (*remote.Client, error) {
	var c *remote.Client
	attempt := 0
	err := backoff.Retry(func() error {
		attempt++
		var err error
		c, err = remote.Dial(ctx, cfg)
		if err == nil {
			return nil
		}
		if !remote.IsTransient(err) || ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		s.in.emitter("connect").Warn(hs.host.Name, fmt.Sprintf("connection attempt %d failed, retrying: %v", attempt, err))
		return err
	}, newBackoff(ctx, s.in.opts.Retries))
	return c, err
}

// reconnect replaces hs's connection after a transport failure.
func (s *session) reconnect(ctx context.Context, hs *hostState) error {
	cfg, err := s.remoteConfig(ctx, hs.host)
	if err != nil {
		return err
	}
	c, err := s.dial(ctx, hs, cfg)
	if err != nil {
		return err
	}
	hs.setClient(c)
	return nil
}

// retry runs an idempotent step and, when it fails for a transient transport reason (the
// connection dropped, a channel could not be opened), reconnects and runs it again with
// backoff, up to Options.Retries times. Other failures — a command that ran and failed, sudo,
// cancellation — are returned at once. Steps that are not idempotent must not use it.
func (s *session) retry(ctx context.Context, hs *hostState, label string, fn func(ctx context.Context) error) error {
	attempt := 0
	return backoff.Retry(func() error {
		attempt++
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !remote.IsTransient(err) || ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		s.in.emitter("retry").Emit(events.Event{Type: events.Warning, Host: hs.host.Name,
			Message: fmt.Sprintf("%s failed on attempt %d (%v); reconnecting and retrying", label, attempt, err)})
		if rerr := s.reconnect(ctx, hs); rerr != nil {
			if !remote.IsTransient(rerr) {
				return backoff.Permanent(errors.Join(err, rerr))
			}
			return rerr
		}
		return err
	}, newBackoff(ctx, s.in.opts.Retries))
}
