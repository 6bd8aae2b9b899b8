// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package paths maps the absolute host paths the K3s simulator reads and writes to a directory
// prefix, so tests can run the simulator without root and several instances side by side.
//
// In production (inside the throw-away hosts) the prefix is empty and every path is used as is.
// Tests set it through the K3SSIM_ROOT environment variable (read only by main) or directly in
// app.Options.Root. Log lines always show the logical (unprefixed) path, as a real K3s would.
package paths

import (
	"path/filepath"
)

// Logical paths used by K3s v1.36.3 and by the simulator.
const (
	// DefaultConfig is K3s's config file; drop-ins live in DefaultConfig + ".d".
	DefaultConfig = "/etc/rancher/k3s/config.yaml"
	// DefaultKubeconfig is where a server writes the admin kubeconfig.
	DefaultKubeconfig = "/etc/rancher/k3s/k3s.yaml"
	// DefaultDataDir is K3s's data directory (data-dir).
	DefaultDataDir = "/var/lib/rancher/k3s"
	// SubnetEnv is the file embedded flannel writes once the node has a PodCIDR.
	SubnetEnv = "/run/flannel/subnet.env"
	// KnobsFile holds the simulator's test-only knobs (e2e/k3ssim/README.md, "Knobs").
	KnobsFile = "/etc/k3ssim/sim.yaml"
	// OSRelease is read for the Node's status.nodeInfo.osImage.
	OSRelease = "/etc/os-release"
)

// Root is a directory prefix for every absolute path the simulator touches. The zero value
// means "no prefix".
type Root string

// Path returns the physical path for the logical path p: p itself when r is empty or p is
// relative, else p joined under r.
func (r Root) Path(p string) string {
	if r == "" || !filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(string(r), p)
}
