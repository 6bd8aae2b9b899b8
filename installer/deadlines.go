// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"time"

	"github.com/k3strap/k3strap/installer/bringup"
)

// Deadlines of the installer's remote commands that need another bound than the transport's
// default (remote.DefaultCommandTimeout, 5 minutes, for every command that sets none; the
// transport's own defaults are in installer/remote/deadline.go). Every remote command has a
// deadline: one that passes stops the command and fails with a *remote.DeadlineError naming
// it ("gather facts on w1 did not finish within 2m0s").
const (
	// factsTimeout bounds the facts script: a few hundred small reads and the checksums of the
	// managed files (the K3s binary: under a second).
	factsTimeout = 2 * time.Minute
	// installTimeout bounds the install script: it may install the k3s-selinux RPM through the
	// package manager, or (online installs) download the K3s binary.
	installTimeout = 10 * time.Minute
	// resetTimeout bounds the reset script: k3s-killall.sh stops every container and
	// unmounts, the uninstall script removes K3s's data (images included).
	resetTimeout = 10 * time.Minute
	// systemctlTimeout bounds a blocking `systemctl stop|start` of a K3s unit: a start waits
	// for systemd's READY (K3s's units set TimeoutStartSec=0), which an agent sends only after
	// a fresh node heartbeat.
	systemctlTimeout = 10 * time.Minute
	// etcdTimeout bounds `k3s etcd-snapshot save` and `k3s server --cluster-reset`: both
	// read or write the whole datastore.
	etcdTimeout = 15 * time.Minute
)

// waitDeadline is the deadline of a bring-up wait starting now: --timeout (Options.Timeout)
// bounds each wait separately, from its own start (bringup.Deadline, the one deadline model of a
// bring-up; docs/architecture.md "Bring-up judgement"). The first server's supervisor counts
// from its (re)start instead (bringup.Config.Started).
func (s *session) waitDeadline() bringup.Deadline {
	return bringup.Deadline{Start: time.Now(), Timeout: s.in.opts.Timeout}
}
