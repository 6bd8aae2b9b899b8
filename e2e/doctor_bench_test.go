// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkDoctor10Nodes: `k3strap doctor --ssh SERVER` on a hand-installed 1-server + 9-agent
// cluster (goal: under 2 s wall; one SSH command per node plus one cluster query — the
// summary's per-host SSHCommands: 2 on the server, 1 on each agent, besides connect's own).
func BenchmarkDoctor10Nodes(b *testing.B) {
	c := newCluster(b, 10)
	c.handInstall(0, "server", "kubelet-arg: [fail-cgroupv1=false]\n")
	c.waitNode(c.hosts[0].Name, true)
	token := c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")
	var wg sync.WaitGroup
	for i := 1; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.handInstall(i, "agent", fmt.Sprintf("server: https://%s:6443\ntoken: %s\nkubelet-arg: [fail-cgroupv1=false]\n", c.hosts[0].Address, token))
		}()
	}
	wg.Wait()
	for i := 1; i < 10; i++ {
		c.waitNode(c.hosts[i].Name, true)
	}
	var sum time.Duration
	var maxServer, maxAgent, nodes int64
	for b.Loop() {
		r := c.k3strap(time.Minute, "doctor", "--ssh", "root@"+c.hosts[0].Address, "--ssh-key-path", c.h.KeyPath(),
			"--ssh-known-hosts", c.dir+"/known_hosts")
		if r.code != 0 && r.code != 7 {
			b.Fatalf("doctor exited %d:\n%s", r.code, r.stdout)
		}
		sum += r.duration
		hosts := r.summaryB(b).Hosts
		nodes = int64(len(hosts))
		for _, h := range hosts {
			if h.Role == "server" {
				maxServer = max(maxServer, h.SSHCommands)
			} else {
				maxAgent = max(maxAgent, h.SSHCommands)
			}
		}
	}
	if nodes != 10 {
		b.Errorf("doctor reached %d nodes, want 10", nodes)
	}
	ms := sum.Seconds() * 1000 / float64(b.N)
	if ms > 2000 {
		b.Errorf("doctor took %.0f ms on 10 nodes, want < 2000", ms)
	}
	b.ReportMetric(ms, "doctor-ms")
	b.ReportMetric(float64(maxServer), "ssh-cmds/server")
	b.ReportMetric(float64(maxAgent), "ssh-cmds/agent")
}
