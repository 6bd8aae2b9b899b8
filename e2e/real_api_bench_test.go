// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
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

// execSampler counts the `kubectl` processes that run on a harness host: it polls the
// host's pids cgroup (on the machine: /sys/fs/cgroup/pids/k3i<instance>-h<index>/cgroup.procs,
// every process of the host outside its pods) every 10 ms and reads the command line of each
// new process once. A `k3s kubectl` that ends within one poll can be missed (the doctor's
// former cluster-view script ran 7, the sampler saw 4), so the count is a lower bound. It also
// keeps the largest peak RSS (VmHWM) seen of one. available is false when the cgroup is not
// there (another harness layout).
type execSampler struct {
	available bool
	stop      chan struct{}
	done      chan struct{}
	kubectl   int
	maxHWMKiB int64
}

func startExecSampler(hostIndex int) *execSampler {
	inst := os.Getenv("HARNESS_INSTANCE")
	if inst == "" {
		inst = "0"
	}
	procs := fmt.Sprintf("/sys/fs/cgroup/pids/k3i%s-h%d/cgroup.procs", inst, hostIndex)
	s := &execSampler{stop: make(chan struct{}), done: make(chan struct{})}
	if _, err := os.Stat(procs); err != nil {
		close(s.done)
		return s
	}
	s.available = true
	go func() {
		defer close(s.done)
		seen := map[string]bool{}
		watch := map[string]bool{}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if b, err := os.ReadFile(procs); err == nil {
				for _, pid := range strings.Fields(string(b)) {
					if !seen[pid] {
						seen[pid] = true
						cl, _ := os.ReadFile("/proc/" + pid + "/cmdline")
						args := strings.Split(string(cl), "\x00")
						if len(args) > 1 && strings.HasSuffix(args[0], "k3s") && args[1] == "kubectl" {
							s.kubectl++
							watch[pid] = true
						}
					}
				}
			}
			for pid := range watch {
				st, err := procStatusKiB(pid)
				if err != nil {
					delete(watch, pid)
					continue
				}
				s.maxHWMKiB = max(s.maxHWMKiB, st["VmHWM"])
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// end stops the sampler and returns the kubectl processes seen (-1: not available) and the
// largest peak RSS of one (MiB).
func (s *execSampler) end() (int, int64) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	if !s.available {
		return -1, -1
	}
	return s.kubectl, s.maxHWMKiB >> 10
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
// afterwards, the processes started on it over SSH (exec channels, and those whose command
// line runs `k3s kubectl`), every `k3s kubectl` process that ran on it (execSampler: those
// inside scripts and the bring-up probe too) with the largest peak RSS of one, the peak memory of the whole host (its memory cgroup: K3s, its containers and
// every SSH session) during apply, and apply's wall time. docs/architecture.md keeps the numbers.
func BenchmarkRealAPIFootprint(b *testing.B) {
	requireRealK3s(b)
	for b.Loop() {
		b.StopTimer()
		c := newRealCluster(b, 3)
		c.writeInventory(realServerAgents, nil)
		c.hostMemoryPeak(0, true)
		sampler := startExecSampler(c.hosts[0].Index)
		start := time.Now()
		r := c.k3strap(10*time.Minute, "apply", "--verbose")
		took := time.Since(start)
		applyKubectl, kubectlMiB := sampler.end()
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
		sampler = startExecSampler(c.hosts[0].Index)
		d := c.k3strap(3*time.Minute, "doctor", "--verbose")
		doctorKubectl, doctorMiB := sampler.end()
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
		b.Logf("apply: %.1f s, cp1: %d SSH commands (%d with kubectl), %d kubectl processes (largest peak RSS %d MiB), host memory peak %d MiB; "+
			"doctor: cp1 %d SSH commands (%d with kubectl), %d kubectl processes (largest %d MiB)",
			took.Seconds(), fa.commands, fa.kubectl, applyKubectl, kubectlMiB, peak>>20, fd.commands, fd.kubectl, doctorKubectl, doctorMiB)
		b.ReportMetric(took.Seconds(), "apply-s")
		b.ReportMetric(float64(fa.commands), "apply-cmds")
		b.ReportMetric(float64(fa.kubectl), "apply-kubectl-cmds")
		b.ReportMetric(float64(applyKubectl), "apply-kubectl-procs")
		b.ReportMetric(float64(doctorKubectl), "doctor-kubectl-procs")
		b.ReportMetric(float64(peak>>20), "peak-MiB")
		b.ReportMetric(float64(fd.commands), "doctor-cmds")
		b.ReportMetric(float64(fd.kubectl), "doctor-kubectl-cmds")
		b.StartTimer()
	}
}
