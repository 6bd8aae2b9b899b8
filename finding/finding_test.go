// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package finding

import (
	"slices"
	"testing"
)

func TestWorst(t *testing.T) {
	for _, c := range []struct {
		sevs []Severity
		want Severity
	}{
		{nil, ""},
		{[]Severity{Info}, Info},
		{[]Severity{Info, Warning, Info}, Warning},
		{[]Severity{Warning, Error, Info}, Error},
		{[]Severity{"odd"}, Info},
	} {
		var fs []Finding
		for _, s := range c.sevs {
			fs = append(fs, Finding{Severity: s})
		}
		if got := Worst(fs); got != c.want {
			t.Errorf("Worst(%v) = %q, want %q", c.sevs, got, c.want)
		}
	}
}

func TestFindingAccessors(t *testing.T) {
	f := Finding{ID: "ClockSkew", Severity: Warning, Host: "cp1, w1", Message: "the clock is 3s ahead",
		Fixes: []string{"run chrony", "or timesyncd"}}
	if got := f.String(); got != "[WARNING ClockSkew] cp1, w1: the clock is 3s ahead" {
		t.Errorf("String() = %q", got)
	}
	if got := f.Hosts(); !slices.Equal(got, []string{"cp1", "w1"}) {
		t.Errorf("Hosts() = %q", got)
	}
	if (Finding{}).Hosts() != nil {
		t.Error("a cluster finding names a host")
	}
	if got := f.Fix(); got != "run chrony; or timesyncd" {
		t.Errorf("Fix() = %q", got)
	}
	if Fixes("") != nil || !slices.Equal(Fixes("x"), []string{"x"}) {
		t.Error("Fixes")
	}
	fs := Stamp([]Finding{{ID: "a"}, {ID: "b", Source: Doctor}}, Preflight)
	if fs[0].Source != Preflight || fs[1].Source != Doctor {
		t.Errorf("Stamp: %+v", fs)
	}
}
