// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// DefaultVersion is the K3s release k3strap offers by default and is tested against (the
// release the flag table and the fixtures were taken from).
const DefaultVersion = "v1.36.3+k3s1"

// ReleasePattern matches a K3s release: vMAJOR.MINOR.PATCH[-rcN]+k3sN, e.g. v1.31.4+k3s1 or
// v1.36.0-rc1+k3s1 (the tags of k3s-io/k3s releases). It is not anchored.
const ReleasePattern = `v\d+\.\d+\.\d+(?:-rc\d+)?\+k3s\d+`

// The compiled patterns (never written after initialisation).
var (
	releaseRE         = regexp.MustCompile(ReleasePattern)
	releaseAnchoredRE = regexp.MustCompile(`^` + ReleasePattern + `$`)
)

// IsRelease reports whether s is exactly a K3s release (ReleasePattern), not a channel name.
func IsRelease(s string) bool { return releaseAnchoredRE.MatchString(s) }

// FindRelease returns the first K3s release in text (e.g. in `k3s version v1.36.3+k3s1
// (…)`), or "" when there is none.
func FindRelease(text string) string { return releaseRE.FindString(text) }

// Release is a parsed K3s release vMAJOR.MINOR.PATCH[-PRE]+k3sN.
type Release struct {
	Major, Minor, Patch int
	// Pre is the pre-release ("rc1"), "" for a release.
	Pre string
	// K3s is the N of +k3sN (0 when absent).
	K3s int
}

// ParseRelease parses "v1.36.3+k3s1", "v1.36.3-rc1+k3s1", or a bare "1.36.3"; ok is false
// for anything else (a channel name such as "stable", "").
func ParseRelease(s string) (r Release, ok bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	core, build, _ := strings.Cut(s, "+")
	core, r.Pre, _ = strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return Release{}, false
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Release{}, false
		}
		nums[i] = n
	}
	r.Major, r.Minor, r.Patch = nums[0], nums[1], nums[2]
	if n, ok := strings.CutPrefix(build, "k3s"); ok {
		r.K3s, _ = strconv.Atoi(n)
	}
	return r, true
}

// String renders the release as vX.Y.Z[-PRE]+k3sN (without +k3sN when K3s is 0).
func (r Release) String() string {
	s := fmt.Sprintf("v%d.%d.%d", r.Major, r.Minor, r.Patch)
	if r.Pre != "" {
		s += "-" + r.Pre
	}
	if r.K3s > 0 {
		s += fmt.Sprintf("+k3s%d", r.K3s)
	}
	return s
}

// Compare returns -1, 0 or 1 as r is older than, equal to or newer than o. A pre-release sorts
// before its release; pre-releases compare as strings; then +k3sN numerically.
func (r Release) Compare(o Release) int {
	for _, d := range [][2]int{{r.Major, o.Major}, {r.Minor, o.Minor}, {r.Patch, o.Patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case r.Pre == o.Pre:
	case r.Pre == "":
		return 1
	case o.Pre == "":
		return -1
	case r.Pre < o.Pre:
		return -1
	default:
		return 1
	}
	switch {
	case r.K3s < o.K3s:
		return -1
	case r.K3s > o.K3s:
		return 1
	}
	return 0
}

// AtLeast reports whether r's Kubernetes minor is major.minor or newer.
func (r Release) AtLeast(major, minor int) bool {
	return r.Major > major || r.Major == major && r.Minor >= minor
}
