// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/lock"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// Flaky links: a dead link never hangs a run, uploads resume, the lock is atomic.

const (
	// linkKeepalive and linkConnect are the tests' --ssh-keepalive and ssh.connectTimeout: a
	// dead link is found within linkKeepalive × remote.DefaultKeepaliveMax, a host that no
	// longer answers within linkConnect.
	linkKeepalive = time.Second
	linkConnect   = 3 * time.Second
	pathK3s       = "/usr/local/bin/k3s"
)

// limitLink sets host i's loss (percent) and receive rate (kB/s) until the test ends.
func limitLink(t testing.TB, c *testCluster, i, loss, rate int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idx := c.hosts[i].Index
	if err := c.h.Loss(ctx, idx, loss); err != nil {
		t.Fatal(err)
	}
	if err := c.h.Rate(ctx, idx, rate); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.h.Loss(ctx, idx, 0)
		_ = c.h.Rate(ctx, idx, 0)
		_ = c.h.Heal(ctx, idx)
	})
}

// uploadAt waits until host's upload of file has reached frac of its size.
func uploadAt(t *testing.T, a *asyncRun, host, file string, frac float64) events.Event {
	t.Helper()
	return a.waitFor(t, 3*time.Minute, fmt.Sprintf("%s's upload of %s at %.0f%%", host, file, frac*100), func(e events.Event) bool {
		return e.Type == events.UploadProgress && e.Host == host && e.Upload != nil && e.Upload.File == file &&
			e.Upload.Total > 0 && float64(e.Upload.Bytes) >= frac*float64(e.Upload.Total)
	})
}

var sentRE = regexp.MustCompile(`upload of (\S+): sent (\d+) bytes of (\d+) from byte (\d+)$`)

