// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/k3strap/k3strap/events"
)

// Report is the fleet's standing as its state files record it (`k3strap fleet status`). It
// connects to no host: versions and nodes are as the last apply or check saw them.
type Report struct {
	// Fleet is the fleet's name; States the state files merged.
	Fleet  string   `json:"fleet"`
	States []string `json:"states"`
	// Sites in fleet order (then sites only a state file knows, by name).
	Sites []SiteReport `json:"sites"`
	// Totals count the sites by rollout status, nodes and doctor verdicts.
	Totals Totals `json:"totals"`
}

// SiteReport is one site's line of the report.
type SiteReport struct {
	Site      string `json:"site"`
	Inventory string `json:"inventory,omitempty"`
	// Shard is the shard whose state file recorded the site's rollout ("" for the whole fleet).
	Shard string `json:"shard,omitempty"`
	Wave  int    `json:"wave,omitempty"`
	// Status is the rollout's: pending (never applied), running, done, failed, cancelled,
	// deferred (the last rollout — or its check of the done site — could not reach it), or
	// interrupted (recorded as running while no run holds the state file's lock).
	Status string `json:"status"`
	// Reached is when a host of the site last answered k3strap (zero: never recorded).
	Reached time.Time `json:"lastReached,omitzero"`
	// Changed says the site's inventory changed since it was done: the next apply runs it.
	Changed bool `json:"changed,omitempty"`
	// Rollout is the last apply or upgrade; Check, Preflight and Doctor the last runs of those.
	Rollout   *Record `json:"rollout,omitempty"`
	Check     *Record `json:"check,omitempty"`
	Preflight *Record `json:"preflight,omitempty"`
	Doctor    *Record `json:"doctor,omitempty"`
	// Cluster is the cluster as last seen.
	Cluster *Observed `json:"cluster,omitempty"`
	// Verdict is doctor's: healthy, warnings, errors, failed (doctor did not finish) or ""
	// (never run).
	Verdict string `json:"doctorVerdict,omitempty"`
	// Orphan says the fleet file no longer lists the site (only a state file does).
	Orphan bool `json:"orphan,omitempty"`
}

// Totals sum up a report.
type Totals struct {
	Sites int `json:"sites"`
	// ByStatus counts sites per rollout status.
	ByStatus map[string]int `json:"byStatus"`
	// Nodes and Ready sum the sites' nodes as last seen; Seen counts sites with a view.
	Nodes int `json:"nodes"`
	Ready int `json:"ready"`
	Seen  int `json:"seen"`
	// Verdicts counts doctor verdicts ("" = never run, as "none").
	Verdicts map[string]int `json:"doctor"`
}

