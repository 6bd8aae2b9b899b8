// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// hostMemoryPeak returns the peak memory (bytes) of host i's memory cgroup since the last
// reset, and resets it when reset is set. Inside a harness host /sys/fs/cgroup is the host's own
// cgroup: on cgroup v1 memory/memory.max_usage_in_bytes (writing 0 resets it), on v2
// memory.peak (reset by writing to it on Linux ≥ 6.12). It returns -1 when neither is readable.
func (c *testCluster) hostMemoryPeak(i int, reset bool) int64 {
	c.t.Helper()
	script := `for f in /sys/fs/cgroup/memory/memory.max_usage_in_bytes /sys/fs/cgroup/memory.peak; do
  [ -r "$f" ] || continue
  cat "$f"
  if [ "$1" = reset ]; then echo 0 > "$f" 2>/dev/null || echo reset > "$f" 2>/dev/null || true; fi
  exit 0
done
echo -1`
	arg := "keep"
	if reset {
		arg = "reset"
	}
	v, err := strconv.ParseInt(c.exec(i, "sh", "-c", script, "sh", arg), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// kubeFootprint is what one k3strap run cost the first server: SSH exec channels (each starts
// one process, a shell, on the host: remote.Stats.Commands, the summary's sshCommands) and how
// many of them ran `k3s kubectl` (counted from the --verbose command lines).
type kubeFootprint struct {
	commands, kubectl int64
}

func footprint(r run, host string) kubeFootprint {
	var f kubeFootprint
	for _, e := range r.ofType(events.Debug) {
		if e.Host == host && strings.Contains(e.Message, "kubectl") {
			f.kubectl++
		}
	}
	return f
}

// BenchmarkRealAPIFootprint (real K3s) measures what k3strap's Kubernetes API calls cost the
// first server of a 1 server + 2 agents cluster: during `apply` and during a `doctor` run
// afterwards, the processes started on it over SSH (exec channels, and those running
// `k3s kubectl`), the peak memory of the whole host (its memory cgroup: K3s, its containers and
// every SSH session) during apply, and apply's wall time. docs/architecture.md keeps the numbers.
func BenchmarkRealAPIFootprint(b *testing.B) {
	requireRealK3s(b)
	for b.Loop() {
		b.StopTimer()
		c := newRealCluster(b, 3)
		c.writeInventory(realServerAgents, nil)
		c.hostMemoryPeak(0, true)
		start := time.Now()
		r := c.k3strap(10*time.Minute, "apply", "--verbose")
		took := time.Since(start)
		if r.code != 0 {
			b.Fatalf("apply exited %d:\n%s", r.code, r.stdout)
		}
		peak := c.hostMemoryPeak(0, false)
		fa := footprint(r, "cp1")
		for _, h := range r.summaryB(b).Hosts {
			if h.Host == "cp1" {
				fa.commands = h.SSHCommands
			}
		}
		d := c.k3strap(3*time.Minute, "doctor", "--verbose")
		b.Logf("doctor exited %d", d.code)
		fd := footprint(d, "cp1")
		for _, h := range d.summaryB(b).Hosts {
			if h.Host == "cp1" {
				fd.commands = h.SSHCommands
			}
		}
		if f := os.Getenv("K3STRAP_BENCH_EVENTS"); f != "" {
			_ = os.WriteFile(f+"-api-apply.jsonl", []byte(r.stdout), 0o644)
			_ = os.WriteFile(f+"-api-doctor.jsonl", []byte(d.stdout), 0o644)
		}
		b.Logf("apply: %.1f s, cp1: %d SSH commands (%d kubectl), host memory peak %d MiB; doctor: cp1 %d SSH commands (%d kubectl)",
			took.Seconds(), fa.commands, fa.kubectl, peak>>20, fd.commands, fd.kubectl)
		b.ReportMetric(took.Seconds(), "apply-s")
		b.ReportMetric(float64(fa.commands), "apply-cmds")
		b.ReportMetric(float64(fa.kubectl), "apply-kubectl")
		b.ReportMetric(float64(peak>>20), "peak-MiB")
		b.ReportMetric(float64(fd.commands), "doctor-cmds")
		b.ReportMetric(float64(fd.kubectl), "doctor-kubectl")
		b.StartTimer()
	}
}
