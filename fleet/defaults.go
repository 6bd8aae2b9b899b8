// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/k3strap/k3strap/inventory"
)

// How a site inventory and the fleet's spec.defaults merge (docs/fleet.md#defaults). The
// defaults come in groups of fields that only make sense together; a site that sets any field
// of a group keeps its own values for the whole group, otherwise it takes the fleet's. "Sets"
// means the site file gives the field a value (an empty value or null counts as unset).
// Precedence: a command-line flag > a K3STRAP_* variable > the site file > the fleet defaults
// > k3strap's own defaults; a host's own ssh settings still win for that host.
//
//	group         fields (spec.k3s.*, spec.ssh.*, spec.registries)        taken from the fleet when the site sets
//	release       k3s.version, k3s.channel                                 neither
//	install       k3s.install                                              it not
//	airgap        k3s.airgap, airgapBundle, airgapInstallScript,           none of them, and not install: online
//	              selinuxRPMs
//	online        k3s.installScriptURL, installScriptSHA256, releaseURL    none of them, and not install: airgap
//	registries    registries (the whole registries.yaml: replace, not      it not
//	              merge, as hosts[].registries replace spec.registries)
//	ssh.<field>   ssh.user, port, keyPath, agent, knownHosts,              that field not (one group per field)
//	              connectTimeout
//	ssh.bastion   ssh.bastion (address, user, port, keyPath together)      it not
//	sudo password ssh.sudoPasswordEnv, ssh.sudoPasswordFile                neither
//
// Relative paths in the defaults are relative to the fleet file's directory.

// defaultGroup is one group of fields that merge together.
type defaultGroup struct {
	// name identifies the group in the digest.
	name string
	// fleet are the fleet file's field paths of the group (for positions in messages).
	fleet []string
	// site are the inventory field paths the group sets.
	site []string
	// siteSets reports whether the site sets any field of the group (before any default).
	siteSets func(c *inventory.Cluster) bool
	// has reports whether the fleet gives the group a value.
	has func(d *Defaults) bool
	// value is the group's fleet value (for the digest).
	value func(d *Defaults) any
	// apply copies the fleet's values into c.
	apply func(c *inventory.Cluster, d *Defaults)
}

