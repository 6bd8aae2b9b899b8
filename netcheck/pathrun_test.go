// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConsume: a collect that ends inside a line leaves that line to the next collect (it
// counts only the bytes up to the last whole line); a run directory of another shape is not
// taken.
func TestConsume(t *testing.T) {
	r := &pathRun{runs: []*hostRun{{h: ProbeHost{Name: "h"}}}, rep: &PathReport{Hosts: map[string]string{}},
		tcpRes: map[string]answer{}, sendRes: map[string]answer{}, got: map[string]int32{},
		lstate: map[string]ListenerState{}, kinds: map[string]string{}}
	hr := r.runs[0]
	r.consume(0, "dir /run/k3strap-probe.Ab12\nlisten tcp 6443 ok\nready\ndetached 42\n")
	if hr.dir != "/run/k3strap-probe.Ab12" || !hr.ready || !hr.detached {
		t.Fatalf("after the start: %+v", *hr)
	}
	if n := r.consume(0, "tcp p1 ok 2 h1\ngot 8472 10.0.0.2 p2 0 6"); n != len("tcp p1 ok 2 h1\n") {
		t.Fatalf("%d bytes consumed", n)
	}
	if _, ok := r.tcpRes["p1"]; !ok || r.got["p2"] != 0 {
		t.Fatalf("a line cut short was used: %v", r.got)
	}
	r.consume(0, "got 8472 10.0.0.2 p2 0 64\nprobed\n")
	if g := r.got["p2"]; g != 64 {
		t.Fatalf("the rest of the line: %v", r.got)
	}
	// A directory of another shape is never kept (it would be removed at the end).
	r.consume(0, "dir /etc\n")
	if hr.dir != "/run/k3strap-probe.Ab12" {
		t.Errorf("dir %q taken", hr.dir)
	}
}

// TestProbeOf: every kind of probe id leads back to its planned probe.
func TestProbeOf(t *testing.T) {
	r := &pathRun{rep: &PathReport{Results: make([]PathResult, 13)}}
	for id, want := range map[string]int{"p0": 0, "p1": 1, "p12m": 12, "p1ml12": 1} {
		if got, ok := r.probeOf(id); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", id, got, ok, want)
		}
	}
	for _, id := range []string{"p13", "x", "p", "pm"} {
		if _, ok := r.probeOf(id); ok {
			t.Errorf("%s has a probe", id)
		}
	}
}

// watchedHosts runs the probes on this machine and records every run directory and detached
// probe the hosts reported.
type watchedHosts struct {
	mu   sync.Mutex
	dirs []string
	pids []int
}

func (w *watchedHosts) exec(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
	out, err := localExec(ctx, step, script, stdin, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(out, "\n") {
		if d, ok := strings.CutPrefix(l, "dir "); ok {
			w.dirs = append(w.dirs, d)
		}
		if p, ok := strings.CutPrefix(l, "detached "); ok {
			n, _ := strconv.Atoi(p)
			w.pids = append(w.pids, n)
		}
	}
	return out, err
}

// hosts are c's hosts run through w, with hook (when not nil) called before each command
// (its host, step and arguments).
func (w *watchedHosts) hosts(c *Cluster, hook func(ctx context.Context, host, step string, args []string)) []ProbeHost {
	hs := hostsOf(c)
	for i := range hs {
		name := hs[i].Name
		hs[i].Exec = func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
			if hook != nil {
				hook(ctx, name, step, args)
			}
			return w.exec(ctx, step, script, stdin, args...)
		}
	}
	return hs
}

// gone fails t for every run directory left and every probe still running 2 s after the run.
func (w *watchedHosts) gone(t *testing.T, hosts int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.dirs) != hosts || len(w.pids) != hosts {
		t.Fatalf("%d run directories and %d detached probes for %d hosts", len(w.dirs), len(w.pids), hosts)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, p := range w.pids {
		for running(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if running(p) {
			t.Errorf("probe %d still runs", p)
		}
	}
	for _, d := range w.dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("run directory %s left", d)
		}
	}
}

