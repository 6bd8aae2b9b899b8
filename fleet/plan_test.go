// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"strings"
	"testing"
)

// testFleet is a fleet of n sites s1..sn built in code, labels from labels(i).
func testFleet(n int, r Rollout, labels func(i int) map[string]string) *Fleet {
	f := &Fleet{Source: "fleet.yaml", Spec: Spec{Rollout: r}}
	f.Metadata.Name = "test"
	for i := 1; i <= n; i++ {
		s := &Site{Name: fmt.Sprintf("s%d", i), Path: fmt.Sprintf("s%d.yaml", i), Digest: fmt.Sprintf("sha256:%d", i)}
		if labels != nil {
			s.Labels = labels(i)
		}
		f.Sites = append(f.Sites, s)
	}
	return f
}

func wavesText(ws []Wave) string {
	var out []string
	for _, w := range ws {
		t := strings.Join(w.Names(), ",")
		if w.Canary {
			t = "canary:" + t
		}
		out = append(out, "["+t+"]")
	}
	return strings.Join(out, " ")
}

func intp(i int) *int { return &i }

func TestPlanWaves(t *testing.T) {
	region := func(i int) map[string]string {
		switch {
		case i == 5:
			return nil
		case i%2 == 0:
			return map[string]string{"region": "eu"}
		}
		return map[string]string{"region": "us"}
	}
	cases := []struct {
		name    string
		n       int
		r       Rollout
		labels  func(int) map[string]string
		changes bool
		want    string
	}{
		{"canary 1 then 2", 5, Rollout{Canary: intp(1), Batch: "2"}, nil, true, "[canary:s1] [s2,s3] [s4,s5]"},
		{"defaults: canary 1, 25% rounded up", 8, Rollout{}, nil, true, "[canary:s1] [s2,s3] [s4,s5] [s6,s7] [s8]"},
		{"no canary", 3, Rollout{Canary: intp(0), Batch: "100%"}, nil, true, "[s1,s2,s3]"},
		{"canary larger than the fleet", 2, Rollout{Canary: intp(5)}, nil, true, "[canary:s1,s2]"},
		{"order by label, unlabelled last", 5, Rollout{Canary: intp(1), Batch: "2", OrderBy: "region"}, region, true, "[canary:s2] [s4,s1] [s3,s5]"},
		{"group by label", 5, Rollout{Canary: intp(1), Batch: "5", GroupBy: "region"}, region, true, "[canary:s1] [s2,s4] [s3] [s5]"},
		{"no changes: one wave", 5, Rollout{Canary: intp(1), Batch: "1"}, nil, false, "[s1,s2,s3,s4,s5]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := testFleet(c.n, c.r, c.labels)
			if got := wavesText(f.PlanWaves(f.Sites, c.changes)); got != c.want {
				t.Errorf("waves %s, want %s", got, c.want)
			}
		})
	}
}

func TestAmount(t *testing.T) {
	for _, c := range []struct {
		a     Amount
		total int
		up    bool
		want  int
	}{{"3", 10, true, 3}, {"25%", 10, true, 3}, {"25%", 10, false, 2}, {"10%", 5, false, 0}, {"100%", 7, true, 7}, {"0", 9, false, 0}} {
		if got := c.a.Of(c.total, c.up); got != c.want {
			t.Errorf("%q of %d (up %v) = %d, want %d", c.a, c.total, c.up, got, c.want)
		}
	}
	for _, bad := range []Amount{"x", "-1", "101%", "5 %%", "1.5"} {
		if _, _, err := bad.parse(); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestShards: the shards of a split are disjoint and cover every site; a site's shard depends
// only on its name and N (pinned values: the README documents FNV-1a).
func TestShards(t *testing.T) {
	f := testFleet(200, Rollout{}, nil)
	for _, n := range []int{1, 2, 3, 7} {
		seen := map[string]int{}
		for i := 1; i <= n; i++ {
			sites, err := f.Select(Selection{Shard: Shard{I: i, N: n}})
			if err != nil {
				t.Fatal(err)
			}
			if len(sites) == 0 {
				t.Errorf("shard %d/%d of 200 sites is empty", i, n)
			}
			for _, s := range sites {
				seen[s.Name]++
			}
		}
		for _, s := range f.Sites {
			if seen[s.Name] != 1 {
				t.Errorf("N=%d: site %s is in %d shards", n, s.Name, seen[s.Name])
			}
		}
	}
	// FNV-1a 32 of "store-1" is 0x26ab3e18, of "store-2" 0x29ab42d1.
	if ShardOf("store-1", 2) != 1 || ShardOf("store-2", 2) != 2 || ShardOf("store-1", 7) != int(0x26ab3e18%7)+1 {
		t.Errorf("ShardOf changed: store-1 → %d/2, store-2 → %d/2", ShardOf("store-1", 2), ShardOf("store-2", 2))
	}
	for _, bad := range []string{"0/2", "3/2", "1", "a/b", "1/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
	if sh, err := ParseShard("2/4"); err != nil || sh.String() != "2/4" {
		t.Errorf("ParseShard(2/4) = %v, %v", sh, err)
	}
	if _, err := f.Select(Selection{Names: []string{"nope"}}); err == nil {
		t.Error("selecting an unknown site worked")
	}
}