// defaultGroups lists every group in a fixed order (the digest's).
func defaultGroups() []defaultGroup {
	k := func(c *inventory.Cluster) *inventory.K3s { return &c.Spec.K3s }
	groups := []defaultGroup{
		{name: "release", fleet: []string{"k3s.version", "k3s.channel"}, site: []string{"spec.k3s.version", "spec.k3s.channel"},
			siteSets: func(c *inventory.Cluster) bool { return k(c).Version != "" || k(c).Channel != "" },
			has:      func(d *Defaults) bool { return d.K3s.Version != "" || d.K3s.Channel != "" },
			value:    func(d *Defaults) any { return []string{d.K3s.Version, d.K3s.Channel} },
			apply: func(c *inventory.Cluster, d *Defaults) {
				k(c).Version, k(c).Channel = d.K3s.Version, d.K3s.Channel
			}},
		{name: "install", fleet: []string{"k3s.install"}, site: []string{"spec.k3s.install"},
			siteSets: func(c *inventory.Cluster) bool { return k(c).Install != "" },
			has:      func(d *Defaults) bool { return d.K3s.Install != "" },
			value:    func(d *Defaults) any { return d.K3s.Install },
			apply:    func(c *inventory.Cluster, d *Defaults) { k(c).Install = d.K3s.Install }},
		{name: "airgap", fleet: []string{"k3s.airgap", "k3s.airgapBundle", "k3s.airgapInstallScript", "k3s.selinuxRPMs"},
			site: []string{"spec.k3s.airgap", "spec.k3s.airgapBundle", "spec.k3s.airgapInstallScript", "spec.k3s.selinuxRPMs"},
			siteSets: func(c *inventory.Cluster) bool {
				return len(k(c).Airgap) > 0 || k(c).AirgapBundle != "" || k(c).AirgapInstallScript != "" || len(k(c).SELinuxRPMs) > 0 ||
					k(c).Install == inventory.Online
			},
			has: func(d *Defaults) bool {
				return len(d.K3s.Airgap) > 0 || d.K3s.AirgapBundle != "" || d.K3s.AirgapInstallScript != "" || len(d.K3s.SELinuxRPMs) > 0
			},
			value: func(d *Defaults) any {
				return []any{d.K3s.Airgap, d.K3s.AirgapBundle, d.K3s.AirgapInstallScript, d.K3s.SELinuxRPMs}
			},
			apply: func(c *inventory.Cluster, d *Defaults) {
				k(c).Airgap = maps.Clone(d.K3s.Airgap)
				k(c).AirgapBundle, k(c).AirgapInstallScript = d.K3s.AirgapBundle, d.K3s.AirgapInstallScript
				k(c).SELinuxRPMs = maps.Clone(d.K3s.SELinuxRPMs)
			}},
		{name: "online", fleet: []string{"k3s.installScriptURL", "k3s.installScriptSHA256", "k3s.releaseURL"},
			site: []string{"spec.k3s.installScriptURL", "spec.k3s.installScriptSHA256", "spec.k3s.releaseURL"},
			siteSets: func(c *inventory.Cluster) bool {
				return k(c).InstallScriptURL != "" || k(c).InstallScriptSHA256 != "" || k(c).ReleaseURL != "" || k(c).Install == inventory.Airgap
			},
			has: func(d *Defaults) bool {
				return d.K3s.InstallScriptURL != "" || d.K3s.InstallScriptSHA256 != "" || d.K3s.ReleaseURL != ""
			},
			value: func(d *Defaults) any {
				return []string{d.K3s.InstallScriptURL, d.K3s.InstallScriptSHA256, d.K3s.ReleaseURL}
			},
			apply: func(c *inventory.Cluster, d *Defaults) {
				k(c).InstallScriptURL, k(c).InstallScriptSHA256, k(c).ReleaseURL = d.K3s.InstallScriptURL, d.K3s.InstallScriptSHA256, d.K3s.ReleaseURL
			}},
		{name: "registries", fleet: []string{"registries"}, site: []string{"spec.registries"},
			siteSets: func(c *inventory.Cluster) bool { return c.Spec.Registries != nil },
			has:      func(d *Defaults) bool { return d.Registries != nil },
			value:    func(d *Defaults) any { return d.Registries },
			apply: func(c *inventory.Cluster, d *Defaults) {
				r := *d.Registries
				c.Spec.Registries = &r
			}},
		{name: "ssh.bastion", fleet: []string{"ssh.bastion"}, site: []string{"spec.ssh.bastion"},
			siteSets: func(c *inventory.Cluster) bool { return c.Spec.SSH.Bastion != nil },
			has:      func(d *Defaults) bool { return d.SSH.Bastion != nil },
			value:    func(d *Defaults) any { return d.SSH.Bastion },
			apply: func(c *inventory.Cluster, d *Defaults) {
				b := *d.SSH.Bastion
				c.Spec.SSH.Bastion = &b
			}},
		{name: "ssh.sudoPassword", fleet: []string{"ssh.sudoPasswordEnv", "ssh.sudoPasswordFile"}, site: []string{"spec.ssh.sudoPasswordEnv", "spec.ssh.sudoPasswordFile"},
			siteSets: func(c *inventory.Cluster) bool {
				return c.Spec.SSH.SudoPasswordEnv != "" || c.Spec.SSH.SudoPasswordFile != ""
			},
			has:   func(d *Defaults) bool { return d.SSH.SudoPasswordEnv != "" || d.SSH.SudoPasswordFile != "" },
			value: func(d *Defaults) any { return []string{d.SSH.SudoPasswordEnv, d.SSH.SudoPasswordFile} },
			apply: func(c *inventory.Cluster, d *Defaults) {
				c.Spec.SSH.SudoPasswordEnv, c.Spec.SSH.SudoPasswordFile = d.SSH.SudoPasswordEnv, d.SSH.SudoPasswordFile
			}},
	}
	// One group per plain SSH field.
	type sshField struct {
		name string
		get  func(s *inventory.SSH) any
		set  func(dst, src *inventory.SSH)
		zero func(s *inventory.SSH) bool
	}
	for _, f := range []sshField{
		{"user", func(s *inventory.SSH) any { return s.User }, func(d, s *inventory.SSH) { d.User = s.User }, func(s *inventory.SSH) bool { return s.User == "" }},
		{"port", func(s *inventory.SSH) any { return s.Port }, func(d, s *inventory.SSH) { d.Port = s.Port }, func(s *inventory.SSH) bool { return s.Port == 0 }},
		{"keyPath", func(s *inventory.SSH) any { return s.KeyPath }, func(d, s *inventory.SSH) { d.KeyPath = s.KeyPath }, func(s *inventory.SSH) bool { return s.KeyPath == "" }},
		{"agent", func(s *inventory.SSH) any { return s.Agent }, func(d, s *inventory.SSH) { d.Agent = s.Agent }, func(s *inventory.SSH) bool { return s.Agent == nil }},
		{"knownHosts", func(s *inventory.SSH) any { return s.KnownHosts }, func(d, s *inventory.SSH) { d.KnownHosts = s.KnownHosts }, func(s *inventory.SSH) bool { return s.KnownHosts == "" }},
		{"connectTimeout", func(s *inventory.SSH) any { return s.ConnectTimeout.D().String() }, func(d, s *inventory.SSH) { d.ConnectTimeout = s.ConnectTimeout }, func(s *inventory.SSH) bool { return s.ConnectTimeout == 0 }},
	} {
		groups = append(groups, defaultGroup{name: "ssh." + f.name, fleet: []string{"ssh." + f.name}, site: []string{"spec.ssh." + f.name},
			siteSets: func(c *inventory.Cluster) bool { return !f.zero(&c.Spec.SSH) },
			has:      func(d *Defaults) bool { return !f.zero(&d.SSH) },
			value:    func(d *Defaults) any { return f.get(&d.SSH) },
			apply:    func(c *inventory.Cluster, d *Defaults) { f.set(&c.Spec.SSH, &d.SSH) }})
	}
	return groups
}

