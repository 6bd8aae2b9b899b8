// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

// Milestone is one step of a K3s server's bring-up that the supervisor watches for. The
// string values are stable: they are the names in events (events.MilestoneInfo.Name) and JSON
// output.
type Milestone string

// The milestones of a server's bring-up, in their usual order on a real K3s v1.36.3
// (docs/k3s.md "Bring-up timeline"; the real-K3s lane of the end-to-end tests sees this order):
// API ready ~9 s, unit active (K3s's READY) 0.7-1.5 s later, Node registered and Ready (the
// kubelet reports Ready before the cloud controller initialised the node) ~10-11 s,
// uninitialized taint gone ~13-14 s, PodCIDR ~16 s, subnet.env ~20-25 s on the 2-core test
// machines. The taint's removal and subnet.env are independent: either may come first and
// neither is inferred from the other (docs/failure-modes.md F1). Bring-up is done when all
// have been reached (subnet-env is skipped with flannel off).
const (
	// MilestoneServiceActive: the K3s unit is active.
	MilestoneServiceActive Milestone = "service-active"
	// MilestoneAPIReady: /readyz answers ok.
	MilestoneAPIReady Milestone = "api-ready"
	// MilestoneRegistered: the Node object exists.
	MilestoneRegistered Milestone = "node-registered"
	// MilestoneTaintGone: no node.cloudprovider.kubernetes.io/uninitialized taint remains.
	MilestoneTaintGone Milestone = "uninitialized-taint-gone"
	// MilestonePodCIDR: spec.podCIDR is set.
	MilestonePodCIDR Milestone = "podcidr-set"
	// MilestoneSubnetEnv: /run/flannel/subnet.env exists and parses.
	MilestoneSubnetEnv Milestone = "subnet-env"
	// MilestoneNodeReady: the node's Ready condition is True.
	MilestoneNodeReady Milestone = "node-ready"
)

// Milestones returns every milestone in bring-up order (a new slice on every call).
func Milestones() []Milestone {
	return []Milestone{MilestoneAPIReady, MilestoneServiceActive, MilestoneRegistered, MilestoneNodeReady,
		MilestoneTaintGone, MilestonePodCIDR, MilestoneSubnetEnv}
}

// Index returns m's position in Milestones (0 for api-ready), or -1 for an unknown name.
func (m Milestone) Index() int {
	for i, x := range Milestones() {
		if x == m {
			return i
		}
	}
	return -1
}

// Known reports whether m is one of Milestones.
func (m Milestone) Known() bool { return m.Index() >= 0 }

// String returns the stable name.
func (m Milestone) String() string { return string(m) }
