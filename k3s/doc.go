// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package k3s holds the facts and rules of K3s as data: the paths on a K3s host and the units
// (paths.go; ShellVars hands them to remote scripts), node-role labels, taints and the
// helm-controller's job tolerations (nodes.go), the node-taint syntax (ParseTaint), the
// thresholds preflight, the supervisor and doctor share (thresholds.go), the flag names a real
// K3s accepts per role (Flags), the settings every server must share (CriticalKeys,
// CriticalMismatches), the config keys and environment variables whose values are secrets and
// the one masking function (Mask), the milestones of a server's bring-up and their order (Milestones), the
// cloud-controller rule that decides whether the uninitialized taint is ever removed
// (UninitializedTaintStays, docs/failure-modes.md F1), and the K3s release format
// (ParseRelease, DefaultVersion, BinaryRelease).
//
// It imports nothing of this project, so every other package may import it. Each rule names
// its source: a page under docs/ or a path in k3s-io/k3s. The e2e K3s simulator keeps its own
// copy of the flag table so that end-to-end tests stay an independent check of these rules.
package k3s
