package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
)

// tenHosts is an inventory of one server and nine agents on the harness hosts.
const tenHosts = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: bench
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
  ssh:
    user: root
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
  hosts:
{{- range $i, $h := .Hosts}}
    - name: {{if eq $i 0}}cp1{{else}}a{{$i}}{{end}}
      address: {{$h.Address}}
      role: {{if eq $i 0}}server{{else}}agent{{end}}
{{- end}}
`

// floor measures the floor: one plain OpenSSH `ssh` per host, all in parallel, each
// running one script that prints the same facts k3strap gathers.
func floor(b *testing.B, c *testCluster) time.Duration {
	b.Helper()
	script := facts.Script(facts.ScriptInput{Files: []string{"/etc/rancher/k3s/config.yaml", "/usr/local/bin/k3s"}})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(c.hosts))
	for _, h := range c.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "ssh", "-i", c.h.KeyPath(), "-o", "UserKnownHostsFile="+c.dir+"/known_hosts",
				"-o", "StrictHostKeyChecking=accept-new", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
				"root@"+h.Address, "sh", "-c", shellQuote(script))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("ssh %s: %v: %s", h.Address, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// BenchmarkPreflight10Hosts compares `k3strap preflight` on 10 hosts with the floor measured in
// the same run, and reports SSH channels per host (issue 2: within 1.5× the floor, at most 2
// channels per host).
func BenchmarkPreflight10Hosts(b *testing.B) {
	c := newCluster(b, 10)
	c.writeInventory(tenHosts, nil)
	var floorSum, ourSum time.Duration
	var maxCmds int64
	for b.Loop() {
		floorSum += floor(b, c)
		r := c.k3strap(2*time.Minute, "preflight")
		if r.code != 0 {
			b.Fatalf("preflight exited %d:\n%s", r.code, r.stdout)
		}
		ourSum += r.duration
		for _, h := range r.summaryB(b).Hosts {
			maxCmds = max(maxCmds, h.SSHCommands)
		}
	}
	n := float64(b.N)
	b.ReportMetric(floorSum.Seconds()*1000/n, "floor-ms")
	b.ReportMetric(ourSum.Seconds()*1000/n, "k3strap-ms")
	b.ReportMetric(ourSum.Seconds()/floorSum.Seconds(), "x-floor")
	b.ReportMetric(float64(maxCmds), "max-channels/host")
}

// BenchmarkNoopApply10Hosts: a second `k3strap apply` on an installed 1-server + 9-agent
// cluster, against the same floor (issue 2: within 2× the floor).
func BenchmarkNoopApply10Hosts(b *testing.B) {
	c := newCluster(b, 10)
	c.writeInventory(tenHosts, nil)
	if r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k"); r.code != 0 {
		b.Fatalf("first apply exited %d:\n%s", r.code, r.stdout)
	}
	var floorSum, ourSum time.Duration
	for b.Loop() {
		floorSum += floor(b, c)
		r := c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
		if r.code != 0 {
			b.Fatalf("no-op apply exited %d:\n%s", r.code, r.stdout)
		}
		for _, h := range r.summaryB(b).Hosts {
			if h.Status != events.StatusUnchanged {
				b.Fatalf("no-op apply changed %s: %s", h.Host, h.Message)
			}
		}
		ourSum += r.duration
	}
	n := float64(b.N)
	b.ReportMetric(floorSum.Seconds()*1000/n, "floor-ms")
	b.ReportMetric(ourSum.Seconds()*1000/n, "k3strap-ms")
	b.ReportMetric(ourSum.Seconds()/floorSum.Seconds(), "x-floor")
}

// BenchmarkApply5Hosts: a fresh 3-server + 2-agent apply and a no-op re-apply (issue 3's
// closing note), simulator time scale SimTimeScale.
func BenchmarkApply5Hosts(b *testing.B) {
	var fresh, noop time.Duration
	for b.Loop() {
		c := newCluster(b, 5)
		c.writeInventory(clusterInv, clusterExtra(3, 2, nil))
		r := c.k3strap(6*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
		if r.code != 0 {
			b.Fatalf("apply exited %d:\n%s", r.code, r.stdout)
		}
		fresh += r.duration
		r = c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
		if r.code != 0 {
			b.Fatalf("no-op apply exited %d", r.code)
		}
		noop += r.duration
	}
	b.ReportMetric(fresh.Seconds()/float64(b.N), "apply-s")
	b.ReportMetric(noop.Seconds()/float64(b.N), "noop-s")
}

// BenchmarkApplyAgents: how a fresh apply of one server plus N agents grows with N.
func BenchmarkApplyAgents(b *testing.B) {
	for _, n := range []int{2, 4, 6, 8, 10} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				c := newCluster(b, n+1)
				c.writeInventory(clusterInv, clusterExtra(1, n, nil))
				r := c.k3strap(6*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k")
				if r.code != 0 {
					b.Fatalf("apply exited %d:\n%s", r.code, r.stdout)
				}
				total += r.duration
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "apply-s")
		})
	}
}
