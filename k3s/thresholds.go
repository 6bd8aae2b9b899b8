// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import "time"

// Clock skew between a node and the workstation (and so between nodes), judged by preflight's
// ClockSkew check and doctor's clock-skew finding alike: above ClockSkewWarn it is reported as a
// warning — etcd already complains when its members' clocks differ by more than a second
// (etcd-io/etcd server/etcdserver/api/rafthttp/probing_status.go) —, above ClockSkewError as an
// error: certificates K3s issues then look not yet valid or expired to other nodes, and etcd and
// token checks fail.
const (
	ClockSkewWarn  = 2 * time.Second
	ClockSkewError = time.Minute
)

// StallGrace is how long a node's uninitialized taint may stay before the bring-up supervisor
// and doctor call it a stall (F1, docs/failure-modes.md): on a real K3s v1.36.3 the embedded
// cloud controller removes it about 3.7 s after the Node registers
// (testdata/real-k3s-v1.36.3/timeline-default.txt), so a minute without it is no slow start.
// --stall-grace overrides it.
const StallGrace = 60 * time.Second

// A K3s unit's crash loop, judged alike by the bring-up supervisor (from the restarts it sees
// while it watches) and by doctor (from one look at the unit): the units the official install
// script writes restart 5 s after any exit (`Restart=always`, `RestartSec=5s`, install.sh's
// create_systemd_service_file). One restart — the process killed once (SIGKILL, the OOM
// killer), one fatal error that does not come back — is systemd doing its job: the new
// process is watched like any start. A crash loop is the unit exiting again and again:
// CrashLoopRestarts restarts within CrashLoopWindow, or systemd having given up (`failed`).
// Seen on the real K3s v1.36.3: one SIGKILL while agents joined gave NRestarts=1 and a server
// up 17 s later (docs/failure-modes.md "Faults during a run"); a read-only sysctl made K3s exit within a second of every start
// (testdata/real-k3s-v1.36.3/journal-crashloop-readonly-sysctl.txt), two restarts in ~15 s.
const (
	CrashLoopRestarts = 2
	CrashLoopWindow   = 5 * time.Minute
)

// CrashLoop reports whether a K3s unit crash-loops: state is systemd's ActiveState of the unit
// ("active", "activating", "failed", ...) and restarts how many times systemd restarted it
// within the last CrashLoopWindow — the supervisor counts the NRestarts increases it saw within
// the window; doctor, from one look at a unit that is not active, counts systemd's restart lines
// (LineRestartScheduled) of the unit's journal within the window, plus one when its SubState is
// auto-restart (it exited and waits to be started again).
func CrashLoop(state string, restarts int) bool {
	return state == "failed" || restarts >= CrashLoopRestarts
}
