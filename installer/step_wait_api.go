// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/k3strap/k3strap/events"
)

// waitAPIStep waits until the cluster's registration address (the first server, or
// spec.k3s.apiEndpoint) answers K3s's unauthenticated /ping over HTTPS — the box joins a
// cluster whose first server may boot after it (docs/edge-first-boot.md "Boot order"). It
// tries with exponential backoff (2 s doubling to 1 min, jittered), says every failed attempt
// as a warning, and gives up at --join-timeout. The answer's Date is kept for the clock check
// (k3s.ClockSkewError). The probe sends nothing secret and trusts nothing but the answer's
// existence and Date, so it does not verify the server's certificate (the join itself does,
// through the token's CA hash).
//
// Reads: the inventory (registration URL), Options.JoinTimeout. Writes: s.join.apiDate, s.join.apiLocal.
type waitAPIStep struct{}

func (waitAPIStep) Phase() events.Phase { return events.PhaseWaitAPI }

func (waitAPIStep) Summary() string {
	return "wait, bounded and with backoff, until the cluster's API answers (every attempt said); its clock read"
}

// Preview does the same: it only reads.
func (w waitAPIStep) Preview(ctx context.Context, s *session) error { return w.Run(ctx, s) }

func (waitAPIStep) Run(ctx context.Context, s *session) error {
	url := s.in.cluster.RegistrationURL() + "/ping"
	em := s.in.emitter(events.PhaseWaitAPI)
	em.Started("waiting for the cluster's API at " + url)
	limit := s.in.opts.JoinTimeout
	if limit <= 0 {
		limit = DefaultJoinTimeout
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 2*time.Second, time.Minute, 0
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a liveness probe; see the doc comment
		Proxy:           nil,
	}}
	defer client.CloseIdleConnections()
	start := time.Now()
	deadline := start.Add(limit)
	for attempt := 1; ; attempt++ {
		date, err := ping(ctx, client, url)
		if err == nil {
			s.join.apiDate, s.join.apiLocal = date, time.Now()
			em.Finished(events.StatusOK, fmt.Sprintf("the API answered after %d attempts (%s)", attempt, time.Since(start).Round(time.Second)))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The last try is at the deadline itself.
		wait, left := b.NextBackOff(), time.Until(deadline)
		if left > 0 && wait > left {
			wait = left
		}
		if left <= 0 {
			em.Finished(events.StatusFailed, fmt.Sprintf("no answer after %d attempts in %s", attempt, time.Since(start).Round(time.Second)))
			return &Failure{Kind: KindInstall, Phase: events.PhaseWaitAPI, Info: events.ErrorInfo{
				Message: fmt.Sprintf("the cluster's API at %s did not answer within %s (%d attempts; last: %v)", url, limit, attempt, err),
				Fix:     "check that the first server is up and that this box reaches it on TCP 6443 (cable, router, firewall); the box tries again at its next start",
				Resume:  "the first-boot unit retries by itself; or run `systemctl restart k3strap-firstboot`",
			}}
		}
		em.Warn("", fmt.Sprintf("attempt %d: the API at %s does not answer (%v); next try in %s", attempt, url, err, wait.Round(time.Second)))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ping GETs url once and returns the answer's Date (zero when it has none). Any HTTP answer
// counts: K3s answers /ping with "pong"; a 401 still means the API server is there.
func ping(ctx context.Context, c *http.Client, url string) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return time.Time{}, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 500 {
		return time.Time{}, fmt.Errorf("HTTP %s", resp.Status)
	}
	d, _ := http.ParseTime(resp.Header.Get("Date"))
	return d, nil
}
