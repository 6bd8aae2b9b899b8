// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/inventory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// intRange is the accepted range of a whole-number flag, both ends included.
type intRange struct{ min, max int }

// intFlagRanges is the one table of the whole-number flags' ranges; checkFlagRanges refuses a
// value outside it (exit 2) and a test fails when a command gains an int flag missing here.
//   - concurrency: hosts worked on at once; 0 would start none.
//   - concurrent-uploads: large uploads in flight across hosts; 0 would upload nothing.
//   - upgrade-batch: a percentage of the agents (at least one agent per batch).
var intFlagRanges = map[string]intRange{
	"concurrency":        {1, 1000},
	"concurrent-uploads": {1, 100},
	"upgrade-batch":      {1, 100},
}

// maxFlagDuration is the longest duration flag k3strap takes (the rule is inventory's).
const maxFlagDuration = inventory.MaxDuration

// durationLimit is the longest value the duration flag name takes: maxFlagDuration, except
// for a site credential's lifetime (`fleet management credential --expiration`, default a
// year) and how long a site may go unseen before `fleet status` calls it stale (a box that
// reports weekly is not stale after a day).
func durationLimit(name string) time.Duration {
	switch name {
	case "expiration":
		return 10 * 365 * 24 * time.Hour
	case "stale-after":
		return 90 * 24 * time.Hour
	}
	return maxFlagDuration
}

// checkFlagRanges refuses, as a usage error (exit 2) naming the flag, the value and the range,
// a whole-number flag of cmd outside intFlagRanges and a duration flag that is not positive
// (every duration k3strap takes is a period, a timeout or a grace: zero or less would spin or
// give up at once) or is longer than maxFlagDuration. Every flag is checked, set or not, so a
// default cannot drift out of range either.
func checkFlagRanges(cmd *cobra.Command) error {
	var bad error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if bad != nil {
			return
		}
		switch f.Value.Type() {
		case "int":
			n, err := cmd.Flags().GetInt(f.Name)
			if err != nil {
				return
			}
			r, ok := intFlagRanges[f.Name]
			if !ok {
				bad = fmt.Errorf("--%s has no range in intFlagRanges (a k3strap defect)", f.Name)
				return
			}
			if n < r.min || n > r.max {
				bad = usageError{fmt.Errorf("--%s %d is out of range — fix: give a whole number from %d to %d", f.Name, n, r.min, r.max)}
			}
		case "duration":
			d, err := cmd.Flags().GetDuration(f.Name)
			if err != nil {
				return
			}
			limit := durationLimit(f.Name)
			switch {
			case d <= 0:
				bad = usageError{fmt.Errorf("--%s %s is not a positive duration — fix: give a duration greater than zero, e.g. --%s %s", f.Name, d, f.Name, durationExample(f))}
			case d > limit:
				bad = usageError{fmt.Errorf("--%s %s is longer than %s — fix: give a shorter duration, e.g. --%s %s", f.Name, d, limit, f.Name, durationExample(f))}
			}
		}
	})
	return bad
}

// durationExample is the flag's default when it is positive, else 10s.
func durationExample(f *pflag.Flag) string {
	if d, err := time.ParseDuration(f.DefValue); err == nil && d > 0 {
		return d.String()
	}
	return "10s"
}
