// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// End-to-end tests: the real k3strap binary against throw-away Linux hosts (systemd-nspawn with
// systemd as PID 1 and real OpenSSH, each in its own network namespace — e2e/harness), with the
// K3s SIMULATOR (e2e/k3ssim) installed through the airgap path as /usr/local/bin/k3s, because
// the real K3s binary cannot be downloaded here. They need root and skip, saying why, without
// it; .ci/run provides it.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/events"
)

// SimTimeScale shrinks the simulator's real K3s v1.36.3 timings (bring-up ~16 s) for tests.
const SimTimeScale = 0.15

type built struct {
	k3strap   string
	artifacts string
	// standinImages is the stand-in K3s airgap images archive (e2e/cmd/standin-images) the
	// real-K3s lane uploads, so that the real K3s's pods run; standinSeconds is the time taken
	// to build the program and write it.
	standinImages  string
	standinProgram string
	standinSeconds float64
	err            error
}

// standinImagesArchive is the file name of the stand-in images archive; K3s imports files in
// agent/images/ by extension (.tar.zst: zstd), whatever their name.
const standinImagesArchive = "k3strap-standin-images-amd64.tar.zst"

var buildOnce = sync.OnceValue(func() built {
	dir, err := os.MkdirTemp("", "k3strap-e2e-bin-")
	if err != nil {
		return built{err: err}
	}
	root := repoRoot()
	b := built{k3strap: filepath.Join(dir, "k3strap"), artifacts: filepath.Join(dir, "artifacts"),
		standinImages: filepath.Join(dir, "standin", standinImagesArchive), standinProgram: filepath.Join(dir, "standin", "standin-images")}
	standin := b.standinProgram
	steps := [][]string{
		{"go", "build", "-o", b.k3strap, "./cmd/k3strap"},
		{"go", "build", "-ldflags", "-X main.version=v1.36.3+k3s1", "-o", filepath.Join(b.artifacts, "k3s"), "./e2e/k3ssim"},
		{"go", "build", "-ldflags", "-X main.version=v1.36.4+k3s1", "-o", filepath.Join(b.artifacts, "next", "k3s"), "./e2e/k3ssim"},
		{"go", "run", "./e2e/cmd/mkimages", filepath.Join(b.artifacts, "k3s-airgap-images-amd64.tar.zst")},
		// The stand-in images: a static program (CGO_ENABLED=0 below) that writes itself into
		// the archive; -trimpath and no symbol table keep the archive the same from build to build.
		{"go", "build", "-trimpath", "-ldflags", "-s -w", "-o", standin, "./e2e/cmd/standin-images"},
		{standin, "archive", b.standinImages},
	}
	for i, s := range steps {
		start := time.Now()
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return built{err: fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)}
		}
		if i >= len(steps)-2 {
			b.standinSeconds += time.Since(start).Seconds()
		}
	}
	for _, d := range []string{b.artifacts, filepath.Join(b.artifacts, "next")} {
		cmd := exec.Command("sh", "-c", "sha256sum k3s > sha256sum-amd64.txt; [ -f k3s-airgap-images-amd64.tar.zst ] && sha256sum k3s-airgap-images-amd64.tar.zst >> sha256sum-amd64.txt; true")
		cmd.Dir = d
		if out, err := cmd.CombinedOutput(); err != nil {
			return built{err: fmt.Errorf("checksums: %v\n%s", err, out)}
		}
	}
	return b
})

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// testCluster is a set of clean throw-away hosts and an inventory for them.
type testCluster struct {
	t     testing.TB
	h     *harness.Harness
	hosts []harness.Host
	bin   built
	dir   string
	inv   string
	// real is the real K3s under test (the real-K3s lane), nil for the simulator.
	real *realK3s
}

// clusterOpts shapes newClusterOpts.
type clusterOpts struct {
	// topology is the harness topology (flat when empty).
	topology string
	// real runs the real K3s on the hosts instead of the simulator (no simulator settings).
	real *realK3s
	// kind is the harness host kind (harness.KindBookworm when empty).
	kind string
}

// newCluster gives the test n clean hosts (reset to their first boot), with the simulator's
// time scale set, and a temporary directory for the inventory, known_hosts and kubeconfig.
func newCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return newClusterTopology(t, n, harness.TopologyFlat)
}

