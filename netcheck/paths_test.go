// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package netcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/k3s"
)

// localExec runs one of the path check's commands on this machine, as RunPaths's callers run
// them over SSH (ProbeHost.Exec).
func localExec(ctx context.Context, _, script string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Stdin = stdin
	// The detached probe keeps no descriptor of the command's: Output returns when it exits.
	out, err := cmd.Output()
	return string(out), err
}

// probeCmd starts the probe for tool with a limit of limit seconds, its program already
// written to its input as RunPaths writes it (ProbeScript), and returns its input and its
// output after the run directory's line (the directory is removed when the test ends).
func probeCmd(t *testing.T, limit int, tool string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	script, program := ProbeScript(limit, tool)
	cmd := exec.Command("sh", "-c", script)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(in, program); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "dir ") {
		t.Fatalf("first line %q, want the run directory", sc.Text())
	}
	dir := strings.TrimPrefix(sc.Text(), "dir ")
	t.Cleanup(func() { os.RemoveAll(dir) })
	return cmd, in, sc
}

// testPorts are K3s's kinds of ports on numbers nothing else on this machine uses.
var testPorts = []k3s.NodePort{
	{Proto: "tcp", Port: 46443, Purpose: "supervisor", From: k3s.Agents, To: k3s.Servers},
	{Proto: "tcp", Port: 40250, Purpose: "kubelet", From: k3s.AllNodes, To: k3s.AllNodes},
	{Proto: "udp", Port: 48472, Purpose: "VXLAN", From: k3s.AllNodes, To: k3s.AllNodes, Overlay: true},
}

// loopCluster is a server and two agents on loopback addresses of this machine.
func loopCluster() *Cluster {
	return &Cluster{Ports: testPorts, Nodes: []Node{
		{Name: "cp1", Server: true, Address: netip.MustParseAddr("127.0.0.61")},
		{Name: "a1", Address: netip.MustParseAddr("127.0.0.62")},
		{Name: "a2", Address: netip.MustParseAddr("127.0.0.63")},
	}}
}

func hostsOf(c *Cluster) []ProbeHost {
	var hs []ProbeHost
	for _, n := range c.Nodes {
		hs = append(hs, ProbeHost{Name: n.Name, Exec: localExec})
	}
	return hs
}

func needTool(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s is not installed here", tool)
	}
}

func TestPlanProbes(t *testing.T) {
	ps := PlanProbes(loopCluster())
	// 2 agents → 1 server on 46443, 6 ordered pairs on 40250 and on 48472
	if len(ps) != 2+6+6 {
		t.Fatalf("%d probes: %+v", len(ps), ps)
	}
	if ps[0].From != "a1" || ps[0].To != "cp1" || ps[0].Addr.String() != "127.0.0.61" || ps[0].Port.Port != 46443 {
		t.Errorf("first probe %+v", ps[0])
	}
}

// TestRunPathsOpen runs the real probe programs (Perl and Python) between three "hosts" on
// this machine's loopback: every path is open, every probe answers, and the overlay port
// carries full-size don't-fragment datagrams.
func TestRunPathsOpen(t *testing.T) {
	for _, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			c := loopCluster()
			rep := RunPaths(context.Background(), c, hostsOf(c), PathOptions{Tool: tool})
			if len(rep.Hosts) > 0 {
				t.Fatalf("hosts left out: %v", rep.Hosts)
			}
			if len(rep.Results) != 14 {
				t.Fatalf("%d results", len(rep.Results))
			}
			for _, r := range rep.Results {
				if r.Status != PathOK {
					t.Errorf("%s → %s %s/%d: %s %s", r.From, r.To, r.Port.Proto, r.Port.Port, r.Status, r.Detail)
				}
			}
			if len(rep.MTU) != 6 {
				t.Fatalf("MTU results %d", len(rep.MTU))
			}
			for _, m := range rep.MTU {
				if !m.Fits() || m.Largest != 1500 {
					t.Errorf("MTU %s → %s: largest %d of %d", m.From, m.To, m.Largest, m.IfaceMTU)
				}
			}
			if rep.Rounds != 1 {
				t.Errorf("rounds %d", rep.Rounds)
			}
			t.Logf("%s: 3 hosts, %d probes in %s", tool, len(rep.Results), rep.Elapsed.Round(time.Millisecond))
		})
	}
}

