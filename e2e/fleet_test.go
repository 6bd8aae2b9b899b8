// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/fleet"
)

// Fleet rollouts (docs/fleet.md) on 7 hosts: 5 sites of one server each, store-2 and store-4
// with an agent too. The fleet file gives the K3s release, the airgap artifacts and the SSH
// settings as defaults; each site inventory has its hosts and its kubelet argument.

// fleetSite is one site of the test fleet: its name and the indexes of its hosts (server
// first).
type fleetSite struct {
	name  string
	hosts []int
}

var testSites = []fleetSite{{"store-1", []int{0}}, {"store-2", []int{1, 2}}, {"store-3", []int{3}}, {"store-4", []int{4, 5}}, {"store-5", []int{6}}}

const fleetFile = `apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: stores
spec:
  sites:
    - path: "sites/*.yaml"
  defaults:
    k3s:
      version: v1.36.3+k3s1
      install: airgap
      airgap:
        amd64:
          binary: {{.Artifacts}}/k3s
          checksums: {{.Artifacts}}/sha256sum-amd64.txt
          images: {{.Artifacts}}/k3s-airgap-images-amd64.tar.zst
    ssh:
      user: root
      keyPath: {{.Key}}
      knownHosts: {{.KnownHosts}}
      connectTimeout: 3s
  rollout:
    canary: 1
    batch: 2
    concurrency: 2
    maxFailedSites: 0
    siteTimeout: 4m
`