// Status merges state files into a report of f's sites (f may be nil: then the states' sites
// only). Per site and record (rollout, check, preflight, doctor) the latest start wins, and
// the cluster view seen last; so the state files of a fleet's shards — disjoint sets of sites
// — and an older unsharded one merge into the newest view of every site.
func Status(f *Fleet, states map[string]*State, held func(path string) bool) Report {
	rep := Report{Totals: Totals{ByStatus: map[string]int{}, Verdicts: map[string]int{}}}
	if f != nil {
		rep.Fleet = f.Metadata.Name
	}
	paths := make([]string, 0, len(states))
	for p := range states {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	rep.States = paths
	merged := map[string]*SiteReport{}
	for _, p := range paths {
		st := states[p]
		if rep.Fleet == "" {
			rep.Fleet = st.Fleet
		}
		for name, ss := range st.Sites {
			m := merged[name]
			if m == nil {
				m = &SiteReport{Site: name}
				merged[name] = m
			}
			if m.Inventory == "" {
				m.Inventory = ss.Inventory
			}
			if newer(ss.Rollout, m.Rollout) {
				m.Rollout, m.Shard, m.Wave = ss.Rollout, st.Shard, ss.Wave
				if ss.Rollout.Status == events.SiteRunning && held != nil && !held(p) {
					m.Status = "interrupted"
				} else {
					m.Status = string(ss.Rollout.Status)
				}
			}
			if newer(ss.Check, m.Check) {
				m.Check = ss.Check
			}
			if newer(ss.Preflight, m.Preflight) {
				m.Preflight = ss.Preflight
			}
			if newer(ss.Doctor, m.Doctor) {
				m.Doctor = ss.Doctor
			}
			if ss.Cluster != nil && (m.Cluster == nil || ss.Cluster.At.After(m.Cluster.At)) {
				m.Cluster = ss.Cluster
			}
			if ss.Reached.After(m.Reached) {
				m.Reached = ss.Reached
			}
		}
	}
	var order []string
	if f != nil {
		for _, s := range f.Sites {
			order = append(order, s.Name)
			m := merged[s.Name]
			if m == nil {
				m = &SiteReport{Site: s.Name}
				merged[s.Name] = m
			}
			m.Inventory = s.Path
			if m.Rollout != nil && m.Rollout.Status == events.SiteDone && m.Rollout.Digest != s.Digest {
				m.Changed = true
			}
		}
	}
	var rest []string
	for name, m := range merged {
		if f != nil && !containsSite(f, name) {
			m.Orphan = true
			rest = append(rest, name)
		} else if f == nil {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, name := range append(order, rest...) {
		m := merged[name]
		if m.Status == "" {
			m.Status = string(events.SitePending)
		}
		// A done site whose last check found it unreachable is deferred: its state is unknown.
		if m.Status == string(events.SiteDone) && m.Check != nil && m.Check.Status == events.SiteDeferred && newer(m.Check, m.Rollout) {
			m.Status = string(events.SiteDeferred)
		}
		m.Verdict = verdict(m.Doctor)
		rep.Sites = append(rep.Sites, *m)
		if m.Orphan {
			continue
		}
		t := &rep.Totals
		t.Sites++
		t.ByStatus[m.Status]++
		if m.Cluster != nil {
			t.Seen++
			t.Nodes += m.Cluster.Nodes
			t.Ready += m.Cluster.Ready
		}
		t.Verdicts[orNone(m.Verdict)]++
	}
	return rep
}

func containsSite(f *Fleet, name string) bool {
	for _, s := range f.Sites {
		if s.Name == name {
			return true
		}
	}
	return false
}

// newer reports whether record a started after b (a nil b is older than anything).
func newer(a, b *Record) bool {
	return a != nil && (b == nil || a.Started.After(b.Started))
}

// verdict is doctor's verdict from its record.
func verdict(r *Record) string {
	switch {
	case r == nil:
		return ""
	case r.Status == events.SiteRunning:
		return "running"
	case r.Verdict != "":
		return r.Verdict
	}
	return "failed"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// WriteText writes the report as a table for people: per site its rollout status (what
// failed, with the exit's meaning), version and nodes Ready as last seen, doctor's verdict,
// then the totals.
func (rep Report) WriteText(w io.Writer, now time.Time) error {
	fmt.Fprintf(w, "fleet %s: %d site(s); state: %s\n", rep.Fleet, rep.Totals.Sites, strings.Join(orDash(rep.States), ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tSHARD\tWAVE\tROLLOUT\tWHEN\tREACHED\tVERSION\tREADY\tDOCTOR\tDETAIL")
	for _, s := range rep.Sites {
		when, detail := "-", ""
		if r := s.Rollout; r != nil {
			t := r.Finished
			if t.IsZero() {
				t = r.Started
			}
			if r.Checked.After(t) {
				t = r.Checked
			}
			when = ago(now, t)
			if r.Status == events.SiteFailed || r.Status == events.SiteCancelled {
				detail = failureText(r)
			}
		}
		reached := "never"
		if !s.Reached.IsZero() {
			reached = ago(now, s.Reached)
		}
		if s.Status == string(events.SiteDeferred) {
			detail = deferredText(s)
		}
		status := s.Status
		if s.Changed {
			status += " (changed)"
			detail = "inventory changed since: the next apply runs it"
		}
		if s.Orphan {
			detail = "no longer in the fleet file"
		}
		version, ready := "-", "-"
		if c := s.Cluster; c != nil {
			version = strings.Join(c.Versions, ",")
			if version == "" {
				version = "-"
			}
			ready = fmt.Sprintf("%d/%d", c.Ready, c.Nodes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Site, orDashS(s.Shard), waveText(s.Wave), status, when, reached, version, ready, orDashS(s.Verdict), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	t := rep.Totals
	var parts []string
	for _, st := range []string{"done", "failed", "deferred", "cancelled", "interrupted", "running", "pending"} {
		if n := t.ByStatus[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	var verdicts []string
	for _, v := range []string{"healthy", "warnings", "errors", "failed", "running", "none"} {
		if n := t.Verdicts[v]; n > 0 {
			verdicts = append(verdicts, fmt.Sprintf("%d %s", n, map[bool]string{true: "not run", false: v}[v == "none"]))
		}
	}
	_, err := fmt.Fprintf(w, "totals: %s; nodes Ready %d/%d (seen on %d of %d sites); doctor: %s\n",
		strings.Join(orDash(parts), ", "), t.Ready, t.Nodes, t.Seen, t.Sites, strings.Join(orDash(verdicts), ", "))
	return err
}

// deferredText says why a deferred site was deferred: its record's message (the attempts and
// the offline host's error).
func deferredText(s SiteReport) string {
	r := s.Rollout
	if s.Check != nil && s.Check.Status == events.SiteDeferred && newer(s.Check, r) {
		r = s.Check
	}
	if r == nil || r.Message == "" {
		return "unreachable: the next rollout runs it"
	}
	msg := r.Message
	if len(msg) > 140 {
		msg = msg[:137] + "..."
	}
	return msg
}

// failureText says what failed: the exit code and its meaning, the host and step, the message.
func failureText(r *Record) string {
	s := fmt.Sprintf("exit %d", r.ExitCode)
	if r.Exit != "" {
		s += " (" + r.Exit + ")"
	}
	if r.Host != "" {
		s += " " + r.Host
	}
	if r.Phase != "" {
		s += " " + r.Phase
	}
	if r.Message != "" {
		msg := r.Message
		if len(msg) > 100 {
			msg = msg[:97] + "..."
		}
		s += ": " + msg
	}
	return s
}

func waveText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDash(s []string) []string {
	if len(s) == 0 {
		return []string{"-"}
	}
	return s
}

func orDashS(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago formats how long before now t was, coarsely ("12s ago", "5m ago", "3h ago", "2d ago").
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
