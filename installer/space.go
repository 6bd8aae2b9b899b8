// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"fmt"
	"path"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/preflight"
)

// onlineBinaryEstimate is the size assumed for the K3s binary an online install script
// downloads (into its temporary directory, then moved to k3s.DirBin) before it is known: the
// K3s v1.36.3+k3s1 amd64 binary (the largest architecture; github.com/k3s-io/k3s releases) is
// 78,893,218 bytes, 75 MiB.
const onlineBinaryEstimate = 80 << 20

// installTmpDir is where the official install script makes its temporary directory
// (`mktemp -d -t k3s-install.XXXXXXXXXX`: TMPDIR, which sudo does not pass, else /tmp).
const installTmpDir = "/tmp"

// plannedWrites is what k3strap will write on each host with a plan and facts, for
// preflight's UploadSpace: every planned file whose content the host does not hold yet, in
// its directory — twice its size for an upload as root (the partial file and the copy put
// into place exist together), and once more in remote.StagingDir for another login user —
// and, for an online install of a host without K3s, the binary the install script downloads.
func (s *session) plannedWrites() map[string][]preflight.Write {
	out := map[string][]preflight.Write{}
	for _, hs := range s.hosts {
		if hs.plan == nil || hs.facts == nil {
			continue
		}
		root := hs.facts.Sudo.Root // the login user is root: uploads go straight into place
		var ws []preflight.Write
		for _, f := range hs.plan.Files {
			have := hs.facts.K3s.Files[f.Path]
			if have == f.SHA256 || (f.Keep && have != "") {
				continue
			}
			size := remote.FormatBytes(f.Size)
			resumable := f.LocalPath != "" && f.SHA256 != ""
			switch {
			case root && resumable:
				ws = append(ws, preflight.Write{Dir: path.Dir(f.Path), Bytes: 2 * f.Size, What: fmt.Sprintf("%s (%s, uploaded then copied into place)", f.Path, size)})
			case root:
				ws = append(ws, preflight.Write{Dir: path.Dir(f.Path), Bytes: f.Size, What: fmt.Sprintf("%s (%s)", f.Path, size)})
			default:
				ws = append(ws, preflight.Write{Dir: remote.StagingDir, Bytes: f.Size, What: fmt.Sprintf("%s staged for %s (%s)", remote.StagingDir, f.Path, size)},
					preflight.Write{Dir: path.Dir(f.Path), Bytes: f.Size, What: fmt.Sprintf("%s (%s)", f.Path, size)})
			}
		}
		if !hs.plan.Airgap && !hs.facts.K3s.Installed() {
			est := remote.FormatBytes(onlineBinaryEstimate)
			ws = append(ws, preflight.Write{Dir: installTmpDir, Bytes: onlineBinaryEstimate, What: "the K3s binary the install script downloads (about " + est + ")"},
				preflight.Write{Dir: k3s.DirBin, Bytes: onlineBinaryEstimate, What: k3s.PathBinary + " (about " + est + ", downloaded)"})
		}
		out[hs.host.Name] = ws
	}
	return out
}
