// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package bringup judges a K3s node's bring-up: it parses what the bring-up probe reports
// (installer/scripts/probe.sh), records the milestones (k3s.Milestones) of the unit's current
// main process, opens the join gates, tells the probe how long to nap, and reaches a verdict —
// up, waiting for some milestones, a stalled uninitialized taint (F1 and its kin), a crash loop
// (k3s.CrashLoop), a lost host, a probe that keeps failing, or the deadline passed. It also
// judges a joining node (NodeWait).
//
// It does no I/O: every function takes values and the time from its caller, and returns values.
// The installer's supervisor (installer/step_supervise.go) and the joins' waits
// (installer/join.go) are loops that run the probe or list the nodes, feed what they see here,
// and act on the verdicts (gather evidence, emit events, fail the run). The deadline model
// (Deadline) and the freshness rule (Fresh) are written here once; docs/architecture.md
// "Bring-up judgement" documents both.
package bringup
