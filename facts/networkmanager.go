// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"slices"
	"strings"
)

// NetworkManager's and nm-cloud-setup's state and what NetworkManager leaves unmanaged
// (netcheck.NetworkManagers). network_parse.go reads them.

// NetworkManager is NetworkManager's state and configuration on a host.
type NetworkManager struct {
	// Units maps NetworkManager.service, nm-cloud-setup.service and nm-cloud-setup.timer to
	// `systemctl is-active` and `is-enabled` ("active"/"enabled"; "" when the unit does not
	// exist).
	Active  map[string]string `json:"active,omitempty"`
	Enabled map[string]string `json:"enabled,omitempty"`
	// Devices are `nmcli -t -f DEVICE,TYPE,STATE device status`.
	Devices []NMDevice `json:"devices,omitempty"`
	// Conf are NetworkManager's configuration files in the order it reads them.
	Conf []NMConf `json:"conf,omitempty"`
}

// Running reports whether NetworkManager runs.
func (n NetworkManager) Running() bool { return n.Active["NetworkManager.service"] == "active" }

// CloudSetupEnabled returns the nm-cloud-setup units that are enabled.
func (n NetworkManager) CloudSetupEnabled() []string {
	var out []string
	for _, u := range []string{"nm-cloud-setup.service", "nm-cloud-setup.timer"} {
		if n.Enabled[u] == "enabled" || n.Active[u] == "active" {
			out = append(out, u)
		}
	}
	return out
}

// NMDevice is one device as nmcli sees it.
type NMDevice struct {
	Device string `json:"device"`
	Type   string `json:"type"`
	State  string `json:"state"`
}

// NMConf is one NetworkManager configuration file.
type NMConf struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// Unmanaged returns the effective [keyfile] unmanaged-devices specs of the configuration
// (NetworkManager.conf(5): later files override a key; "key+=" appends and "key-=" removes
// list items) and the files that set them.
func (n NetworkManager) Unmanaged() ([]string, []string) {
	var specs, from []string
	for _, c := range n.Conf {
		section := ""
		for _, l := range strings.Split(c.Text, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
				continue
			}
			if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
				section = strings.TrimSpace(l[1 : len(l)-1])
				continue
			}
			if section != "keyfile" {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			k = strings.TrimSpace(k)
			items := splitNMList(v)
			switch k {
			case "unmanaged-devices":
				specs = items
				from = []string{c.Path}
			case "unmanaged-devices+":
				specs = append(specs, items...)
				from = append(from, c.Path)
			case "unmanaged-devices-":
				specs = slices.DeleteFunc(specs, func(s string) bool { return slices.Contains(items, s) })
				from = append(from, c.Path)
			}
		}
	}
	return specs, from
}

func splitNMList(v string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// NMUnmanagedMatches reports whether an unmanaged-devices spec list covers interface name
// (NetworkManager.conf(5) "Device List Format": interface-name:NAME with * and ? globs,
// "except:" entries ignored here, mac: and type: specs not matched by name).
func NMUnmanagedMatches(specs []string, name string) bool {
	for _, s := range specs {
		v, ok := strings.CutPrefix(s, "interface-name:")
		if !ok {
			continue
		}
		v = strings.TrimPrefix(strings.TrimPrefix(v, "="), "~")
		if globMatch(v, name) {
			return true
		}
	}
	return false
}

// globMatch matches * and ? wildcards.
func globMatch(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(pat[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(pat[1:], s[1:])
	}
	return s != "" && pat[0] == s[0] && globMatch(pat[1:], s[1:])
}