// newClusterTopology is newCluster with a harness topology (flat, or bastion: the hosts only
// reachable through the jump host h0).
func newClusterTopology(t testing.TB, n int, topology string) *testCluster {
	t.Helper()
	return newClusterOpts(t, n, clusterOpts{topology: topology})
}

// newClusterOpts gives the test n clean hosts (reset to their first boot) shaped by o.
func newClusterOpts(t testing.TB, n int, o clusterOpts) *testCluster {
	t.Helper()
	topology := o.topology
	if topology == "" {
		topology = harness.TopologyFlat
	}
	h := harness.Require(t)
	b := buildOnce()
	if b.err != nil {
		t.Fatalf("building binaries: %v", b.err)
	}
	if o.kind != "" {
		bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Minute)
		err := h.Base(bctx, o.kind)
		bcancel()
		if err != nil {
			t.Fatalf("harness base %s: %v", o.kind, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hosts, err := h.Up(ctx, n, harness.Options{Topology: topology, Kind: o.kind})
	if err != nil {
		t.Fatalf("harness up %d: %v", n, err)
	}
	hosts = hosts[:n]
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = h.Reset(ctx, host.Index); errs[i] == nil && o.real == nil {
				errs[i] = h.WriteFile(ctx, host.Index, "/etc/k3ssim/sim.yaml", fmt.Appendf(nil, "timeScale: %v\n", SimTimeScale), 0o644)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("resetting host %d: %v", hosts[i].Index, err)
		}
	}
	return &testCluster{t: t, h: h, hosts: hosts, bin: b, dir: t.TempDir(), real: o.real}
}

// inventoryData fills inventory templates.
type inventoryData struct {
	Hosts      []harness.Host
	Key        string
	KnownHosts string
	Artifacts  string
	Extra      map[string]any
	// Real is the real K3s of the real-K3s lane (zero for the simulator).
	Real realK3s
}

// writeInventory renders tmpl (text/template over inventoryData) to the test's inventory.
func (c *testCluster) writeInventory(tmpl string, extra map[string]any) string {
	c.t.Helper()
	tp := template.Must(template.Must(template.New("inv").Funcs(template.FuncMap{
		"inc": func(i int) int { return i + 1 },
		"add": func(a, b int) int { return a + b },
		"sub": func(a, b int) int { return a - b + 1 },
	}).Parse(inventoryParts + realParts)).Parse(tmpl))
	var buf bytes.Buffer
	d := inventoryData{Hosts: c.hosts, Key: c.h.KeyPath(), KnownHosts: filepath.Join(c.dir, "known_hosts"), Artifacts: c.bin.artifacts, Extra: extra}
	if c.real != nil {
		d.Real = *c.real
	}
	if err := tp.Execute(&buf, d); err != nil {
		c.t.Fatal(err)
	}
	c.inv = filepath.Join(c.dir, "cluster.yaml")
	if err := os.WriteFile(c.inv, buf.Bytes(), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return c.inv
}

// run is one k3strap invocation's outcome.
type run struct {
	code     int
	stdout   string
	stderr   string
	events   []events.Event
	duration time.Duration
}

// k3strap runs the real binary with args (-f and --output json added unless given) and
// decodes its JSON events.
func (c *testCluster) k3strap(timeout time.Duration, args ...string) run {
	c.t.Helper()
	joined := " " + strings.Join(args, " ")
	if !strings.Contains(joined, " -f ") && c.inv != "" {
		args = append(args, "-f", c.inv)
	}
	if !strings.Contains(joined, "--output") && !strings.Contains(joined, " -o ") {
		args = append(args, "--output", "json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin.k3strap, args...)
	cmd.Dir = c.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errb.String(), duration: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("k3strap %v: %v", args, err)
	}
	if ctx.Err() != nil {
		c.t.Fatalf("k3strap %v did not finish within %s\nstdout:\n%s\nstderr:\n%s", args, timeout, r.stdout, r.stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			c.t.Fatalf("bad JSON event %q: %v", line, err)
		}
		r.events = append(r.events, e)
	}
	c.t.Logf("k3strap %s: exit %d in %s", strings.Join(args, " "), r.code, r.duration.Round(time.Millisecond))
	return r
}

// dump shows the run's output when the test fails.
func (r run) dump(t *testing.T) {
	t.Helper()
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

func (r run) ofType(ty events.Type) []events.Event {
	var out []events.Event
	for _, e := range r.events {
		if e.Type == ty {
			out = append(out, e)
		}
	}
	return out
}

func (r run) summary(t *testing.T) *events.SummaryInfo { return r.summaryB(t) }

func (r run) summaryB(t testing.TB) *events.SummaryInfo {
	t.Helper()
	s := r.ofType(events.Summary)
	if len(s) != 1 {
		t.Fatalf("want one summary event, got %d", len(s))
	}
	return s[0].Summary
}

// exec runs a command inside host i (not over SSH) and returns its output.
func (c *testCluster) exec(i int, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.h.Exec(ctx, c.hosts[i].Index, args...)
	if err != nil {
		c.t.Fatalf("exec on %s %v: %v\n%s", c.hosts[i].Name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// inventoryParts are pieces the tests' inventories share: {{template "k3s-airgap" .}} is the
// K3s release and airgap artifacts under spec.k3s — the simulator built for the test run
// (Extra.version and Extra.artifacts pick another build, e.g. the next version for upgrades);
// {{template "ssh-root" .}} is spec.ssh for root with the harness key and the test's
// known_hosts.
const inventoryParts = `{{define "k3s-airgap"}}    version: {{or .Extra.version "v1.36.3+k3s1"}}
    install: airgap
    airgap:
      amd64:
        binary: {{or .Extra.artifacts .Artifacts}}/k3s
        checksums: {{or .Extra.artifacts .Artifacts}}/sha256sum-amd64.txt
{{- if not .Extra.artifacts}}
        images: {{.Artifacts}}/k3s-airgap-images-amd64.tar.zst
{{- end}}{{end}}{{define "ssh-root"}}  ssh:
    user: root
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 3s{{end}}`

// singleServer is the inventory of one airgap server with the simulator.
const singleServer = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{- range .Extra.kubeletArgs}}
        - {{.}}
{{- end}}
{{- if .Extra.config}}
{{.Extra.config}}
{{- end}}
  ssh:
    user: {{or .Extra.user "root"}}
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 3s
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
`

// asyncRun is a k3strap invocation running in the background whose JSON events can be
// watched as they come.
type asyncRun struct {
	cmd    *exec.Cmd
	events chan events.Event
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	start  time.Time
	cancel context.CancelFunc
}

// start runs k3strap with args (-f and --output json added) in the background.
func (c *testCluster) start(timeout time.Duration, args ...string) *asyncRun {
	c.t.Helper()
	args = append(args, "-f", c.inv, "--output", "json")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a := &asyncRun{events: make(chan events.Event, 4096), done: make(chan struct{}), cancel: cancel}
	a.cmd = exec.CommandContext(ctx, c.bin.k3strap, args...)
	a.cmd.Dir = c.dir
	a.cmd.Stderr = &a.errb
	pipe, err := a.cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	a.start = time.Now()
	if err := a.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		defer close(a.events)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			a.out.WriteString(sc.Text() + "\n")
			var e events.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				a.events <- e
			}
		}
	}()
	return a
}

// waitFor returns the first event matching match, or fails after timeout.
func (a *asyncRun) waitFor(t testing.TB, timeout time.Duration, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-a.events:
			if !ok {
				t.Fatalf("k3strap ended before %s\nstdout:\n%s\nstderr:\n%s", what, a.out.String(), a.errb.String())
			}
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within %s", what, timeout)
		}
	}
}

// wait drains the remaining events and returns the finished run.
func (a *asyncRun) wait(t testing.TB) run {
	t.Helper()
	defer a.cancel()
	var rest []events.Event
	for e := range a.events {
		rest = append(rest, e)
	}
	err := a.cmd.Wait()
	r := run{stdout: a.out.String(), stderr: a.errb.String(), duration: time.Since(a.start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("k3strap: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e events.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			r.events = append(r.events, e)
		}
	}
	_ = rest
	return r
}