// fleetSiteInv is a site inventory: a server and agents at .Addrs, the F1 configuration with
// .F1; with .Full the K3s release, artifacts and SSH settings too (a site valid on its own,
// without fleet defaults).
const fleetSiteInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: {{.Name}}
spec:
  k3s:
{{- with .Full}}
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64:
        binary: {{.Artifacts}}/k3s
        checksums: {{.Artifacts}}/sha256sum-amd64.txt
{{- end}}
    config:
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{- if .F1}}
        - cloud-provider=external
      disable-cloud-controller: true   # F1: the uninitialized taint would never go
{{- end}}
{{- with .Full}}
  ssh:
    user: root
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 20s
{{- end}}
  hosts:
{{- range $i, $a := .Addrs}}
    - name: {{if eq $i 0}}cp1{{else}}a{{$i}}{{end}}
      address: {{$a}}
      role: {{if eq $i 0}}server{{else}}agent{{end}}
{{- end}}
`

// siteInvData fills fleetSiteInv.
type siteInvData struct {
	Name  string
	F1    bool
	Addrs []string
	Full  *siteAccess
}

// siteAccess is what a site inventory needs without fleet defaults.
type siteAccess struct{ Artifacts, Key, KnownHosts string }

// writeSiteInv renders fleetSiteInv with d into path.
func writeSiteInv(t testing.TB, path string, d siteInvData) {
	t.Helper()
	var buf bytes.Buffer
	if err := template.Must(template.New("site").Parse(fleetSiteInv)).Execute(&buf, d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFleet writes the fleet file and the site inventories (sites in f1 get the F1
// configuration) and points the cluster's inventory at the fleet file.
func (c *testCluster) writeFleet(f1 ...string) string {
	c.t.Helper()
	c.writeInventory(fleetFile, nil)
	fleetPath := filepath.Join(c.dir, "fleet.yaml")
	if err := os.Rename(c.inv, fleetPath); err != nil {
		c.t.Fatal(err)
	}
	c.inv = fleetPath
	if err := os.MkdirAll(filepath.Join(c.dir, "sites"), 0o755); err != nil {
		c.t.Fatal(err)
	}
	for _, s := range testSites {
		d := siteInvData{Name: s.name, F1: slices.Contains(f1, s.name)}
		for _, i := range s.hosts {
			d.Addrs = append(d.Addrs, c.hosts[i].Address)
		}
		writeSiteInv(c.t, filepath.Join(c.dir, "sites", s.name+".yaml"), d)
	}
	return fleetPath
}

// siteResults returns the run's site_result events by site.
func siteResults(r run) map[string]events.SiteResult {
	out := map[string]events.SiteResult{}
	for _, e := range r.ofType(events.SiteResultType) {
		out[e.Site] = *e.SiteResult
	}
	return out
}

// sitesTouched returns the sites any event of the run names.
func sitesTouched(r run) map[string]bool {
	out := map[string]bool{}
	for _, e := range r.events {
		if e.Site != "" {
			out[e.Site] = true
		}
	}
	return out
}

// noK3s fails the test unless host i has no K3s: no binary, no unit, no config.
func (c *testCluster) noK3s(t *testing.T, i int, why string) {
	t.Helper()
	out := c.exec(i, "sh", "-c", "ls /usr/local/bin/k3s /etc/rancher/k3s /etc/systemd/system/k3s.service /etc/systemd/system/k3s-agent.service 2>&1 | grep -v 'No such file' || true")
	if out != "" {
		t.Errorf("%s: %s has K3s files: %s", why, c.hosts[i].Name, out)
	}
}

// siteUp fails the test unless site s's nodes are all registered and Ready, read through its
// server's own kubectl, and its units active.
func (c *testCluster) siteUp(t *testing.T, s fleetSite) {
	t.Helper()
	nodes := c.realNodes(s.hosts[0])
	want := []string{"cp1"}
	for i := 1; i < len(s.hosts); i++ {
		want = append(want, fmt.Sprintf("a%d", i))
	}
	slices.Sort(want)
	if got := keys(nodes); !slices.Equal(got, want) {
		t.Errorf("%s: nodes %v, want %v", s.name, got, want)
	}
	for name, n := range nodes {
		if !nodeReady(n) {
			t.Errorf("%s: node %s is not Ready", s.name, name)
		}
	}
	for j, i := range s.hosts {
		unit := map[bool]string{true: "k3s", false: "k3s-agent"}[j == 0]
		if st := c.exec(i, "systemctl", "is-active", unit); st != "active" {
			t.Errorf("%s: %s on %s is %s", s.name, unit, c.hosts[i].Name, st)
		}
	}
}

// readFleetState reads a state file of the test's fleet.
func (c *testCluster) readFleetState(t *testing.T, name string) *fleet.State {
	t.Helper()
	st, err := fleet.ReadState(filepath.Join(c.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waveOrder checks, from a run's events, that no site of a wave had an event before every site
// of the previous wave had its result.
func waveOrder(t *testing.T, r run) {
	t.Helper()
	waveOf := map[string]int{}
	var waves [][]string
	for _, e := range r.ofType(events.WaveType) {
		if e.Status == events.StatusRunning {
			waves = append(waves, e.Wave.Sites)
			for _, s := range e.Wave.Sites {
				waveOf[s] = e.Wave.Number
			}
		}
	}
	first := map[string]time.Time{}
	result := map[string]time.Time{}
	for _, e := range r.events {
		if e.Site == "" {
			continue
		}
		if _, ok := first[e.Site]; !ok {
			first[e.Site] = e.Time
		}
		if e.Type == events.SiteResultType {
			result[e.Site] = e.Time
		}
	}
	for w := 1; w < len(waves); w++ {
		for _, prev := range waves[w-1] {
			for _, next := range waves[w] {
				if !result[prev].Before(first[next]) {
					t.Errorf("%s (wave %d) began at %s, before %s (wave %d) ended at %s", next, w+1, first[next].Format(time.StampMicro), prev, w, result[prev].Format(time.StampMicro))
				}
			}
		}
	}
}

// TestFleetRollout: a fresh fleet rolls out in wave order — the canary store-1, then
// {store-2, store-3}, then {store-4, store-5} — every site's nodes Ready on its hosts; the state
// records every site done; `fleet status` reports versions and nodes. Then two shards run
// together (two processes, their own state files and locks) and cover every site exactly once,
// and `fleet status` merges their state files.
func TestFleetRollout(t *testing.T) {
	c := newCluster(t, 7)
	c.writeFleet()

	r := c.k3strap(8*time.Minute, "apply", "--output", "json", "--ssh-config", "none")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("fleet apply exited %d", r.code)
	}
	var waves [][]string
	for _, e := range r.ofType(events.WaveType) {
		if e.Status == events.StatusRunning {
			waves = append(waves, e.Wave.Sites)
		}
	}
	if got := fmt.Sprint(waves); got != "[[store-1] [store-2 store-3] [store-4 store-5]]" {
		t.Errorf("waves %s", got)
	}
	waveOrder(t, r)
	res := siteResults(r)
	for _, s := range testSites {
		if res[s.name].Status != events.SiteDone || res[s.name].Action != "apply" {
			t.Errorf("%s: %+v", s.name, res[s.name])
		}
		c.siteUp(t, s)
	}
	// Each site's own events carry it; the hosts of one site are not another's.
	for _, e := range r.ofType(events.HostStep) {
		if e.Site == "" {
			t.Errorf("host step without a site: %+v", e)
		}
	}
	st := c.readFleetState(t, "fleet.state.json")
	for _, s := range testSites {
		ss := st.Sites[s.name]
		if ss == nil || ss.Rollout == nil || ss.Rollout.Status != events.SiteDone || ss.Cluster == nil || ss.Cluster.Ready != len(s.hosts) ||
			!slices.Equal(ss.Cluster.Versions, []string{"v1.36.3+k3s1"}) {
			t.Errorf("%s state: %+v", s.name, ss)
		}
	}
	status := c.k3strap(time.Minute, "fleet", "status", "--output", "plain")
	if status.code != 0 || !strings.Contains(status.stdout, "totals: 5 done; nodes Ready 7/7 (seen on 5 of 5 sites)") {
		t.Errorf("fleet status (exit %d):\n%s", status.code, status.stdout)
	}
	t.Logf("fleet status:\n%s", status.stdout)

	// Two CI runners: --shard 1/2 and --shard 2/2 at the same time.
	var wg sync.WaitGroup
	shards := make([]run, 2)
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards[i] = c.k3strap(5*time.Minute, "apply", "--shard", fmt.Sprintf("%d/2", i+1), "--output", "json", "--ssh-config", "none")
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for i, sr := range shards {
		defer sr.dump(t)
		if sr.code != 0 {
			t.Errorf("shard %d/2 exited %d", i+1, sr.code)
		}
		got := siteResults(sr)
		if len(got) == 0 {
			t.Errorf("shard %d/2 ran no site", i+1)
		}
		for name, res := range got {
			count[name]++
			if res.Status != events.SiteDone {
				t.Errorf("shard %d/2: %s %+v", i+1, name, res)
			}
		}
		for name := range sitesTouched(sr) {
			if _, ok := got[name]; !ok {
				t.Errorf("shard %d/2 touched %s without a result", i+1, name)
			}
		}
		sst := c.readFleetState(t, fmt.Sprintf("fleet.shard-%d-of-2.state.json", i+1))
		if sst.Shard != fmt.Sprintf("%d/2", i+1) || len(sst.Sites) != len(got) {
			t.Errorf("shard %d/2 state holds %d sites (shard %q), ran %d", i+1, len(sst.Sites), sst.Shard, len(got))
		}
	}
	for _, s := range testSites {
		if count[s.name] != 1 {
			t.Errorf("%s ran in %d shards, want exactly 1", s.name, count[s.name])
		}
	}
	// check and doctor run every site at once and record their outcome: check the nodes as
	// seen, doctor its verdict; their exit code is the highest of the sites'.
	for _, cmd := range []string{"check", "doctor"} {
		cr := c.k3strap(4*time.Minute, cmd, "--output", "json", "--ssh-config", "none")
		defer cr.dump(t)
		res := siteResults(cr)
		highest := 0
		for _, s := range testSites {
			if _, ok := res[s.name]; !ok {
				t.Errorf("%s: no result for %s", cmd, s.name)
			}
			highest = max(highest, res[s.name].ExitCode)
		}
		if cr.code != highest || (cmd == "check" && cr.code != 0) {
			t.Errorf("%s exited %d, the sites' highest exit code is %d", cmd, cr.code, highest)
		}
		if n := len(cr.ofType(events.WaveType)); n != 0 {
			t.Errorf("%s ran in waves (%d wave events)", cmd, n)
		}
	}
	// status merges the three state files: every site once.
	js := c.k3strap(time.Minute, "fleet", "status", "--output", "json")
	var rep fleet.Report
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
		t.Fatalf("fleet status --output json: %v\n%s", err, js.stdout)
	}
	if len(rep.States) != 3 || rep.Totals.Sites != 5 || rep.Totals.ByStatus["done"] != 5 {
		t.Errorf("merged report: states %v, totals %+v", rep.States, rep.Totals)
	}
	for _, s := range rep.Sites {
		if s.Shard == "" {
			t.Errorf("%s: the newest rollout is not a shard's: %+v", s.Site, s)
		}
		if s.Verdict == "" || s.Check == nil || s.Check.Status != events.SiteDone {
			t.Errorf("%s: doctor verdict %q, check %+v", s.Site, s.Verdict, s.Check)
		}
	}
	t.Logf("doctor verdicts: %v", rep.Totals.Verdicts)
}

// TestFleetStops: on fresh hosts —
//   - a canary with the F1 configuration fails preflight and the rollout stops: no other site
//     is touched, their hosts have no K3s;
//   - with the canary fixed and store-3 (wave 2) given F1, the canary and store-2 are
//     installed, store-3 fails and the rollout stops before wave 3: store-4's and store-5's
//     hosts have no K3s;
//   - with store-3 fixed and store-4's agent on a slow link, Ctrl-C (SIGINT) once store-5 is done
//     stops store-4 mid-install: exit 130, the state says store-5 done and store-4 cancelled;
//   - the re-run checks store-1, -2, -3 and -5 (no upload, no file written, no restart: their
//     units keep their InvocationID) and finishes store-4; every site is up.
func TestFleetStops(t *testing.T) {
	c := newCluster(t, 7)
	c.writeFleet("store-1")
	args := []string{"apply", "--output", "json", "--ssh-config", "none"}

	r := c.k3strap(3*time.Minute, args...)
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("canary F1: exit %d, want 3 (preflight)", r.code)
	}
	if res := siteResults(r)["store-1"]; res.Status != events.SiteFailed || res.ExitCode != 3 || res.Exit != "preflight failed" {
		t.Errorf("canary result %+v", res)
	}
	if touched := sitesTouched(r); len(touched) != 1 || !touched["store-1"] {
		t.Errorf("sites touched after the canary failed: %v", keys(touched))
	}
	for i := 0; i < 7; i++ {
		c.noK3s(t, i, "after the failed canary")
	}
	if t.Failed() {
		return
	}

	c.writeFleet("store-3")
	r = c.k3strap(6*time.Minute, args...)
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("store-3 F1: exit %d, want 3", r.code)
	}
	res := siteResults(r)
	if res["store-1"].Status != events.SiteDone || res["store-2"].Status != events.SiteDone || res["store-3"].Status != events.SiteFailed {
		t.Errorf("results %+v", res)
	}
	if touched := sitesTouched(r); touched["store-4"] || touched["store-5"] {
		t.Errorf("wave 3 was touched: %v", keys(touched))
	}
	waveOrder(t, r)
	c.siteUp(t, testSites[0])
	c.siteUp(t, testSites[1])
	for _, i := range []int{3, 4, 5, 6} {
		c.noK3s(t, i, "after wave 2 failed")
	}
	if t.Failed() {
		return
	}

	// Ctrl-C mid-wave: store-4's agent (host 5) receives at 1 MB/s, so store-4 is still
	// installing when store-5 is done.
	c.writeFleet()
	limitLink(t, c, 5, 0, 1000)
	a := c.start(6*time.Minute, "apply", "--ssh-config", "none")
	a.waitFor(t, 4*time.Minute, "store-5 done", func(e events.Event) bool {
		return e.Type == events.SiteResultType && e.Site == "store-5" && e.SiteResult.Status == events.SiteDone
	})
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r = a.wait(t)
	defer r.dump(t)
	if r.code != 130 {
		t.Fatalf("after SIGINT: exit %d, want 130", r.code)
	}
	st := c.readFleetState(t, "fleet.state.json")
	for _, s := range []string{"store-1", "store-2", "store-3", "store-5"} {
		if st.Sites[s].Rollout.Status != events.SiteDone {
			t.Errorf("%s: %+v", s, st.Sites[s].Rollout)
		}
	}
	if got := st.Sites["store-4"].Rollout.Status; got != events.SiteCancelled {
		t.Errorf("store-4 after SIGINT: %s, want cancelled", got)
	}
	if res := siteResults(r); res["store-1"].Status != events.SiteChecked || res["store-2"].Status != events.SiteChecked || res["store-3"].Status != events.SiteDone {
		t.Errorf("interrupted run's results %+v", res)
	}

	// The re-run: finished sites are checked, not installed again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := c.h.Rate(ctx, c.hosts[5].Index, 0); err != nil {
		t.Fatal(err)
	}
	cancel()
	before := map[int]string{}
	for _, s := range testSites {
		if s.name == "store-4" {
			continue
		}
		for _, i := range s.hosts {
			before[i] = c.hostSnapshot(i)
		}
	}
	r = c.k3strap(6*time.Minute, args...)
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("re-run exited %d", r.code)
	}
	res = siteResults(r)
	for _, s := range testSites {
		want := events.SiteChecked
		if s.name == "store-4" {
			want = events.SiteDone
		}
		if res[s.name].Status != want {
			t.Errorf("re-run: %s %s, want %s", s.name, res[s.name].Status, want)
		}
		c.siteUp(t, s)
	}
	for _, e := range r.ofType(events.UploadProgress) {
		if e.Site != "store-4" {
			t.Errorf("the re-run uploaded %s to %s/%s", e.Upload.File, e.Site, e.Host)
		}
	}
	for i, snap := range before {
		if after := c.hostSnapshot(i); after != snap {
			t.Errorf("%s changed or restarted by the re-run:\nbefore %s\nafter  %s", c.hosts[i].Name, snap, after)
		}
	}
}