// running says process pid exists and has not exited: an exited one whose parent (here init,
// which adopted the detached probe) has not reaped it yet is a zombie (state Z in
// /proc/PID/stat).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// TestRunPathsDetached: every path is tested through the detached probes, and nothing is
// left of them afterwards: no process, no run directory, and the ports are free at once (K3s
// starts right after the path check).
func TestRunPathsDetached(t *testing.T) {
	for _, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			c := loopCluster()
			w := &watchedHosts{}
			rep := RunPaths(context.Background(), c, w.hosts(c, nil), PathOptions{Tool: tool})
			for _, n := range c.Nodes {
				l, err := net.Listen("tcp", netip.AddrPortFrom(n.Address, 40250).String())
				if err != nil {
					t.Fatalf("the port is still held after the run: %v", err)
				}
				l.Close()
				u, err := net.ListenPacket("udp", netip.AddrPortFrom(n.Address, 48472).String())
				if err != nil {
					t.Fatalf("the port is still held after the run: %v", err)
				}
				u.Close()
			}
			if len(rep.Hosts) != 0 || len(rep.Results) != 14 {
				t.Fatalf("hosts left out: %v; %d results", rep.Hosts, len(rep.Results))
			}
			for _, r := range rep.Results {
				if r.Status != PathOK {
					t.Errorf("%s → %s %d: %s %s", r.From, r.To, r.Port.Port, r.Status, r.Detail)
				}
			}
			w.gone(t, 3)
		})
	}
}

// TestRunPathsStopped: a run stopped while its probes run (Ctrl-C) returns at once and still
// ends every probe and removes its run directory.
func TestRunPathsStopped(t *testing.T) {
	needTool(t, "perl")
	c := loopCluster()
	w := &watchedHosts{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := w.hosts(c, func(_ context.Context, _, step string, _ []string) {
		if step == "read" { // the probes were handed over: stop the run
			cancel()
		}
	})
	start := time.Now()
	RunPaths(ctx, c, hs, PathOptions{Tool: "perl"})
	if d := time.Since(start); d > stopWait+time.Second {
		t.Errorf("the stopped run took %s", d)
	}
	w.gone(t, 3)
}

// TestRunPathsProbeGone: a probe that ended before it was handed its probes (its time limit
// passed) is reported with its own words, its paths are untested, the others are tested, and
// nothing is left.
func TestRunPathsProbeGone(t *testing.T) {
	needTool(t, "perl")
	c := loopCluster()
	w := &watchedHosts{}
	hs := w.hosts(c, func(ctx context.Context, host, step string, args []string) {
		if host == "a2" && step == "hand over" { // a2's probe ends first, as at its limit
			if _, err := localExec(ctx, "stop", probeStopScript(), nil, args[0]); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	rep := RunPaths(context.Background(), c, hs, PathOptions{Tool: "perl"})
	if why := rep.Hosts["a2"]; !strings.Contains(why, "the probe on this host has ended") {
		t.Errorf("a2: %q, want the probe's own reason", why)
	}
	onlyUntested(t, rep, "a2")
	w.gone(t, 3)
}

// TestProbeDetachedEndsAtLimit: a detached probe nobody comes back to ends at its own time
// limit and removes its run directory.
func TestProbeDetachedEndsAtLimit(t *testing.T) {
	for _, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			script, program := ProbeScript(1, tool)
			w := &watchedHosts{}
			out, err := w.exec(context.Background(), "start", script, strings.NewReader(program+"id n1 h0\nlisten udp 127.0.0.61 46997\nbind\ndetach\n"))
			if err != nil || !strings.Contains(out, "\nready\ndetached ") {
				t.Fatalf("%v: %q", err, out)
			}
			time.Sleep(time.Second)
			w.gone(t, 1)
		})
	}
}
