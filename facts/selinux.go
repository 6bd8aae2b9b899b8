// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"strings"
)

// SELinux is what the host says about SELinux (docs/k3s.md, SELinux).
type SELinux struct {
	// Getenforce is `getenforce`'s answer (Enforcing, Permissive, Disabled), "" when the
	// command is missing.
	Getenforce string `json:"getenforce,omitempty"`
	// Enforce is /sys/fs/selinux/enforce ("1" enforcing, "0" permissive), "" when absent.
	Enforce string `json:"enforce,omitempty"`
	// Policy says how the k3s-selinux policy was found installed: "rpm" (rpm -q k3s-selinux),
	// "semodule" (a k3s module in semodule -l), "" when not found.
	Policy string `json:"policy,omitempty"`
}

// Mode is "enforcing", "permissive" or "disabled" (SELinux absent or off).
func (s SELinux) Mode() string {
	switch strings.ToLower(strings.TrimSpace(s.Getenforce)) {
	case "enforcing":
		return "enforcing"
	case "permissive":
		return "permissive"
	}
	switch strings.TrimSpace(s.Enforce) {
	case "1":
		return "enforcing"
	case "0":
		return "permissive"
	}
	return "disabled"
}

// Enforcing reports whether SELinux enforces on the host.
func (s SELinux) Enforcing() bool { return s.Mode() == "enforcing" }

// Source says where Mode came from, for messages.
func (s SELinux) Source() string {
	switch {
	case s.Getenforce != "":
		return "getenforce says " + s.Getenforce
	case s.Enforce != "":
		return "/sys/fs/selinux/enforce is " + s.Enforce
	}
	return "no getenforce and no /sys/fs/selinux/enforce"
}

// SELinuxDistribution is the k3s-selinux RPM family for the host's OS, as the official install
// script picks it: el7, el8, el9, el10 for RHEL and its rebuilds (and Fedora: el9... by the
// script's mapping, not handled here), sle for SUSE (SLES, SLE Micro, openSUSE MicroOS); ""
// when the OS is not RPM-based (no k3s-selinux RPM exists for it).
func (h *Host) SELinuxDistribution() string {
	id := " " + strings.ToLower(h.OS.ID+" "+h.OS.IDLike) + " "
	major, _, _ := strings.Cut(h.OS.VersionID, ".")
	switch {
	case strings.Contains(id, " suse ") || strings.Contains(id, " sles ") || strings.Contains(id, " sle-micro ") || strings.Contains(id, " opensuse"):
		return "sle"
	case strings.Contains(id, " rhel ") || strings.Contains(id, " centos ") || strings.Contains(id, " rocky ") ||
		strings.Contains(id, " almalinux ") || strings.Contains(id, " ol "):
		if major == "" {
			return ""
		}
		return "el" + major
	}
	return ""
}

func parseSELinux(_ *parser, h *Host, s *section) error {
	return keyValues(s, func(k, v string) error {
		switch k {
		case "getenforce":
			h.SELinux.Getenforce = strings.TrimSpace(v)
		case "enforce":
			h.SELinux.Enforce = strings.TrimSpace(v)
		case "policy":
			h.SELinux.Policy = strings.TrimSpace(v)
		}
		return nil
	})
}
