// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	start := runAStart
	d := Deadline{Start: start, Timeout: 10 * time.Minute}
	for _, tt := range []struct {
		after  time.Duration
		passed bool
		left   time.Duration
	}{
		{0, false, 10 * time.Minute},
		{10 * time.Minute, false, 0},
		{10*time.Minute + time.Nanosecond, true, -time.Nanosecond},
		{11 * time.Minute, true, -time.Minute},
	} {
		now := start.Add(tt.after)
		if d.Passed(now) != tt.passed || d.Left(now) != tt.left {
			t.Errorf("+%s: passed %v left %s", tt.after, d.Passed(now), d.Left(now))
		}
	}
	if !d.At().Equal(start.Add(10 * time.Minute)) {
		t.Error(d.At())
	}
}

// "Fresh since the restart": host timestamps are whole seconds; the restart's instant comes
// from the local clock, converted with the clock skew, less FreshTolerance.
func TestFresh(t *testing.T) {
	restart := time.Date(2026, 11, 21, 23, 35, 5, 700_000_000, time.UTC) // local clock
	tests := []struct {
		name string
		at   time.Time
		skew time.Duration
		want bool
	}{
		{"in the same second, 2 s tolerance", time.Date(2026, 11, 21, 23, 35, 3, 0, time.UTC), 0, true},
		{"one second too early", time.Date(2026, 11, 21, 23, 35, 2, 999_000_000, time.UTC), 0, false},
		{"after", restart.Add(time.Minute), 0, true},
		{"host 1 min ahead, before its restart", restart.Add(30 * time.Second), time.Minute, false},
		{"host 1 min ahead, after its restart", restart.Add(time.Minute), time.Minute, true},
		{"zero time (no heartbeat)", time.Time{}, 0, false},
	}
	for _, tt := range tests {
		if got := Fresh(tt.at, Since(restart, tt.skew)); got != tt.want {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
	if !Since(time.Time{}, time.Minute).IsZero() || !Fresh(time.Time{}, time.Time{}) || !Fresh(restart.Add(-time.Hour), Since(time.Time{}, 0)) {
		t.Error("no restart: anything is fresh")
	}
	if !Unix(0).IsZero() || Unix(1795390505).Unix() != 1795390505 {
		t.Error("Unix")
	}
}
