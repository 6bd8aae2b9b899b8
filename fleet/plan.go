// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Shard is one of N parts of a fleet (--shard I/N): the sites whose ShardOf is I.
type Shard struct {
	// I is the part, 1..N; N the number of parts. The zero Shard is the whole fleet.
	I, N int
}

// ParseShard reads "I/N" (1 ≤ I ≤ N).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: write I/N with 1 ≤ I ≤ N, e.g. --shard 2/4 for the second of four runners", s)
	}
	return Shard{I: i, N: n}, nil
}

// String is "I/N", "" for the whole fleet.
func (s Shard) String() string {
	if s.N == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}

// ShardOf returns the part (1..n) a site belongs to when the fleet is split in n: the 32-bit
// FNV-1a hash of the site's name, modulo n, plus one. It depends on the name and n only — not
// on the fleet file's order or the other sites — so every runner of a CI matrix computes the
// same split, and a site keeps its part when sites are added or removed.
func ShardOf(site string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(site))
	return int(h.Sum32()%uint32(n)) + 1
}

// Wave is one step of a rollout: sites that run together.
type Wave struct {
	// Number is 1-based.
	Number int
	// Canary marks the first wave of a rollout with a canary.
	Canary bool
	// Sites in the order they start.
	Sites []*Site
}

// Names returns the wave's site names.
func (w Wave) Names() []string {
	out := make([]string, len(w.Sites))
	for i, s := range w.Sites {
		out[i] = s.Name
	}
	return out
}

// Selection narrows a run to some sites: a shard and/or site names (--site).
type Selection struct {
	Shard Shard
	// Names are sites to run (empty: all); names the fleet does not have are an error.
	Names []string
}

// Select returns the fleet's sites a run covers, in fleet order.
func (f *Fleet) Select(sel Selection) ([]*Site, error) {
	want := map[string]bool{}
	for _, n := range sel.Names {
		if !slices.ContainsFunc(f.Sites, func(s *Site) bool { return s.Name == n }) {
			return nil, fmt.Errorf("--site %s: the fleet %s has no such site (sites are named by their inventory's metadata.name)", n, f.Source)
		}
		want[n] = true
	}
	var out []*Site
	for _, s := range f.Sites {
		if len(want) > 0 && !want[s.Name] {
			continue
		}
		if sel.Shard.N > 0 && ShardOf(s.Name, sel.Shard.N) != sel.Shard.I {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// Plan is what a run covers: the selected sites in their waves.
type Plan struct {
	Waves []Wave
	// Shard is the part of the fleet the plan covers (zero: all of it).
	Shard Shard
}

// Sites counts the plan's sites.
func (p Plan) Sites() int {
	n := 0
	for _, w := range p.Waves {
		n += len(w.Sites)
	}
	return n
}

// Plan selects the sites of a run (Select) and orders them into waves (PlanWaves); changes
// says the command changes the sites (apply, upgrade).
func (f *Fleet) Plan(sel Selection, changes bool) (Plan, error) {
	sites, err := f.Select(sel)
	if err != nil {
		return Plan{}, err
	}
	return Plan{Waves: f.PlanWaves(sites, changes), Shard: sel.Shard}, nil
}

// PlanWaves orders sites into the rollout's waves:
//  1. order: by the value of rollout.orderBy (sites without the label last), ties in fleet
//     order;
//  2. the canary: the first rollout.canary sites (default 1) form wave 1;
//  3. the rest in waves of rollout.batch sites (a percentage is of all the run's sites,
//     rounded up, at least 1); with rollout.groupBy, sites with the same value of that label
//     (in order of first appearance) fill waves of their own — a wave never mixes groups.
//
// Without changes (preflight, check, doctor, --dry-run) every site is in one wave, no canary.
func (f *Fleet) PlanWaves(sites []*Site, changes bool) []Wave {
	if len(sites) == 0 {
		return nil
	}
	if !changes {
		return []Wave{{Number: 1, Sites: sites}}
	}
	r := f.Spec.Rollout
	ordered := slices.Clone(sites)
	if r.OrderBy != "" {
		slices.SortStableFunc(ordered, func(a, b *Site) int {
			va, oka := a.Labels[r.OrderBy]
			vb, okb := b.Labels[r.OrderBy]
			switch {
			case oka != okb:
				if oka {
					return -1
				}
				return 1
			default:
				return strings.Compare(va, vb)
			}
		})
	}
	var waves []Wave
	add := func(canary bool, ss []*Site) {
		if len(ss) > 0 {
			waves = append(waves, Wave{Number: len(waves) + 1, Canary: canary, Sites: ss})
		}
	}
	canary := min(r.CanaryCount(), len(ordered))
	add(true, ordered[:canary])
	rest := ordered[canary:]
	size := max(r.BatchSize().Of(len(sites), true), 1)
	for _, group := range groupsOf(rest, r.GroupBy) {
		for len(group) > 0 {
			n := min(size, len(group))
			add(false, group[:n])
			group = group[n:]
		}
	}
	return waves
}

// groupsOf splits sites by the value of label key, groups in order of first appearance; one
// group when key is empty.
func groupsOf(sites []*Site, key string) [][]*Site {
	if key == "" {
		return [][]*Site{sites}
	}
	var order []string
	by := map[string][]*Site{}
	for _, s := range sites {
		v, ok := s.Labels[key]
		if !ok {
			v = "\x00none"
		}
		if _, seen := by[v]; !seen {
			order = append(order, v)
		}
		by[v] = append(by[v], s)
	}
	out := make([][]*Site, 0, len(order))
	for _, v := range order {
		out = append(out, by[v])
	}
	return out
}
