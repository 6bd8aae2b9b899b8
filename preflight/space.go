// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// Write is something k3strap will write on a host: at most Bytes at once into Dir (an upload
// as root holds the partial file and its copy at the same time), for What (named in a
// finding, e.g. "/usr/local/bin/k3s (68 MiB, uploaded then copied into place)").
type Write struct {
	Dir   string
	Bytes int64
	What  string
}

// checkUploadSpace: every filesystem k3strap writes to — where the binary and K3s's scripts
// go, k3strap's own files, K3s's configuration, the airgap images, the staging directory of a
// login user other than root, the install script's temporary directory — must be writable
// and have room for everything the plan writes there (Input.Writes, summed per filesystem).
func checkUploadSpace(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		writes := in.Writes[h.Name]
		if len(writes) == 0 {
			return nil
		}
		if len(f.Space) == 0 {
			return []finding.Finding{warnf(h.Name, "check that df works on the host",
				"free space where k3strap writes unknown (df printed nothing for %s)", writes[0].Dir)}
		}
		type fsNeed struct {
			space *facts.DirSpace
			bytes int64
			what  []string
			dirs  []string
		}
		byMount := map[string]*fsNeed{}
		var order []string
		for _, w := range writes {
			sp := f.SpaceOf(w.Dir)
			if sp == nil {
				continue
			}
			n := byMount[sp.Mount]
			if n == nil {
				n = &fsNeed{space: sp}
				byMount[sp.Mount] = n
				order = append(order, sp.Mount)
			}
			n.bytes += w.Bytes
			n.what = append(n.what, w.What)
			if !slices.Contains(n.dirs, w.Dir) {
				n.dirs = append(n.dirs, w.Dir)
			}
		}
		sort.Strings(order)
		var out []finding.Finding
		for _, m := range order {
			n := byMount[m]
			where := strings.Join(n.dirs, ", ")
			on := ""
			if m != "" && (len(n.dirs) > 1 || n.dirs[0] != m) {
				on = " (the filesystem mounted at " + m + ")"
			}
			free := n.space.FreeKiB * 1024
			switch {
			case n.space.ReadOnly:
				out = append(out, errorf(h.Name, fmt.Sprintf("remount %s read-write, or give k3strap a host whose %s is writable", m, where),
					"%s%s is mounted read-only; k3strap writes %s there: %s", where, on, fmtKiB((n.bytes+1023)/1024), strings.Join(n.what, "; ")))
			case free < n.bytes:
				out = append(out, errorf(h.Name, fmt.Sprintf("free at least %s on %s, or mount a larger disk there", fmtKiB((n.bytes-free+1023)/1024), where),
					"only %s free on %s%s, and k3strap writes %s there: %s", fmtKiB(n.space.FreeKiB), where, on, fmtKiB((n.bytes+1023)/1024), strings.Join(n.what, "; ")))
			}
		}
		return out
	})
}
