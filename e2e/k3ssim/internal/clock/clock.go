// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clock turns the real K3s timings measured in
// testdata/real-k3s-v1.36.3 (seconds after process start) into scaled wall-clock
// waits, so a test can run the whole bring-up in a fraction of the time (knob timeScale).
package clock

import (
	"context"
	"time"
)

// Clock measures scaled time from the process start T0.
type Clock struct {
	// T0 is the process start.
	T0 time.Time
	// Scale multiplies every delay (1.0 = real K3s speed). Values <= 0 count as 1.
	Scale float64
}

// New returns a Clock starting now with the given scale.
func New(scale float64) Clock {
	if scale <= 0 {
		scale = 1
	}
	return Clock{T0: time.Now(), Scale: scale}
}

// D converts real-K3s seconds into a scaled duration.
func (c Clock) D(seconds float64) time.Duration {
	s := c.Scale
	if s <= 0 {
		s = 1
	}
	return time.Duration(seconds * s * float64(time.Second))
}

// At returns the wall-clock instant that is the given real-K3s seconds after T0.
func (c Clock) At(seconds float64) time.Time {
	return c.T0.Add(c.D(seconds))
}

// Until blocks until the given real-K3s seconds after T0 or ctx ends; it returns ctx.Err()
// in the latter case.
func (c Clock) Until(ctx context.Context, seconds float64) error {
	return SleepUntil(ctx, c.At(seconds))
}

// Sleep blocks for the given real-K3s seconds (scaled) or until ctx ends.
func (c Clock) Sleep(ctx context.Context, seconds float64) error {
	return SleepUntil(ctx, time.Now().Add(c.D(seconds)))
}

// SleepUntil blocks until t or until ctx ends (returning ctx.Err()).
func SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
