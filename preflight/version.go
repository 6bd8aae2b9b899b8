package preflight

import (
	"strconv"
	"strings"
)

// k3sVersion is a K3s release version vMAJOR.MINOR.PATCH[-PRE]+k3sN.
type k3sVersion struct {
	major, minor, patch int
	pre                 string
	k3s                 int
}

// parseK3sVersion parses "v1.36.3+k3s1", "v1.36.3-rc1+k3s1" or "1.36.3"; ok is false for
// anything else (a channel name, "").
func parseK3sVersion(s string) (v k3sVersion, ok bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	core, build, _ := strings.Cut(s, "+")
	core, v.pre, _ = strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return k3sVersion{}, false
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return k3sVersion{}, false
		}
		nums[i] = n
	}
	v.major, v.minor, v.patch = nums[0], nums[1], nums[2]
	if n, ok := strings.CutPrefix(build, "k3s"); ok {
		v.k3s, _ = strconv.Atoi(n)
	}
	return v, true
}

// compare returns -1, 0 or 1. A pre-release sorts before its release; pre-releases compare as
// strings.
func (a k3sVersion) compare(b k3sVersion) int {
	for _, d := range [][2]int{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.pre == b.pre:
	case a.pre == "":
		return 1
	case b.pre == "":
		return -1
	case a.pre < b.pre:
		return -1
	default:
		return 1
	}
	switch {
	case a.k3s < b.k3s:
		return -1
	case a.k3s > b.k3s:
		return 1
	}
	return 0
}

func (a k3sVersion) atLeast(major, minor int) bool {
	return a.major > major || a.major == major && a.minor >= minor
}
