// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

// Steps of `k3strap upgrade --via suc`.
const (
	// PhaseSUCDeploy deploys system-upgrade-controller and applies the K3s Plans.
	PhaseSUCDeploy Phase = "suc-deploy"
	// PhaseSUCWatch follows the Plans node by node. Its host steps, in order, are the
	// SUCStep* names (servers have no drain step).
	PhaseSUCWatch Phase = "suc-watch"
)

// Host steps of PhaseSUCWatch, one event each per node, in this order.
const (
	SUCStepJob      = "job"      // SUC created the node's upgrade Job
	SUCStepCordon   = "cordon"   // the node is cordoned
	SUCStepDrain    = "drain"    // agents: the node is drained
	SUCStepUpgrade  = "upgrade"  // the kubelet reports the new version
	SUCStepReady    = "ready"    // Ready on the new version
	SUCStepUncordon = "uncordon" // uncordoned; the Plan is applied on the node
)
