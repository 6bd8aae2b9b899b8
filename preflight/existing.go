// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// checkExistingInstall: a K3s already on the host. Re-running apply reconciles it (warning);
// the wrong unit for the host's role, or a binary newer than spec.k3s.version (a downgrade,
// which K3s does not support), is an error.
func checkExistingInstall(in *Input) []finding.Finding {
	c := in.Cluster
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		k := f.K3s
		if !k.Installed() {
			return nil
		}
		state := describeInstall(k)
		wantUnit, wrongUnit := k3s.UnitServer, k3s.UnitAgent
		if h.Role == inventory.RoleAgent {
			wantUnit, wrongUnit = k3s.UnitAgent, k3s.UnitServer
		}
		uninstall := uninstallScript(k.Service)
		var out []finding.Finding
		if slices.Contains(k.Services, wrongUnit) || k.Service == wrongUnit {
			out = append(out, errorf(h.Name,
				fmt.Sprintf("uninstall the existing K3s first (%s removes its data too), or change spec.hosts[].role of %s to match", uninstallScript(wrongUnit), h.Name),
				"the inventory makes this host a%s %s, but it has the %s unit of a K3s %s installed (%s); k3strap would install %s.service beside it",
				article(string(h.Role)), h.Role, wrongUnit, roleOfUnit(wrongUnit), state, wantUnit))
		}
		want := c.Spec.K3s.Version
		have, okHave := k3s.ParseRelease(k.BinaryVersion)
		spec, okSpec := k3s.ParseRelease(want)
		if okHave && okSpec && have.Compare(spec) > 0 {
			out = append(out, errorf(h.Name,
				fmt.Sprintf("set spec.k3s.version to %s or newer, or uninstall K3s on the host first (%s)", k.BinaryVersion, uninstall),
				"K3s %s is installed, newer than spec.k3s.version %s: K3s does not support downgrades", k.BinaryVersion, want))
		}
		if len(out) > 0 {
			return out
		}
		target := want
		if target == "" {
			target = "channel " + c.Spec.K3s.Channel
		}
		action := "reconcile it (config, unit, version) to " + target
		upgrade := okHave && okSpec && have.Compare(spec) < 0
		if upgrade {
			action = fmt.Sprintf("upgrade it from %s to %s", k.BinaryVersion, want)
		}
		if k.ManagedByK3strap() && !upgrade {
			// A re-run of k3strap on a host it installed: nothing to warn about.
			return nil
		}
		return []finding.Finding{warnf(h.Name,
			"nothing to do if this is a re-run; to start from scratch, uninstall K3s first ("+uninstall+")",
			"K3s is already installed (%s); apply will %s", state, action)}
	})
}

func describeInstall(k facts.K3sInstall) string {
	var parts []string
	if k.BinaryVersion != "" {
		parts = append(parts, "binary "+k.BinaryVersion)
	} else if k.BinaryPath != "" {
		parts = append(parts, fmt.Sprintf("binary %s of unknown version (%q)", k.BinaryPath, k.BinaryLabel))
	}
	if k.Service != "" {
		s := k.Service + ".service"
		if k.ServiceActive != "" {
			s += " " + k.ServiceActive
		}
		if k.ServiceEnabled != "" {
			s += ", " + k.ServiceEnabled
		}
		parts = append(parts, s)
	}
	if k.TokenPresent {
		parts = append(parts, "server token present")
	}
	return strings.Join(parts, "; ")
}

// uninstallScript is the script K3s's install.sh writes for a unit (k3s when unknown).
func uninstallScript(unit string) string {
	if unit == k3s.UnitAgent {
		return k3s.PathAgentUninstall
	}
	return k3s.PathUninstall
}

func roleOfUnit(u string) string {
	if u == k3s.UnitAgent {
		return "agent"
	}
	return "server"
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}
