package installer

import "context"

// rancherManifests returns the Rancher HelmChart manifests for the first server (issue 5).
func (pl *Planner) rancherManifests() ([]File, error) { return nil, nil }

// rancher installs Rancher or registers the cluster with one, and supervises it (issue 5).
func (s *session) rancher(ctx context.Context, first *hostState) error { return nil }
