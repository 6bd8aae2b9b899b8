// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package frontend

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/internal/golden"
)

// ciRun emits what a CI log sees of an apply: two hosts uploading an 80 MiB binary at different
// rates (an event every 200 ms, as installer/converge.go sends them), a small file, then the
// bring-up heartbeat (installer/step_supervise.go) and the join heartbeat (installer/join.go).
func ciRun(sink events.Sink) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	em := events.Emitter{Sink: sink, Phase: events.PhaseUpload, Now: func() time.Time { return now }}
	const total = 80 << 20
	rates := map[string]int64{"cp1": 8 << 20, "agent1": 2 << 20} // bytes per second
	sent := map[string]int64{}
	for tick := 1; ; tick++ {
		now = t0.Add(time.Duration(tick) * 200 * time.Millisecond)
		busy := false
		for _, h := range []string{"cp1", "agent1"} {
			if sent[h] == total {
				continue
			}
			busy = true
			sent[h] = min(total, sent[h]+rates[h]/5)
			em.Progress(h, events.Upload{File: "/usr/local/bin/k3s", Bytes: sent[h], Total: total})
			if sent[h] == total {
				em.Progress(h, events.Upload{File: "/usr/local/bin/k3s", Bytes: total, Total: total, Done: true})
			}
		}
		if !busy {
			break
		}
	}
	em.Progress("cp1", events.Upload{File: "/etc/rancher/k3s/config.yaml", Bytes: 412, Total: 412, Done: true})
	sup := em.WithPhase(events.PhaseSupervise)
	now = now.Add(30 * time.Second)
	sup.Info("cp1", "still waiting for cp1: api-ready, node-registered, node-ready (service activating; 30s so far, timeout in 9m30s)")
	now = now.Add(30 * time.Second)
	sup.Info("cp1", "still waiting for cp1: node-ready (service active; 1m0s so far, timeout in 9m0s, uninitialized taint for 20s, stall grace left 2m40s)")
	now = now.Add(30 * time.Second)
	em.WithPhase(events.PhaseJoinAgents).Info("", "waiting for 1 node: agent1 (not Ready, 30s); timeout in 4m30s")
}

func TestPlainProgressAndHeartbeatGolden(t *testing.T) {
	var buf bytes.Buffer
	ciRun(&Plain{W: &buf})
	golden.Assert(t, "plain-progress.txt", buf.Bytes())
}

func TestPlainProgressRateLimits(t *testing.T) {
	var buf bytes.Buffer
	ciRun(&Plain{W: &buf})
	last := map[string]time.Time{}
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[2] != "upload" || strings.Contains(l, "(done") || !strings.Contains(l, "/usr/local/bin/k3s") {
			continue
		}
		at, err := time.Parse(time.TimeOnly, f[0])
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[f[1]]; ok && at.Sub(prev) < ProgressMinGap {
			t.Errorf("two progress lines for %s within %s: %q", f[1], ProgressMinGap, l)
		}
		last[f[1]] = at
		lines[f[1]]++
		for _, want := range []string{"MiB/80.0 MiB (", "%, ", "MiB/s, ETA "} {
			if !strings.Contains(l, want) {
				t.Errorf("progress line lacks %q: %q", want, l)
			}
		}
	}
	// cp1 takes 10 s: a line per tenth. agent1 takes 40 s: a line per tenth (every 4 s).
	if lines["cp1"] < 8 || lines["cp1"] > 10 || lines["agent1"] < 8 || lines["agent1"] > 10 {
		t.Errorf("progress lines per host = %v, want about one per tenth of the file", lines)
	}
	var verbose bytes.Buffer
	ciRun(&Plain{W: &verbose, Verbose: true})
	if n := strings.Count(verbose.String(), "cp1 upload /usr/local/bin/k3s"); n < 50 {
		t.Errorf("--verbose printed %d of cp1's 51 progress events", n)
	}
}

// A slow upload that crosses no tenth in ProgressEvery still gets a line every ProgressEvery.
func TestPlainProgressEveryTenSeconds(t *testing.T) {
	var buf bytes.Buffer
	p := &Plain{W: &buf}
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	for s := 0; s <= 60; s++ {
		p.Emit(events.Event{Version: 1, Time: t0.Add(time.Duration(s) * time.Second), Type: events.UploadProgress, Phase: events.PhaseUpload,
			Host: "edge1", Upload: &events.Upload{File: "/var/lib/rancher/k3s/agent/images/airgap.tar.zst", Bytes: int64(s+1) * 1000, Total: 1 << 30}})
	}
	got := strings.Count(buf.String(), "edge1 upload")
	if got != 6 {
		t.Errorf("a 60 s upload below 1 %% printed %d lines, want 6 (one per %s):\n%s", got, ProgressEvery, buf.String())
	}
	if !strings.Contains(buf.String(), "09:00:10 edge1 upload /var/lib/rancher/k3s/agent/images/airgap.tar.zst 10.7 KiB/1.0 GiB (0%, 1000 B/s, ETA ") {
		t.Errorf("unexpected line format:\n%s", buf.String())
	}
}
