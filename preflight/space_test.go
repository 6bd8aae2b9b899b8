// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"testing"

	"github.com/k3strap/k3strap/facts"
)

func TestUploadSpace(t *testing.T) {
	const mib = 1 << 20
	rootfs := func(freeKiB int64, ro bool) []facts.DirSpace {
		var out []facts.DirSpace
		for _, d := range []string{"/usr/local/bin", "/var/lib/k3strap", "/etc/rancher/k3s", "/var/lib/rancher", "/var/tmp", "/tmp"} {
			out = append(out, facts.DirSpace{Dir: d, Mount: "/", FreeKiB: freeKiB, ReadOnly: ro})
		}
		return out
	}
	space := func(sp []facts.DirSpace) func(string, *facts.Host) {
		return only("w1", func(f *facts.Host) { f.Space = sp })
	}
	writes := map[string][]Write{"w1": {
		{Dir: "/usr/local/bin", Bytes: 136 * mib, What: "/usr/local/bin/k3s (68 MiB, uploaded then copied into place)"},
		{Dir: "/var/lib/k3strap", Bytes: 40 << 10, What: "/var/lib/k3strap/k3s-install.sh (40 KiB)"},
		{Dir: "/etc/rancher/k3s", Bytes: 1 << 10, What: "/etc/rancher/k3s/config.yaml (1 KiB)"},
	}}
	with := func(sp []facts.DirSpace) *Input {
		in := input(cp1w1(), space(sp))
		in.Writes = writes
		return in
	}
	// /usr/local/bin on its own small tmpfs, the rest on / with room.
	smallBin := append([]facts.DirSpace{{Dir: "/usr/local/bin", Mount: "/usr/local/bin", FreeKiB: 24 << 10}}, rootfs(50<<20, false)[1:]...)
	runCases(t, "UploadSpace", []checkCase{
		{"no writes planned", input(cp1w1(), space(rootfs(1, false))), nil},
		{"plenty", with(rootfs(50<<20, false)), nil},
		{"own small filesystem", with(smallBin), []want{
			errW("w1", "only 24 MiB free on /usr/local/bin", "k3strap writes 136 MiB there", "/usr/local/bin/k3s (68 MiB, uploaded then copied into place)").
				withFix("free at least 112 MiB on /usr/local/bin"),
		}},
		{"root filesystem summed", with(rootfs(136<<10, false)), []want{
			errW("w1", "only 136 MiB free on /usr/local/bin, /var/lib/k3strap, /etc/rancher/k3s (the filesystem mounted at /)", "/etc/rancher/k3s/config.yaml"),
		}},
		{"read-only", with(rootfs(50<<20, true)), []want{errW("w1", "mounted read-only", "/usr/local/bin").withFix("remount / read-write")}},
		{"df printed nothing", with(nil), []want{warnW("w1", "free space where k3strap writes unknown")}},
	})
}

func TestSpaceOf(t *testing.T) {
	f := &facts.Host{Space: []facts.DirSpace{{Dir: "/var/lib/rancher", Mount: "/"}, {Dir: "/var/lib/rancher/k3s", Mount: "/data"}, {Dir: "/usr/local/bin", Mount: "/"}}}
	for p, want := range map[string]string{"/var/lib/rancher/k3s/agent/images": "/var/lib/rancher/k3s", "/var/lib/rancher": "/var/lib/rancher",
		"/var/lib/ranchers": "", "/usr/local/bin": "/usr/local/bin"} {
		got := ""
		if sp := f.SpaceOf(p); sp != nil {
			got = sp.Dir
		}
		if got != want {
			t.Errorf("SpaceOf(%s) = %q, want %q", p, got, want)
		}
	}
}
