// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// realServers is n real-K3s servers with embedded etcd (the first initialises the cluster).
const realServers = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: real-ha
spec:
{{template "spec-k3s-real" .}}
{{template "ssh-root" .}}
  hosts:
{{- range $i, $h := .Hosts}}
    - name: cp{{inc $i}}
      address: {{$h.Address}}
      role: server
{{- end}}
`

// pipelineTimeline is what one apply's events say of its timing, in seconds since the apply
// began.
type pipelineTimeline struct {
	// firstStart is when the first server's unit was started; milestones its milestones
	// (seconds since that start, as reported).
	firstStart float64
	milestones map[string]float64
	// started and ready are, per joining host, when its unit was started and when its node
	// was reported Ready.
	started, ready map[string]float64
	total          float64
}

// timeline reads r's events. first names the first server.
func timeline(r run, first string) pipelineTimeline {
	tl := pipelineTimeline{milestones: map[string]float64{}, started: map[string]float64{}, ready: map[string]float64{}, total: r.duration.Seconds()}
	if len(r.events) == 0 {
		return tl
	}
	t0 := r.events[0].Time
	at := func(e events.Event) float64 { return e.Time.Sub(t0).Seconds() }
	for _, e := range r.events {
		switch {
		case e.Type == events.Milestone && e.Host == first:
			tl.milestones[e.Milestone.Name] = e.Milestone.Seconds
		case e.Type == events.HostStep && e.Step == "start" && e.Status == events.StatusChanged:
			if e.Host == first {
				tl.firstStart = at(e)
			} else {
				tl.started[e.Host] = at(e)
			}
		case e.Type == events.HostStep && e.Step == "node" && e.Status == events.StatusOK:
			tl.ready[e.Host] = at(e)
		}
	}
	return tl
}

// String is the timeline as lines: the first server's milestones, then each joining host's
// start and Ready.
func (tl pipelineTimeline) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "first server started at %.2f s after apply began\n", tl.firstStart)
	var ms []string
	for m := range tl.milestones {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return tl.milestones[ms[i]] < tl.milestones[ms[j]] })
	for _, m := range ms {
		fmt.Fprintf(&b, "  %-26s +%5.1f s (%.1f s after apply began)\n", m, tl.milestones[m], tl.firstStart+tl.milestones[m])
	}
	var hs []string
	for h := range tl.started {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	for _, h := range hs {
		fmt.Fprintf(&b, "%s started %.1f s, Ready %.1f s (own start to Ready %.1f s)\n", h, tl.started[h], tl.ready[h], tl.ready[h]-tl.started[h])
	}
	fmt.Fprintf(&b, "apply done %.1f s", tl.total)
	return b.String()
}

// BenchmarkRealApplyPipeline (real K3s) measures the install pipeline on the real binary:
//   - 1 server + 2 agents: apply wall time against the first server's own start→subnet.env in
//     the same run (the floor: nothing can be done before it);
//   - 3 servers (joined one at a time for etcd): apply wall time against the sum of the first
//     server's bring-up (start to its last milestone) and each joined server's own start→Ready.
//
// Each run logs the timeline: the first server's milestones and each joining host's start and
// Ready. Run alone on the machine (make bench); K3STRAP_BENCH_EVENTS=PREFIX keeps the events.
func BenchmarkRealApplyPipeline(b *testing.B) {
	requireRealK3s(b)
	for _, tc := range []struct {
		name    string
		hosts   int
		inv     string
		servers bool
	}{{"1server+2agents", 3, realServerAgents, false}, {"3servers", 3, realServers, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var total, floor float64
			for b.Loop() {
				b.StopTimer()
				c := newRealCluster(b, tc.hosts)
				c.writeInventory(tc.inv, nil)
				b.StartTimer()
				r := c.k3strap(10*time.Minute, "apply")
				b.StopTimer()
				if r.code != 0 {
					b.Fatalf("apply exited %d:\n%s", r.code, r.stdout)
				}
				tl := timeline(r, "cp1")
				if f := os.Getenv("K3STRAP_BENCH_EVENTS"); f != "" {
					_ = os.WriteFile(f+"-real-"+tc.name+".jsonl", []byte(r.stdout), 0o644)
				}
				var fl float64
				if tc.servers {
					last := 0.0
					for _, s := range tl.milestones {
						last = max(last, s)
					}
					fl = last
					for h := range tl.started {
						fl += tl.ready[h] - tl.started[h]
					}
				} else {
					fl = tl.milestones["subnet-env"]
				}
				if fl <= 0 {
					b.Fatalf("no floor measured:\n%s", tl)
				}
				total += tl.total
				floor += fl
				b.Logf("%s: apply %.1f s, floor %.1f s (%.2f×)\n%s", tc.name, tl.total, fl, tl.total/fl, tl)
				b.StartTimer()
			}
			b.ReportMetric(total/float64(b.N), "apply-s")
			b.ReportMetric(floor/float64(b.N), "floor-s")
			b.ReportMetric(total/floor, "x-floor")
		})
	}
}
