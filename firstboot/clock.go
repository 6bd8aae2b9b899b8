// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"fmt"
	"time"
)

// ClockError is a box clock too far off to install: TLS certificates K3s makes would not be
// valid yet (or already expired) elsewhere. (A joining box's clock is compared with the API
// server's by the installer's wait-api step, against k3s.ClockSkewError.)
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
