// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// TestRealFaults (real K3s): the supervisor and the joins under faults, on one 1 server + 2
// agents cluster whose hosts are reset to the base image between the cases (issue 26):
//   - killed: the first server's K3s gets SIGKILL once while the agents join (systemd restarts
//     it 5 s later): the run says so, rides it out (exit 0) and every node is Ready;
//   - interrupted: Ctrl-C (SIGINT) once the first server's API answers: exit 130 within 5 s,
//     the summary says what the first server got (not "skipped"); its K3s is then killed once
//     (as in the field report); a plain re-run with --timeout 10m finds K3s running but not
//     up, judges what it shows now and converges within 3 min (it used to wait out the
//     timeout, or call the one restart a crash loop);
//   - power loss: an agent's host killed (every process at once) right after its K3s was
//     started: the run ends within 90 s of the kill naming the host as unreachable (it used to
//     wait out the join timeout in silence); after the host boots again a plain re-run
//     converges with every node Ready.
func TestRealFaults(t *testing.T) {
	c := newRealCluster(t, 3)
	c.writeInventory(realServerAgents, nil)

	t.Run("killed", func(t *testing.T) {
		a := c.start(6*time.Minute, "apply", "--timeout", "4m")
		a.waitFor(t, 3*time.Minute, "an agent's K3s started", func(e events.Event) bool {
			return e.Type == events.HostStep && e.Step == "start" && (e.Host == "a1" || e.Host == "a2")
		})
		pid := c.exec(0, "systemctl", "show", "-p", "MainPID", "--value", "k3s")
		c.exec(0, "kill", "-KILL", pid)
		killed := time.Now()
		r := a.wait(t)
		defer r.dump(t)
		t.Logf("SIGKILL to cp1's k3s (pid %s) while agents joined: exit %d %s after the kill", pid, r.code, time.Since(killed).Round(time.Second))
		if r.code != 0 {
			t.Fatalf("apply with one K3s restart exited %d", r.code)
		}
		if n := c.exec(0, "systemctl", "show", "-p", "NRestarts", "--value", "k3s"); n != "1" {
			t.Errorf("NRestarts=%s, want 1 (systemd restarted the killed K3s once)", n)
		}
		said := false
		for _, e := range r.ofType(events.Info) {
			if e.Phase == events.PhaseSupervise || e.Phase == events.PhaseJoinAgents {
				t.Logf("  info %s: %s", e.Host, e.Message)
			}
			said = said || (e.Host == "cp1" && strings.Contains(e.Message, "restarted"))
		}
		if !said {
			t.Error("no event says that cp1's K3s restarted")
		}
		c.allReady(t, "cp1", "a1", "a2")
	})

	c.resetHosts(t)
	t.Run("interrupted", func(t *testing.T) {
		a := c.start(6*time.Minute, "apply", "--timeout", "10m")
		a.waitFor(t, 3*time.Minute, "cp1's API ready", func(e events.Event) bool {
			return e.Type == events.Milestone && e.Milestone.Name == "api-ready"
		})
		if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		r := a.wait(t)
		defer r.dump(t)
		took := time.Since(sent)
		t.Logf("Ctrl-C at cp1's api-ready: exit %d in %s", r.code, took.Round(time.Millisecond))
		if r.code != 130 || took > 5*time.Second {
			t.Fatalf("Ctrl-C: exit %d after %s, want 130 within 5 s", r.code, took)
		}
		for _, h := range r.summary(t).Hosts {
			if h.Host == "cp1" && (h.Status == events.StatusSkipped || !strings.Contains(h.Message, "not up yet")) {
				t.Errorf("interrupted run summarises cp1 (installed and started) as %s: %s", h.Status, h.Message)
			}
		}
		for _, e := range r.ofType(events.Error) {
			if e.Host != "" && e.Error != nil {
				t.Errorf("Ctrl-C reported as a failure of %s: %s", e.Host, e.Error.Message)
			}
		}
		// And, as in the field, cp1's K3s killed once before the re-run: the re-run finds it
		// running (systemd restarts it) but not up, and must judge the new process.
		c.exec(0, "sh", "-c", "kill -KILL $(systemctl show -p MainPID --value k3s)")
		re := c.k3strap(5*time.Minute, "apply", "--timeout", "10m")
		defer re.dump(t)
		t.Logf("re-run after Ctrl-C and a SIGKILL: exit %d in %s", re.code, re.duration.Round(time.Millisecond))
		resumed := false
		for _, e := range re.events {
			if e.Phase == events.PhaseSupervise && e.Type != events.Debug {
				t.Logf("  re-run %s %s %s", e.Type, e.Message, milestoneName(e))
				resumed = resumed || (e.Type == events.PhaseStarted && strings.Contains(e.Message, "running but not up yet"))
			}
		}
		// Within 3 min of a 10 min timeout: K3s killed during its first start may first wait
		// for its own CRDs (docs/k3s.md; measured: up to 96 s to up, 33 s without that wait).
		if re.code != 0 || re.duration > 3*time.Minute {
			t.Fatalf("re-run after Ctrl-C: exit %d after %s, want 0 within 3 min", re.code, re.duration)
		}
		if !resumed {
			t.Error("the re-run did not watch a K3s it found running but not up (the case under test)")
		}
		c.allReady(t, "cp1", "a1", "a2")
	})

	c.resetHosts(t)
	t.Run("power loss", func(t *testing.T) {
		a := c.start(6*time.Minute, "apply", "--timeout", "10m")
		a.waitFor(t, 3*time.Minute, "a2 converged (K3s started)", func(e events.Event) bool {
			return e.Type == events.HostStep && e.Host == "a2" && e.Step == "converge"
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.h.Kill(ctx, c.hosts[2].Index); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		r := a.wait(t)
		defer r.dump(t)
		took := time.Since(killed)
		t.Logf("a2 killed after its K3s started: exit %d %s after the kill", r.code, took.Round(time.Millisecond))
		if r.code == 0 || r.code == 130 || took > 90*time.Second {
			t.Fatalf("a2 lost: exit %d %s after the kill, want a failure within 90 s", r.code, took)
		}
		named := false
		for _, e := range r.ofType(events.Error) {
			named = named || (e.Error != nil && strings.Contains(e.Error.Message, "a2 has been unreachable since"))
		}
		for _, e := range r.ofType(events.Error) {
			if e.Error != nil {
				t.Logf("  error %s: %s", e.Host, e.Error.Message)
			}
		}
		if !named {
			t.Error("no error names a2 as unreachable")
		}
		for _, h := range r.summary(t).Hosts {
			if h.Host == "cp1" && h.Status == events.StatusSkipped {
				t.Errorf("cp1 (installed and up) summarised as skipped: %s", h.Message)
			}
		}
		if err := c.h.Start(ctx, c.hosts[2].Index); err != nil {
			t.Fatal(err)
		}
		re := c.k3strap(5*time.Minute, "apply", "--timeout", "10m")
		defer re.dump(t)
		t.Logf("re-run after a2 booted again: exit %d in %s", re.code, re.duration.Round(time.Millisecond))
		if re.code != 0 {
			t.Fatalf("re-run after a2 booted again exited %d", re.code)
		}
		c.allReady(t, "cp1", "a1", "a2")
	})
}

// allReady fails the test unless every named node is Ready in the API (read on host 0).
func (c *testCluster) allReady(t *testing.T, names ...string) {
	t.Helper()
	nodes := c.realNodes(0)
	for _, name := range names {
		n, ok := nodes[name]
		if !ok || !nodeReady(n) {
			t.Errorf("node %s not Ready (in the API: %v)", name, ok)
		}
	}
}

// resetHosts wipes every host back to the base image (fresh network namespace, SSH host keys
// kept), as a new cluster gets.
func (c *testCluster) resetHosts(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(c.hosts))
	for i, h := range c.hosts {
		wg.Go(func() { errs[i] = c.h.Reset(ctx, h.Index) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("resetting %s: %v", c.hosts[i].Name, err)
		}
	}
}

func milestoneName(e events.Event) string {
	if e.Milestone == nil {
		return ""
	}
	return fmt.Sprintf("%s +%.1fs", e.Milestone.Name, e.Milestone.Seconds)
}
