// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

// Steps of `k3strap firstboot run` on a box that joins a cluster in local mode
// (docs/edge-first-boot.md): it cannot reach the first server over SSH, so it waits for the
// cluster's API and joins itself.
const (
	// PhaseWaitAPI waits, bounded and with backoff, until the cluster's API answers; every
	// attempt is an event.
	PhaseWaitAPI Phase = "wait-api"
	// PhaseJoinSelf converges the box with the cluster's token and waits for its node.
	PhaseJoinSelf Phase = "join-self"
)
