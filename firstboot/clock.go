// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/k3s"
)

// ClockError is a box clock too far off to install or join: TLS certificates K3s makes would
// not be valid yet (or already expired) on the other nodes, and etcd refuses members whose
// clocks differ (k3s.ClockSkewError).
type ClockError struct {
	// Msg says what is off; Fix what to do.
	Msg, Fix string
}

func (e *ClockError) Error() string { return e.Msg + " — fix: " + e.Fix }

// seedSlack is how far before a seed's creation a box clock may be (time zones mistaken for
// UTC on the workstation, a seed written just after midnight).
const seedSlack = 24 * time.Hour

// CheckSeedClock refuses a box clock before the seed was written (less a day): such a clock
// was never set (a board without a battery-backed clock starts at its firmware's date).
func CheckSeedClock(now time.Time, info Info) error {
	if info.Created.IsZero() || !now.Before(info.Created.Add(-seedSlack)) {
		return nil
	}
	return &ClockError{
		Msg: fmt.Sprintf("this box's clock says %s, before its seed was written (%s): the clock is not set",
			now.UTC().Format(time.RFC3339), info.Created.UTC().Format(time.RFC3339)),
		Fix: "set the clock (timedatectl set-time, or let NTP/chrony reach a time server), then reboot or `systemctl restart " + UnitName + "`",
	}
}

// CheckServerClock compares the box clock with the API server's (the Date of its answer,
// taken at local time now): more than k3s.ClockSkewError apart is refused — the threshold
// preflight's ClockSkew check uses between hosts.
func CheckServerClock(now, server time.Time) error {
	if server.IsZero() {
		return nil
	}
	d := now.Sub(server)
	if d < 0 {
		d = -d
	}
	// Date has a one-second resolution: allow it.
	if d <= k3s.ClockSkewError+time.Second {
		return nil
	}
	return &ClockError{
		Msg: fmt.Sprintf("this box's clock is %s off the cluster's API server (box %s, server %s); K3s refuses to join with a skew over %s",
			d.Round(time.Second), now.UTC().Format(time.RFC3339), server.UTC().Format(time.RFC3339), k3s.ClockSkewError),
		Fix: "set this box's clock (NTP/chrony or timedatectl set-time) to the server's time, then reboot or `systemctl restart " + UnitName + "`",
	}
}
