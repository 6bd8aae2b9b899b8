// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkFleetPreflight measures a fleet's preflight over fleetSites sites of 3 hosts (one
// server, two agents) on the scale harness (scale_bench_test.go: one sshd behind 600
// addresses), against the floor measured in the same run: the same per-site preflight as a
// plain loop — one `k3strap preflight -f SITE.yaml` process per site, fleetConcurrency at a
// time, the fleet's rollout.concurrency. Goals: ≤ 1.0× the floor, peak RSS ≤ 150 MB.
func BenchmarkFleetPreflight(b *testing.B) {
	const hostsPerSite = 3
	r := scaleUp(b, fleetSites*hostsPerSite)
	fleetPath, sites := r.fleet(b, fleetSites, hostsPerSite)
	common := []string{"--output", "json", "--ssh-config", "none", "--ignore-preflight-errors", "all"}
	var floorSum, ourSum time.Duration
	var rss int64
	var last scaleRun
	fleetRun := func() {
		_ = os.Remove(filepath.Join(r.dir, "fleet.state.json"))
		last = r.k3strap(b, append([]string{"preflight", "-f", fleetPath}, common...)...)
		ourSum += last.dur
		rss = max(rss, last.maxRSSKB)
		if n := strings.Count(last.stdout, `"type":"site_result"`); n != fleetSites {
			b.Fatalf("%d site results, want %d", n, fleetSites)
		}
	}
	floorRun := func() {
		f, err := r.siteLoop(sites, fleetConcurrency, common)
		if err != nil {
			b.Fatal(err)
		}
		floorSum += f
	}
	// The machine's load drifts: the two runs take turns going first.
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			fleetRun()
			floorRun()
		} else {
			floorRun()
			fleetRun()
		}
	}
	nb := float64(b.N)
	b.ReportMetric(floorSum.Seconds()*1000/nb, "floor-ms")
	b.ReportMetric(ourSum.Seconds()*1000/nb, "k3strap-ms")
	b.ReportMetric(ourSum.Seconds()/floorSum.Seconds(), "x-floor")
	b.ReportMetric(float64(rss)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(last.events), "events")
	b.Logf("%d sites × %d hosts preflight: fleet %.2fs, per-site loop %.2fs (%d sites at a time), %.2f×, peak RSS %.1f MB, %d events (%d kB)",
		fleetSites, hostsPerSite, ourSum.Seconds()/nb, floorSum.Seconds()/nb, fleetConcurrency, ourSum.Seconds()/floorSum.Seconds(), float64(rss)/1024, last.events, last.bytes/1024)
}

// The benchmark's fleet: sites and sites at once (the fleet's rollout.concurrency and the
// floor's loop).
const (
	fleetSites       = 200
	fleetConcurrency = 10
)

// fleet writes n complete site inventories of per hosts each (each valid on its own, so the
// floor can run it) and a fleet file naming them; it returns the fleet file and the sites.
func (r *scaleRig) fleet(b *testing.B, n, per int) (string, []string) {
	b.Helper()
	dir := filepath.Join(r.dir, "sites")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	access := &siteAccess{Artifacts: r.bin.artifacts, Key: r.key, KnownHosts: filepath.Join(r.dir, "known_hosts")}
	var sites []string
	for s := 0; s < n; s++ {
		d := siteInvData{Name: fmt.Sprintf("site-%03d", s+1), Full: access}
		for h := 1; h <= per; h++ {
			d.Addrs = append(d.Addrs, scaleAddr(s*per+h))
		}
		p := filepath.Join(dir, d.Name+".yaml")
		writeSiteInv(b, p, d)
		sites = append(sites, p)
	}
	fleet := fmt.Sprintf(`apiVersion: k3strap.io/v1alpha1
kind: Fleet
metadata:
  name: bench
spec:
  sites:
    - path: "sites/*.yaml"
  rollout:
    concurrency: %d
`, fleetConcurrency)
	p := filepath.Join(r.dir, "fleet.yaml")
	if err := os.WriteFile(p, []byte(fleet), 0o644); err != nil {
		b.Fatal(err)
	}
	return p, sites
}

// siteLoop is the shell loop a fleet replaces: `xargs -P conc` running `k3strap preflight -f
// SITE` once per site, inside the scale namespace; it returns the wall time.
func (r *scaleRig) siteLoop(sites []string, conc int, args []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	xargs := append([]string{"netns", "exec", r.ns, "xargs", "-P", fmt.Sprint(conc), "-I{}", r.bin.k3strap, "preflight", "-f", "{}"}, args...)
	cmd := exec.CommandContext(ctx, "ip", xargs...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "HOME="+r.dir)
	cmd.Stdin = strings.NewReader(strings.Join(sites, "\n") + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("per-site preflight loop: %v\n%s", err, tail(out.String(), 2000))
	}
	return time.Since(start), nil
}