// TestRunPathsHeldPorts: ports another process holds take no test listener; a TCP connect
// there still shows the path open, a UDP port is left untested (the rulesets judge it).
func TestRunPathsHeldPorts(t *testing.T) {
	needTool(t, "perl")
	l, err := net.Listen("tcp", "127.0.0.61:46443")
	if err != nil {
		t.Skipf("cannot hold a port here: %v", err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	u, err := net.ListenPacket("udp", "127.0.0.62:48472")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	c := loopCluster()
	rep := RunPaths(context.Background(), c, hostsOf(c), PathOptions{})
	if ls := rep.Listener("cp1", "tcp", 46443); ls == nil || ls.State != "busy" {
		t.Errorf("cp1's listener: %+v", ls)
	}
	for _, r := range rep.Results {
		want := PathOK
		switch {
		case r.To == "cp1" && r.Port.Port == 46443:
			want = PathOpen
		case r.To == "a1" && r.Port.Port == 48472:
			want = PathUntested
		}
		if r.Status != want {
			t.Errorf("%s → %s %d: %s (%s), want %s", r.From, r.To, r.Port.Port, r.Status, r.Detail, want)
		}
	}
}

// onlyUntested fails t unless every path from or to host is untested and every other open.
func onlyUntested(t *testing.T, rep *PathReport, host string) {
	t.Helper()
	for _, r := range rep.Results {
		involved := r.From == host || r.To == host
		if involved != (r.Status == PathUntested) || (!involved && r.Status != PathOK) {
			t.Errorf("%s → %s %d: %s %s", r.From, r.To, r.Port.Port, r.Status, r.Detail)
		}
	}
}

// TestRunPathsNoInterpreter: a host without Perl or Python takes no part, and says why.
func TestRunPathsNoInterpreter(t *testing.T) {
	c := loopCluster()
	hs := hostsOf(c)
	hs[2].Exec = func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
		return localExec(ctx, step, strings.Replace(script, "K3SP_LIMIT=", "K3SP_TOOL=no-such-interpreter\nK3SP_LIMIT=", 1), stdin, args...)
	}
	rep := RunPaths(context.Background(), c, hs, PathOptions{})
	if why := rep.Hosts["a2"]; !strings.Contains(why, "neither perl nor python3") {
		t.Fatalf("a2: %q", why)
	}
	onlyUntested(t, rep, "a2")
}

// TestProbeEndsWithoutInput: a probe whose connection drops (its input ends) exits at once,
// and one that is never told anything ends at its time limit.
func TestProbeEndsWithoutInput(t *testing.T) {
	for _, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			cmd, in, sc := probeCmd(t, 1, tool)
			io.WriteString(in, "id n1 h0\nlisten tcp 127.0.0.61 46999\nbind\n")
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if sc.Text() == "ready" {
					break
				}
			}
			if len(lines) != 2 || lines[0] != "listen tcp 46999 ok" {
				t.Fatalf("%q", lines)
			}
			start := time.Now()
			in.Close()
			cmd.Wait()
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("ended %s after its input closed", d)
			}
			// never told anything: the alarm ends it after 1 s
			start = time.Now()
			cmd, keep, _ := probeCmd(t, 1, tool)
			defer keep.Close()
			if err := cmd.Wait(); err == nil {
				t.Error("the alarm should end it with a signal")
			}
			if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
				t.Errorf("ended after %s, want about 1 s", d)
			}
		})
	}
}

func TestParseProbeLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want probeLine
	}{
		{"listen udp 8472 busy EADDRINUSE", probeLine{kind: "listen", proto: "udp", port: 8472, state: "busy", detail: "EADDRINUSE"}},
		{"tcp p3 ok 2 h1", probeLine{kind: "tcp", id: "p3", state: "ok", ms: 2, detail: "h1"}},
		{"tcp p4 timeout 1001", probeLine{kind: "tcp", id: "p4", state: "timeout", ms: 1001}},
		{"mtu p5m emsgsize 1472 1400", probeLine{kind: "mtu", id: "p5m", state: "emsgsize", size: 1472, pmtu: 1400}},
		{"got 8472 10.0.0.2 p5m 0 1472", probeLine{kind: "got", port: 8472, src: "10.0.0.2", id: "p5m", bytes: 1472}},
		{"error no-interpreter: neither perl nor python3 is installed", probeLine{kind: "error", detail: "no-interpreter: neither perl nor python3 is installed"}},
	} {
		got, ok := parseProbeLine(c.in)
		if !ok || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, ok, c.want)
		}
	}
	if _, ok := parseProbeLine("tcp p1"); ok {
		t.Error("short line accepted")
	}
}