// sentBytes sums, per host, the upload payload k3strap reports sending (--verbose) and the
// sizes of the files uploaded.
func sentBytes(r run) (sent, size map[string]int64) {
	sent, size = map[string]int64{}, map[string]int64{}
	seen := map[string]bool{}
	for _, e := range r.events {
		if e.Type != events.Debug {
			continue
		}
		m := sentRE.FindStringSubmatch(e.Message)
		if m == nil || m[1] == "" {
			continue
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		total, _ := strconv.ParseInt(m[3], 10, 64)
		sent[e.Host] += n
		if k := e.Host + " " + m[1]; !seen[k] {
			seen[k] = true
			size[e.Host] += total
		}
	}
	return sent, size
}

// partials lists k3strap's partial and temporary upload files on host i.
func partials(c *testCluster, i int) string {
	return c.exec(i, "sh", "-c", "ls -a /usr/local/bin /var/lib/rancher/k3s/agent/images /var/tmp 2>/dev/null | grep -e '\\.k3strap-' || true")
}

// TestUploadCutMidFlight: an agent cut while its large upload is in flight (past half) fails
// by name within keepalive × count + connect timeout (plus slack), the other hosts finish with
// exit 4, and the re-run after healing resumes the upload from the bytes the host holds —
// sending less than 60% of the file again — and leaves no partial file.
func TestUploadCutMidFlight(t *testing.T) {
	c := newCluster(t, 3)
	c.writeInventory(clusterInv, clusterExtra(1, 2, nil))
	limitLink(t, c, 2, 0, 3000) // ~8 s for the 23 MB binary: time to cut it half-way
	a := c.start(5*time.Minute, "apply", "--verbose", "--ssh-keepalive="+linkKeepalive.String(), "--kubeconfig-out", c.dir+"/k")
	at := uploadAt(t, a, "a2", pathK3s, 0.58)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Cut(ctx, c.hosts[2].Index); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	t.Logf("cut a2 at %d of %d bytes", at.Upload.Bytes, at.Upload.Total)
	r := a.wait(t)
	defer r.dump(t)
	if r.code != 4 {
		t.Fatalf("exit %d, want 4 (a host failed)", r.code)
	}
	st := statusOf(t, r)
	if st["a2"].Status != events.StatusFailed || st["cp1"].Status != events.StatusChanged || st["a1"].Status != events.StatusChanged {
		t.Fatalf("statuses: cp1 %s, a1 %s, a2 %s (%s)", st["cp1"].Status, st["a1"].Status, st["a2"].Status, st["a2"].Message)
	}
	var failed time.Time
	for _, e := range r.events {
		if (e.Host == "a2" && (e.Type == events.Error || e.Status == events.StatusFailed)) ||
			(e.Type == events.Error && strings.Contains(e.Message, "a2")) || e.Type == events.Summary {
			failed = e.Time
			break
		}
	}
	bound := linkKeepalive*remote.DefaultKeepaliveMax + linkConnect
	took := failed.Sub(cut)
	t.Logf("a2 failed %s after the cut (keepalive × count + connect timeout = %s)", took.Round(10*time.Millisecond), bound)
	if failed.IsZero() || took > bound+5*time.Second {
		t.Errorf("a2 failed %s after the cut, want within %s (+5 s slack for a loaded machine)", took, bound)
	}
	if err := c.h.Heal(ctx, c.hosts[2].Index); err != nil {
		t.Fatal(err)
	}
	if err := c.h.Rate(ctx, c.hosts[2].Index, 0); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(4*time.Minute, "apply", "--verbose", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("re-run after healing exited %d", r.code)
	}
	st = statusOf(t, r)
	if st["a2"].Status != events.StatusChanged || st["a1"].Status != events.StatusUnchanged {
		t.Errorf("re-run: a1 %s, a2 %s", st["a1"].Status, st["a2"].Status)
	}
	resumed := false
	for _, e := range r.events {
		if e.Host == "a2" && e.Type == events.Info && strings.Contains(e.Message, "resumed the upload of "+pathK3s) {
			resumed = true
			t.Log(e.Message)
		}
	}
	var sent int64
	for _, e := range r.events {
		if m := sentRE.FindStringSubmatch(e.Message); e.Host == "a2" && m != nil && m[1] == pathK3s {
			sent, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	t.Logf("re-run sent %d of %d bytes of %s (%.0f%%)", sent, at.Upload.Total, pathK3s, 100*float64(sent)/float64(at.Upload.Total))
	if !resumed || sent <= 0 || float64(sent) >= 0.6*float64(at.Upload.Total) {
		t.Errorf("the re-run did not resume the upload (resumed %v, sent %d of %d)", resumed, sent, at.Upload.Total)
	}
	if left := partials(c, 2); left != "" {
		t.Errorf("partial files left on a2:\n%s", left)
	}
}

// TestInterruptDuringDeadUpload: Ctrl-C while an upload hangs on a dead link (keepalive far
// off) ends the run with exit 130 within 5 s.
func TestInterruptDuringDeadUpload(t *testing.T) {
	c := newCluster(t, 2)
	c.writeInventory(clusterInv, clusterExtra(1, 1, nil))
	limitLink(t, c, 1, 0, 3000)
	a := c.start(5*time.Minute, "apply", "--ssh-keepalive=60s", "--kubeconfig-out", c.dir+"/k")
	uploadAt(t, a, "a1", pathK3s, 0.2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Cut(ctx, c.hosts[1].Index); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the upload is now stuck on the dead link
	sig := time.Now()
	if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := a.wait(t)
	defer r.dump(t)
	took := time.Since(sig)
	t.Logf("exit %d %s after SIGINT", r.code, took.Round(10*time.Millisecond))
	if r.code != 130 || took > 5*time.Second {
		t.Fatalf("exit %d %s after SIGINT, want 130 within 5 s", r.code, took)
	}
}

// TestLossyLinkApplyCompletes: 10% packet loss on an agent's link slows the run, never fails it.
func TestLossyLinkApplyCompletes(t *testing.T) {
	c := newCluster(t, 2)
	c.writeInventory(clusterInv, clusterExtra(1, 1, nil))
	limitLink(t, c, 1, 10, 0)
	r := c.k3strap(8*time.Minute, "apply", "--verbose", "--ssh-keepalive=2s", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply with 10%% loss on a1 exited %d", r.code)
	}
	sent, size := sentBytes(r)
	t.Logf("a1: sent %d bytes for %d bytes of artifacts (%.2f×)", sent["a1"], size["a1"], float64(sent["a1"])/float64(size["a1"]))
}

// lockClient connects to harness host h as root for lock tests.
func lockClient(t *testing.T, h *harness.Harness, host harness.Host) *remote.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := remote.Dial(ctx, remote.Config{Host: host.Name, Address: host.Address, User: "root", KeyPath: h.KeyPath(),
		InsecureIgnoreHostKey: true, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestStaleLockExactlyOneTakesOver: 4 runs finding the same stale lock at once — exactly one
// takes it over, 20 times in a row; a lock whose holder provably died on this machine is taken
// over at once, one whose holder lives is not.
func TestStaleLockExactlyOneTakesOver(t *testing.T) {
	c := newCluster(t, 1)
	const runs, trials = 4, 20
	clients := make([]*remote.Client, runs)
	for i := range clients {
		clients[i] = lockClient(t, c.h, c.hosts[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stale := fmt.Sprintf("printf 'dead0000\\nsomeone@elsewhere (pid 1)\\n' > %s && touch -d '-%d seconds' %s", k3s.PathLock, int(lock.TTL.Seconds())+30, k3s.PathLock)
	for trial := range trials {
		c.exec(0, "sh", "-c", "mkdir -p /var/lib/k3strap && "+stale)
		var wg sync.WaitGroup
		res := make([]lock.Attempt, runs)
		errs := make([]error, runs)
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = lock.Try(ctx, clients[i], "apply")
			}()
		}
		wg.Wait()
		won := 0
		for i := range runs {
			if errs[i] != nil {
				t.Fatalf("trial %d run %d: %v", trial, i, errs[i])
			}
			if res[i].Acquired {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("trial %d: %d of %d runs took the stale lock: %+v", trial, won, runs, res)
		}
	}
	// A holder on this machine whose process is gone (kill -9): taken over at once.
	machine, _ := os.ReadFile("/etc/machine-id")
	host, _ := os.Hostname()
	owner := strings.TrimSpace(string(machine)) + ":" + host
	gone := deadPid(t)
	writeLock := func(pid int) {
		c.exec(0, "sh", "-c", fmt.Sprintf("printf 'cafe0000\\nme@here (pid %d)\\n%s\\n%d\\n-\\n' > %s", pid, owner, pid, k3s.PathLock))
	}
	writeLock(gone)
	at, err := lock.Try(ctx, clients[0], "apply")
	if err != nil || !at.Acquired || !at.TookOver {
		t.Fatalf("lock of a dead pid on this machine: %+v %v", at, err)
	}
	// A holder that still runs here (this test's parent): refused.
	writeLock(os.Getppid())
	at, err = lock.Try(ctx, clients[0], "apply")
	if err != nil || at.Acquired {
		t.Fatalf("lock of a live pid taken: %+v %v", at, err)
	}
	c.exec(0, "rm", "-f", k3s.PathLock)
}

// deadPid returns the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid, 0); err == nil {
		t.Skip("pid reused at once")
	}
	return p.Pid
}
