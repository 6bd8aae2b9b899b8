// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/app"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// fixtures is the real K3s v1.36.3 captures in the repository, relative to this package (go
// test runs in the package directory).
const fixtures = "../../testdata/real-k3s-v1.36.3/"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtures + name)
	if err != nil {
		t.Fatalf("real K3s fixture: %v", err)
	}
	return b
}

// logSink records every log line with its arrival time.
type logSink struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	at   time.Time
	text string
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, l := range strings.Split(strings.TrimSuffix(string(p), "\n"), "\n") {
		s.lines = append(s.lines, logLine{now, l})
	}
	return len(p), nil
}

func (s *logSink) snapshot() []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logLine(nil), s.lines...)
}

func (s *logSink) String() string {
	var b strings.Builder
	for _, l := range s.snapshot() {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// waitFor polls the log until a line contains substr.
func (s *logSink) waitFor(t *testing.T, substr string, timeout time.Duration) logLine {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range s.snapshot() {
			if strings.Contains(l.text, substr) {
				return l
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line containing %q within %v; log:\n%s", substr, timeout, s)
	return logLine{}
}

// sim is one in-process simulator instance (server or agent) with its own root.
type sim struct {
	t        *testing.T
	root     paths.Root
	port     int
	hostname string
	logs     *logSink
	start    time.Time
	cancel   context.CancelFunc
	done     chan int
	mu       sync.Mutex
	notified []string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newRoot creates a root with the given files (logical path -> content).
func newRoot(t *testing.T, files map[string]string) paths.Root {
	t.Helper()
	root := paths.Root(t.TempDir())
	for p, c := range files {
		writeFile(t, root.Path(p), c)
	}
	return root
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startSim runs `k3s <role> args...` in-process. Servers get --https-listen-port (a free
// port unless args name one), --bind-address 127.0.0.1 and --node-ip 127.0.0.1 appended;
// agents only --node-ip.
func startSim(t *testing.T, role string, root paths.Root, hostname string, args []string, env map[string]string) *sim {
	t.Helper()
	s := &sim{t: t, root: root, hostname: hostname, logs: &logSink{}, done: make(chan int, 1)}
	full := append([]string{"k3s", role}, args...)
	if role == "server" {
		s.port = freePort(t)
		for i, a := range args { // a given port (a server restarted on its port) is kept
			if a == "--https-listen-port" && i+1 < len(args) {
				s.port, _ = strconv.Atoi(args[i+1])
			}
		}
		full = append(full, "--https-listen-port", strconv.Itoa(s.port), "--bind-address", "127.0.0.1")
	}
	full = append(full, "--node-ip", "127.0.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.start = time.Now()
	go func() {
		s.done <- app.Main(ctx, app.Options{
			Args:     full,
			Getenv:   func(k string) string { return env[k] },
			Root:     root,
			Stderr:   s.logs,
			Stdout:   io.Discard,
			Version:  "v1.36.3+k3s1",
			Hostname: hostname,
			Notify: func(st string) {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.notified = append(s.notified, st)
			},
		})
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop cancels the run and returns its exit code (-1 if it had already been collected).
func (s *sim) stop() int {
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(15 * time.Second):
		s.t.Errorf("simulator did not stop within 15s")
		return -1
	}
}

// exitCode waits up to timeout for the run to end by itself.
func (s *sim) exitCode(timeout time.Duration) (int, bool) {
	select {
	case code := <-s.done:
		s.done <- code
		return code, true
	case <-time.After(timeout):
		return 0, false
	}
}

func (s *sim) notifications() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notified...)
}

func (s *sim) kubeconfig() string { return s.root.Path(paths.DefaultKubeconfig) }

func (s *sim) url() string { return "https://127.0.0.1:" + strconv.Itoa(s.port) }

// waitReadyz polls /readyz until it answers ok and returns when that was (since start).
func (s *sim) waitReadyz(timeout time.Duration) time.Duration {
	s.t.Helper()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := c.Get(s.url() + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) == "ok" {
				return time.Since(s.start)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	s.t.Fatalf("/readyz not ok within %v; log:\n%s", timeout, s.logs)
	return 0
}

func (s *sim) clientset() *kubernetes.Clientset {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig())
		if err == nil {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				s.t.Fatal(err)
			}
			return cs
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kubeconfig %s: %v", s.kubeconfig(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kubectl runs `k3s kubectl args...` in-process with KUBECONFIG pointing at this server.
func (s *sim) kubectl(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	env := map[string]string{"KUBECONFIG": s.kubeconfig()}
	code = app.Main(context.Background(), app.Options{
		Args: append([]string{"k3s", "kubectl"}, args...), Getenv: func(k string) string { return env[k] },
		Root: s.root, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Version: "v1.36.3+k3s1",
	})
	return out.String(), errb.String(), code
}

// eventually polls cond until it holds; describe (optional) adds context to the failure.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	extra := ""
	for _, d := range describe {
		extra += "\n" + d()
	}
	t.Fatalf("timed out after %v waiting for %s%s", timeout, what, extra)
}

// --- milestones (timeline-*.txt) ---

// obs is one observation: a node event, /readyz ok, or subnet.env appearing.
type obs struct {
	at                  float64 // seconds after start
	what                string  // "node", "readyz", "subnet"
	taints              []string
	podCIDR, providerID string
	ready               bool
}

var timelineRE = regexp.MustCompile(`^\S+ \+([0-9.]+)s (.*)$`)

// parseTimeline reads a fixture timeline (one event per line).
func parseTimeline(t *testing.T, data []byte) []obs {
	t.Helper()
	var out []obs
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		m := timelineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[1], 64)
		rest := m[2]
		switch {
		case strings.HasPrefix(rest, "apiserver ready"):
			out = append(out, obs{at: at, what: "readyz"})
		case strings.HasPrefix(rest, "subnet.env appeared"):
			out = append(out, obs{at: at, what: "subnet"})
		case strings.HasPrefix(rest, "ADDED"), strings.HasPrefix(rest, "MODIFIED"):
			o := obs{at: at, what: "node"}
			if i := strings.Index(rest, "taints=["); i >= 0 {
				inner := rest[i+len("taints=["):]
				inner = inner[:strings.Index(inner, "]")]
				for _, x := range strings.Split(inner, ",") {
					if x = strings.Trim(strings.TrimSpace(x), "'"); x != "" {
						o.taints = append(o.taints, x)
					}
				}
			}
			field := func(name string) string {
				i := strings.Index(rest, name+"=")
				if i < 0 {
					return ""
				}
				v := strings.Fields(rest[i+len(name)+1:])[0]
				if v == "None" {
					return ""
				}
				return v
			}
			o.podCIDR, o.providerID = field("podCIDR"), field("providerID")
			o.ready = strings.Contains(rest, "Ready=['True']")
			out = append(out, o)
		}
	}
	return out
}

func nodeObs(at float64, n *corev1.Node) obs {
	o := obs{at: at, what: "node", podCIDR: n.Spec.PodCIDR, providerID: n.Spec.ProviderID}
	for _, tt := range n.Spec.Taints {
		o.taints = append(o.taints, tt.Key+":"+string(tt.Effect))
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			o.ready = c.Status == corev1.ConditionTrue
		}
	}
	return o
}

func hasTaintKey(taints []string, key string) bool {
	for _, t := range taints {
		if strings.HasPrefix(t, key+":") {
			return true
		}
	}
	return false
}

// milestones reduces observations to groups of milestones in the order they happened;
// milestones reached by the same node event form one group.
func milestones(events []obs) [][]string {
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	seen := map[string]bool{}
	var groups [][]string
	var prev *obs
	for i := range events {
		e := events[i]
		var g []string
		mark := func(m string, cond bool) {
			if cond && !seen[m] {
				seen[m] = true
				g = append(g, m)
			}
		}
		switch e.what {
		case "readyz":
			mark("readyz", true)
		case "subnet":
			mark("subnet.env", true)
		case "node":
			mark("registered", true)
			mark("ready", e.ready)
			mark("uninitialized-taint-gone", prev != nil && hasTaintKey(prev.taints, "node.cloudprovider.kubernetes.io/uninitialized") &&
				!hasTaintKey(e.taints, "node.cloudprovider.kubernetes.io/uninitialized"))
			mark("providerID", e.providerID != "")
			mark("podCIDR", e.podCIDR != "")
			mark("not-ready-taint-gone", prev != nil && hasTaintKey(prev.taints, "node.kubernetes.io/not-ready") &&
				!hasTaintKey(e.taints, "node.kubernetes.io/not-ready"))
			prev = &events[i]
		}
		if len(g) > 0 {
			sort.Strings(g)
			groups = append(groups, g)
		}
	}
	return groups
}

// --- log lines (log-lines-*.txt) ---

var klogRE = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+ [^\]]+\] (.*)$`)
var logrusRE = regexp.MustCompile(`^time="[^"]+" (level=.*)$`)

// normalizeLine drops the timestamp/pid/file prefix and replaces host-specific values.
func normalizeLine(l string, repl *strings.Replacer) string {
	if m := logrusRE.FindStringSubmatch(l); m != nil {
		l = m[1]
	} else if m := klogRE.FindStringSubmatch(l); m != nil {
		l = "klog " + m[1]
	}
	return repl.Replace(l)
}

// prefixOnly are fixture lines whose tail legitimately differs (random MAC, config hash,
// Go version).
var prefixOnly = []string{"klog List of node(", `level=info msg="Starting network policy controller version`}

// fixtureClock is the time of day (seconds) a fixture line was written at: klog's
// microseconds, logrus's whole seconds; ok is false for a line with neither.
func fixtureClock(l string) (float64, bool) {
	var h, m int
	var sec float64
	if len(l) > 6 && strings.ContainsRune("IWEF", rune(l[0])) {
		if _, err := fmt.Sscanf(l[6:], "%d:%d:%f", &h, &m, &sec); err == nil {
			return float64(h*3600+m*60) + sec, true
		}
	}
	if i := strings.Index(l, "T"); strings.HasPrefix(l, `time="`) && i > 0 {
		if _, err := fmt.Sscanf(l[i+1:], "%d:%d:%f", &h, &m, &sec); err == nil {
			return float64(h*3600+m*60) + sec, true
		}
	}
	return 0, false
}

// checkLogLines verifies every fixture line appears in the simulator's log, in the fixture's
// order; lines arriving within 50 ms of each other (1 s of real K3s time at scale 0.05)
// may swap, as lines of different K3s goroutines can. Lines the real binary wrote within the
// same second (logrus's resolution) come from goroutines racing there too; the simulator
// drives some of them by API round trips, which a loaded machine (the race detector, other
// packages' tests) stretches, so they may swap by up to 250 ms.
func checkLogLines(t *testing.T, fixtureLines []byte, got []logLine, repl *strings.Replacer, skip func(string) bool) {
	t.Helper()
	norm := make([]string, len(got))
	for i, l := range got {
		norm[i] = normalizeLine(l.text, strings.NewReplacer())
	}
	matches := func(want, have string) bool {
		for _, p := range prefixOnly {
			if strings.HasPrefix(want, p) {
				cut := strings.Index(want, ": map")
				if cut < 0 {
					cut = len(p)
				}
				return strings.HasPrefix(have, want[:cut])
			}
		}
		return want == have
	}
	last := -1
	var lastClock float64
	lastTimed := false
	sc := bufio.NewScanner(bytes.NewReader(fixtureLines))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seenWant := map[string]bool{}
	for sc.Scan() {
		want := normalizeLine(sc.Text(), repl)
		if skip != nil && skip(want) || seenWant[want] {
			continue
		}
		seenWant[want] = true
		clock, timed := fixtureClock(sc.Text())
		found := -1
		for i := range norm {
			if matches(want, norm[i]) {
				found = i
				if i > last {
					break
				}
			}
		}
		if found < 0 {
			t.Errorf("fixture log line missing from the simulator's log:\n  %s", want)
			continue
		}
		swap := 50 * time.Millisecond
		if timed && lastTimed && clock-lastClock < 1 {
			swap = 250 * time.Millisecond
		}
		if last >= 0 && found < last && got[last].at.Sub(got[found].at) > swap {
			t.Errorf("fixture log line out of order:\n  %s\nappears %v before\n  %s", norm[found], got[last].at.Sub(got[found].at), norm[last])
		}
		if found > last {
			last, lastClock, lastTimed = found, clock, timed
		}
	}
}

func fixtureReplacer(port int) *strings.Replacer {
	return strings.NewReplacer("10.250.0.2", "127.0.0.1", "127.0.0.1:6443", fmt.Sprintf("127.0.0.1:%d", port))
}
