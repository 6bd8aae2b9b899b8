// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"sort"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// ReadBinaryReleases reads the K3s release of every airgap binary the inventory names
// (spec.k3s.airgap.ARCH.binary, resolved like every inventory path) with k3s.BinaryReleaseFile,
// by architecture, for Input.BinaryReleases. It reads local files only; nil when the install
// is not airgap. A file that cannot be read or holds no release gets Err.
func ReadBinaryReleases(c *inventory.Cluster) map[string]BinaryRelease {
	if c == nil || c.Spec.K3s.Install != inventory.Airgap || len(c.Spec.K3s.Airgap) == 0 {
		return nil
	}
	out := map[string]BinaryRelease{}
	for arch, a := range c.Spec.K3s.Airgap {
		if a.Binary == "" {
			continue
		}
		file := c.ResolvePath(a.Binary)
		rel, err := k3s.BinaryReleaseFile(file)
		out[arch] = BinaryRelease{File: file, Release: rel, Err: err}
	}
	return out
}

// checkAirgapRelease: with an airgap install the uploaded binary is what runs, whatever
// spec.k3s.version says; K3s itself would start it without a word, and the next apply would
// then find a different release installed (docs/k3s.md, Airgap). An error for each
// architecture whose binary is another release than spec.k3s.version, naming both versions
// and the file; a warning when a binary's release cannot be read.
func checkAirgapRelease(in *Input) []finding.Finding {
	c := in.Cluster
	want := c.Spec.K3s.Version
	if c.Spec.K3s.Install != inventory.Airgap || want == "" || len(in.BinaryReleases) == 0 {
		return nil
	}
	var names []string
	for _, h := range c.Spec.Hosts {
		names = append(names, h.Name)
	}
	hosts := hostList(c, names)
	archs := make([]string, 0, len(in.BinaryReleases))
	for a := range in.BinaryReleases {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	var out []finding.Finding
	for _, arch := range archs {
		b := in.BinaryReleases[arch]
		path := fmt.Sprintf("spec.k3s.airgap.%s.binary", arch)
		switch {
		case b.Err != nil:
			out = append(out, warnf(hosts,
				fmt.Sprintf("check that %s is the K3s %s binary for %s (from the release's assets)", setting(c, path, ""), want, arch),
				"cannot tell which K3s release the airgap binary %s is, so it is not compared with spec.k3s.version %s: %v", b.File, want, b.Err))
		case b.Release != want:
			out = append(out, errorf(hosts,
				fmt.Sprintf("set spec.k3s.version: %s to install that binary, or replace %s with the %s binary (and its images archive) for %s",
					b.Release, b.File, want, arch),
				"spec.k3s.version is %s but the airgap binary %s is %s: the binary is what would be installed and started, and the next apply would find %s instead of %s",
				want, b.File, b.Release, b.Release, want))
		}
	}
	return out
}
