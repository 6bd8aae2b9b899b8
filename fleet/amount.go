// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"strconv"
	"strings"
)

// Amount is a number of sites ("5") or a percentage of the run's sites ("25%"), as
// rollout.batch and rollout.maxFailedSites take them.
type Amount string

// parse returns the amount's number and whether it is a percentage. Errors say how to write
// one.
func (a Amount) parse() (n int, percent bool, err error) {
	s := strings.TrimSpace(string(a))
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 100 {
			return 0, true, fmt.Errorf("%q is not a percentage from 0%% to 100%%", string(a))
		}
		return n, true, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%q is neither a number of sites nor a percentage", string(a))
	}
	return n, false, nil
}

// Of returns the amount for a run of total sites: the number itself, or the percentage of
// total rounded up (up) or down. A malformed amount (validation refuses it) counts as 0.
func (a Amount) Of(total int, up bool) int {
	n, pct, err := a.parse()
	if err != nil {
		return 0
	}
	if !pct {
		return n
	}
	if up {
		return (total*n + 99) / 100
	}
	return total * n / 100
}
