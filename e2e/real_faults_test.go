// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// TestRealFaults (real K3s): the supervisor and the joins under faults, on one 1 server + 2
// agents cluster whose hosts are reset to the base image between the cases (docs/failure-modes.md "Faults during a run"):
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
//     converges with every node Ready;
//   - first server lost: cp1's host killed while the supervisor watches its K3s come up: the
//     run ends within 90 s naming cp1 unreachable; after it boots again a plain re-run
//     converges within 3 min;
//   - server rebooted: the first server's host loses power after the install: check and doctor
//     end within a minute naming it; once it boots again a plain re-run converges within 3 min
//     (of a 10 min timeout) with every node Ready;
//   - disk full during upload: a reinstalled agent whose /usr/local/bin is too small for the
//     real K3s binary (preflight's UploadSpace ignored): exit 4 naming the host, the directory,
//     free and needed space, nothing half-written; once the space is there a plain re-run
//     converges.
//
// Cost per case, measured on a shared 2-core machine (reset included): killed 55–115 s,
// interrupted 64–80 s, power loss 57–70 s, first server lost 50–62 s, server rebooted
// 47–75 s (reuses the converged cluster), disk full during upload 25–34 s (resets one host);
// the whole test 7–8 min.
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

	c.resetHosts(t)
	t.Run("first server lost", func(t *testing.T) {
		a := c.start(6*time.Minute, "apply", "--timeout", "10m")
		a.waitFor(t, 3*time.Minute, "the supervisor watching cp1", func(e events.Event) bool {
			return e.Type == events.PhaseStarted && e.Phase == events.PhaseSupervise
		})
		time.Sleep(2 * time.Second) // cp1's K3s is coming up, the probe streams
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.h.Kill(ctx, c.hosts[0].Index); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		r := a.wait(t)
		defer r.dump(t)
		took := time.Since(killed)
		t.Logf("cp1 killed while the supervisor watched it: exit %d %s after the kill", r.code, took.Round(time.Millisecond))
		said := ""
		for _, e := range r.ofType(events.Error) {
			if e.Error != nil && strings.Contains(e.Error.Message, "cp1 has been unreachable since") {
				said = e.Error.Message
			}
		}
		t.Logf("  %s", said)
		if r.code == 0 || r.code == 130 || took > 90*time.Second || said == "" {
			t.Fatalf("cp1 lost during its bring-up: exit %d %s after the kill, error %q; want a failure within 90 s naming cp1 unreachable", r.code, took, said)
		}
		if err := c.h.Start(ctx, c.hosts[0].Index); err != nil {
			t.Fatal(err)
		}
		re := c.k3strap(5*time.Minute, "apply", "--timeout", "10m")
		defer re.dump(t)
		t.Logf("re-run after cp1 booted again: exit %d in %s", re.code, re.duration.Round(time.Millisecond))
		// As after a Ctrl-C: K3s cut off in its first start may wait for its CRDs first.
		if re.code != 0 || re.duration > 3*time.Minute {
			t.Fatalf("re-run after cp1 booted again: exit %d after %s, want 0 within 3 min", re.code, re.duration)
		}
		c.allReady(t, "cp1", "a1", "a2")
	})

	// The cluster is converged here; run alone, this case installs it first.
	t.Run("server rebooted", func(t *testing.T) {
		if r := c.k3strap(8*time.Minute, "apply", "--timeout", "5m"); r.code != 0 {
			r.dump(t)
			t.Fatalf("apply before the reboot exited %d", r.code)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.h.Kill(ctx, c.hosts[0].Index); err != nil {
			t.Fatal(err)
		}
		// While cp1 is down: check and doctor end in bounded time naming cp1 unreachable.
		for _, cmd := range []string{"check", "doctor"} {
			r := c.k3strap(3*time.Minute, cmd)
			t.Logf("%s with cp1 powered off: exit %d in %s", cmd, r.code, r.duration.Round(time.Millisecond))
			named := ""
			for _, e := range r.events {
				if e.Type == events.Error && e.Error != nil && strings.Contains(e.Error.Message, "cp1") {
					named = e.Error.Message
				}
				if e.Type == events.Finding && e.Finding != nil && e.Host == "cp1" && named == "" {
					named = e.Finding.Message
				}
			}
			t.Logf("  %s", named)
			if r.code == 0 || r.code == 1 || r.duration > time.Minute || named == "" {
				r.dump(t)
				t.Errorf("%s with cp1 down: exit %d after %s naming cp1 in %q, want a named failure within 1 min", cmd, r.code, r.duration, named)
			}
		}
		if err := c.h.Start(ctx, c.hosts[0].Index); err != nil {
			t.Fatal(err)
		}
		booted := time.Now()
		re := c.k3strap(5*time.Minute, "apply", "--timeout", "10m")
		defer re.dump(t)
		t.Logf("re-run right after cp1 booted again: exit %d in %s", re.code, re.duration.Round(time.Millisecond))
		for _, e := range re.events {
			if (e.Phase == events.PhaseSupervise || e.Phase == events.PhaseJoinAgents) && e.Type != events.Debug {
				t.Logf("  re-run %s %s %s %s", e.Type, e.Host, e.Message, milestoneName(e))
			}
		}
		// Well within the 10 min timeout: K3s restarts with the host (measured: see
		// docs/failure-modes.md), the re-run watches it come up and the agents reconnect.
		if re.code != 0 || re.duration > 3*time.Minute {
			t.Fatalf("re-run after cp1's reboot: exit %d after %s, want 0 within 3 min", re.code, re.duration)
		}
		c.allReady(t, "cp1", "a1", "a2")
		t.Logf("every node Ready %s after cp1 booted", time.Since(booted).Round(time.Second))
	})

	// a2 alone back to the base image (a host added or reinstalled), with /usr/local/bin a tmpfs
	// half the size of the real K3s binary; preflight's UploadSpace ignored, the upload itself
	// runs out of space.
	t.Run("disk full during upload", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Reinstalled with its identity kept: the node password K3s registered a2 with (else
		// the server refuses the node name, k3s-io/k3s "Node password rejected"). Run alone,
		// on fresh hosts, a2 has none and the whole cluster is installed here.
		pw, pwErr := c.h.Exec(ctx, c.hosts[2].Index, "cat", "/etc/rancher/node/password")
		if err := c.h.Reset(ctx, c.hosts[2].Index); err != nil {
			t.Fatal(err)
		}
		if pwErr == nil {
			if err := c.h.WriteFile(ctx, c.hosts[2].Index, "/etc/rancher/node/password", pw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		st, err := os.Stat(c.real.Binary)
		if err != nil {
			t.Fatal(err)
		}
		mib := st.Size()>>20/2 + 1
		c.exec(2, "mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(mib, 10)+"m", "tmpfs", "/usr/local/bin")
		mounted := true
		defer func() {
			if mounted {
				_, _ = c.h.Exec(context.Background(), c.hosts[2].Index, "umount", "-l", "/usr/local/bin")
			}
		}()
		r := c.k3strap(5*time.Minute, "apply", "--timeout", "5m", "--ignore-preflight-errors=UploadSpace")
		defer r.dump(t)
		t.Logf("apply with a2's /usr/local/bin %d MiB (binary %d MiB): exit %d in %s", mib, st.Size()>>20, r.code, r.duration.Round(time.Millisecond))
		// The host's own error event (the join step's error only names the hosts), and its
		// line in the summary.
		said, summarised := "", ""
		for _, e := range r.ofType(events.Error) {
			if e.Host == "a2" && e.Error != nil && strings.Contains(e.Error.Message, "no space left on /usr/local/bin (") {
				said = e.Error.Message
			}
		}
		for _, h := range r.summary(t).Hosts {
			if h.Host == "a2" {
				summarised = h.Message
			}
		}
		t.Logf("  error: %s", said)
		t.Logf("  summary: %s", summarised)
		if r.code != 4 || r.duration > 3*time.Minute {
			t.Errorf("apply exited %d after %s, want 4 within 3 min", r.code, r.duration)
		}
		if !strings.Contains(said, "MiB free") || !strings.Contains(said, "needed") || strings.Contains(said, "SSH_FX_FAILURE") {
			t.Errorf("no error event of a2 says no space left on /usr/local/bin with free and needed: %q", said)
		}
		if !strings.Contains(summarised, "no space left on /usr/local/bin") {
			t.Errorf("the summary of a2 does not say no space left: %q", summarised)
		}
		if left := c.exec(2, "sh", "-c", "ls -A /usr/local/bin /var/tmp | grep -e k3strap -e '^k3s' || true"); left != "" {
			t.Errorf("left behind on a2: %s", left)
		}
		c.exec(2, "umount", "/usr/local/bin")
		mounted = false
		re := c.k3strap(5*time.Minute, "apply", "--timeout", "10m")
		defer re.dump(t)
		t.Logf("re-run with the space freed: exit %d in %s", re.code, re.duration.Round(time.Millisecond))
		if re.code != 0 {
			t.Fatalf("re-run with the space freed exited %d", re.code)
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