// applyDefaults gives c (a site inventory as its file has it, paths resolved, before any other
// override and before k3strap's defaults) the fleet defaults of every group it does not set,
// records each field taken in c.Overridden (so that a problem with it names the fleet file's
// line), and returns the groups taken with their values, for the site's digest.
func (f *Fleet) applyDefaults(c *inventory.Cluster) []appliedGroup {
	d := &f.Spec.Defaults
	var taken []appliedGroup
	for _, g := range defaultGroups() {
		if !g.has(d) || g.siteSets(c) {
			continue
		}
		g.apply(c, d)
		if c.Overridden == nil {
			c.Overridden = map[string]string{}
		}
		for i, p := range g.site {
			c.Overridden[p] = f.where("spec.defaults." + g.fleet[min(i, len(g.fleet)-1)])
		}
		taken = append(taken, appliedGroup{Group: g.name, Value: g.value(d)})
	}
	return taken
}

// appliedGroup is one group of defaults a site took.
type appliedGroup struct {
	Group string `json:"group"`
	Value any    `json:"value"`
}

// where describes a fleet field for messages: "fleet defaults spec.defaults.k3s.version
// (fleet.yaml:12:7)".
func (f *Fleet) where(path string) string {
	pos := f.positionOf(path)
	loc := f.Source
	if pos.Line > 0 {
		loc += ":" + strconv.Itoa(pos.Line) + ":" + strconv.Itoa(pos.Column)
	}
	return fmt.Sprintf("the fleet's %s (%s)", path, loc)
}

// positionOf returns where path's value (or its closest enclosing field) stands in the fleet
// file.
func (f *Fleet) positionOf(path string) inventory.Position {
	for p := path; ; {
		if pos, ok := f.Positions[p]; ok {
			return pos
		}
		if pos, ok := f.KeyPositions[p]; ok {
			return pos
		}
		i := lastSep(p)
		if i < 0 {
			return inventory.Position{}
		}
		p = p[:i]
	}
}

// lastSep returns the index of the last '.' or '[' of a field path, -1 when none.
func lastSep(p string) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '.' || p[i] == '[' {
			return i
		}
	}
	return -1
}

// digestJSON is the canonical form of the defaults a site took (groups in defaultGroups'
// order; encoding/json sorts map keys).
func digestJSON(taken []appliedGroup) []byte {
	// Only strings, numbers, booleans, maps and structs of them: Marshal does not fail.
	b, _ := json.Marshal(taken)
	return b
}