// TestPlanProbesLargeCluster: at 100 nodes every node probes the server and 32 agents, every
// agent is probed by about as many, and the overlay's full-size datagrams go to 3 targets.
func TestPlanProbesLargeCluster(t *testing.T) {
	c := &Cluster{Ports: k3s.NodePorts(k3s.NodePortOptions{})}
	for i := 0; i < 100; i++ {
		c.Nodes = append(c.Nodes, Node{Name: "n" + strconv.Itoa(i), Server: i == 0, Address: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	out, in, mtu := map[string]int{}, map[string]int{}, map[string]int{}
	for _, p := range PlanProbes(c) {
		if p.Port.Port == 10250 {
			out[p.From]++
			in[p.To]++
		}
		if p.MTU {
			mtu[p.From]++
		}
	}
	for _, n := range c.Nodes {
		if out[n.Name] > 33 || (n.Name != "n0" && out[n.Name] != 33) {
			t.Errorf("%s probes %d peers on 10250", n.Name, out[n.Name])
		}
		if n.Name != "n0" && (in[n.Name] < 16 || in[n.Name] > 64) {
			t.Errorf("%s is probed by %d peers on 10250", n.Name, in[n.Name])
		}
		if mtu[n.Name] != 3 {
			t.Errorf("%s sends full-size datagrams to %d peers", n.Name, mtu[n.Name])
		}
	}
	if in["n0"] != 99 {
		t.Errorf("the server is probed by %d", in["n0"])
	}
}

// TestRunPathsHostTools: a host whose facts named its interpreter is sent only that program,
// one without gets both, and the three still test every path; the programs travel on the
// probe's input, never on its command line.
func TestRunPathsHostTools(t *testing.T) {
	needTool(t, "perl")
	needTool(t, "python3")
	c := loopCluster()
	hs := hostsOf(c)
	var mu sync.Mutex
	scripts := map[string]string{}
	perl, _ := exec.LookPath("perl")
	python, _ := exec.LookPath("python3")
	// As the facts report them: paths.
	for i, tool := range []string{perl, python, ""} {
		name := hs[i].Name
		hs[i].Tool = tool
		hs[i].Exec = func(ctx context.Context, step, script string, stdin io.Reader, args ...string) (string, error) {
			if step == "start" {
				mu.Lock()
				scripts[name] = script
				mu.Unlock()
			}
			return localExec(ctx, step, script, stdin, args...)
		}
	}
	rep := RunPaths(context.Background(), c, hs, PathOptions{})
	for _, r := range rep.Results {
		if r.Status != PathOK {
			t.Errorf("%s → %s %d: %s %s", r.From, r.To, r.Port.Port, r.Status, r.Detail)
		}
	}
	pl, py := "K3SP_PL_LEN="+strconv.Itoa(len(probePl))+"\n", "K3SP_PY_LEN="+strconv.Itoa(len(probePy))+"\n"
	for name, want := range map[string][2]bool{"cp1": {true, false}, "a1": {false, true}, "a2": {true, true}} {
		s := scripts[name]
		if got := [2]bool{strings.Contains(s, pl), strings.Contains(s, py)}; got != want {
			t.Errorf("%s is sent perl, python: %v, want %v (launcher:\n%s)", name, got, want, s)
		}
		if len(s) > 2048 || strings.Contains(s, "use strict") || strings.Contains(s, "import errno") {
			t.Errorf("%s's command line is %d bytes or carries a program", name, len(s))
		}
	}
}

// TestProbeReceiveBuffer: a datagram listener asks for a 4 MiB receive buffer (as root beyond
// net.core.rmem_max), so that a server's listener keeps the burst of every agent's datagrams.
func TestProbeReceiveBuffer(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("needs ss (iproute2) to read the socket's buffer")
	}
	rmemMax := 0
	if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
		rmemMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	want := 4 << 20
	if os.Geteuid() != 0 {
		want = min(want, rmemMax)
	}
	for i, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			port := 46990 + i
			cmd, in, sc := probeCmd(t, 5, tool)
			defer func() { in.Close(); cmd.Wait() }()
			fmt.Fprintf(in, "id n1 h0\nlisten udp 127.0.0.61 %d\nbind\n", port)
			for sc.Scan() && sc.Text() != "ready" {
			}
			ss, err := exec.Command("ss", "-u", "-l", "-n", "-m", fmt.Sprintf("sport = :%d", port)).CombinedOutput()
			if err != nil {
				t.Fatalf("ss: %v\n%s", err, ss)
			}
			m := regexp.MustCompile(`rb(\d+)`).FindStringSubmatch(string(ss))
			if m == nil {
				t.Fatalf("no receive buffer in ss's answer:\n%s", ss)
			}
			// The kernel doubles what was asked for (socket(7)).
			if rb, _ := strconv.Atoi(m[1]); rb < 2*want {
				t.Errorf("receive buffer %d bytes, want at least %d (asked %d)", rb, 2*want, want)
			}
		})
	}
}

// TestProbeShortProgram: a probe whose input ends before its whole program arrived (the
// connection dropped while it was sent) says so and exits 3 instead of running half a program,
// and its run directory goes with it.
func TestProbeShortProgram(t *testing.T) {
	for _, tool := range []string{"perl", "python3"} {
		t.Run(tool, func(t *testing.T) {
			needTool(t, tool)
			script, program := ProbeScript(5, tool)
			cmd := exec.Command("sh", "-c", script)
			cmd.Stdin = strings.NewReader(program[:len(program)/2])
			out, err := cmd.Output()
			dir, rest, _ := strings.Cut(string(out), "\n")
			if d, ok := strings.CutPrefix(dir, "dir "); ok {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("run directory %s left", d)
					os.RemoveAll(d)
				}
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.HasPrefix(rest, "error short-program:") {
				t.Errorf("half a program: %v, %q; want exit 3 and an error line", err, out)
			}
		})
	}
}
