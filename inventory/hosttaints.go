// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import "sort"

// A host's taints have one rule (docs/k3s.md "Flags", docs/failure-modes.md F3):
// node-taint of its K3s config (spec.hosts[].k3s.config replaces spec.k3s.config, K3sConfig.Merge),
// then spec.hosts[].taints that are not already there. hostTaints applies it once and gives both
// forms: the list HostConfig renders as node-taint (the config's entries as the user wrote them)
// and the typed taints every reader uses — the plan (through HostConfig), drift, preflight,
// the Rancher registration, the SUC Plans and the joins' wait for a node's taints.

// hostTaints returns node-taint as HostConfig renders it (configured, the entries of the merged
// K3s config) and the taints h registers with: parsed, deduplicated by their text, in config order.
// Entries that do not parse are rendered but not returned (inventory validation reports them).
func hostTaints(configured StringList, h *Host) (StringList, []Taint) {
	render := configured
	for _, t := range h.Taints {
		render = appendUnique(render, t.String())
	}
	seen := map[string]bool{}
	var out []Taint
	add := func(t Taint) {
		if s := t.String(); !seen[s] {
			seen[s] = true
			out = append(out, t)
		}
	}
	for _, s := range configured {
		if t, err := ParseTaint(s); err == nil {
			add(t)
		}
	}
	for _, t := range h.Taints {
		add(t)
	}
	return render, out
}

// HostTaints returns the taints h registers with (the rule above): what K3s gets as node-taint,
// typed. The slice is new on every call; nil when h has none.
func (c *Cluster) HostTaints(h *Host) []Taint {
	_, ts := hostTaints(c.Spec.K3s.Config.Merge(h.K3s.Config).NodeTaint, h)
	return ts
}

// DeclaredTaints returns every taint a host of c registers with (HostTaints of each host),
// deduplicated and sorted by key, effect and value.
func (c *Cluster) DeclaredTaints() []Taint {
	seen := map[string]bool{}
	var out []Taint
	for i := range c.Spec.Hosts {
		for _, t := range c.HostTaints(&c.Spec.Hosts[i]) {
			if s := t.String(); !seen[s] {
				seen[s] = true
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Effect != b.Effect {
			return a.Effect < b.Effect
		}
		return a.Value < b.Value
	})
	return out
}
