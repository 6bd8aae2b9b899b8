// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/netcheck"
)

// Scale benchmarks: k3strap's own cost against 100 and 500 SSH endpoints. They are
// not harness hosts: one network namespace (scaleRig.ns) holds 500 addresses on its loopback
// interface, in 10.125.0.0/16 — a range that exists only inside that namespace — and ONE
// OpenSSH server (the harness base image's sshd, with its own host key and authorized_keys,
// in a private mount namespace) listens on all of them. Every "host" is therefore this
// machine: the facts script runs as root on it, and k3strap's cost per host (connect, host
// key check, facts, preflight, events) is what the numbers measure. The hosts look like fresh
// machines, so a no-op apply cannot be measured without K3s on 500 hosts; the second
// benchmark is `apply --dry-run` (connect, facts, plan, preflight, and per host the diff of
// what apply would write), an upper bound of a no-op apply's work on the workstation side.
// Each is reported as a ratio to the floor measured in the same run, interleaved with it: the
// facts floor — one plain `ssh` per host running the same facts script, with k3strap's
// concurrency — plus the probe floor — the path check's commands (start the probe program,
// hand it its probes, read its results, stop it) each run by one plain `ssh` per host, in the
// same sweeps as k3strap's, doing the same probes (scaleRig.probeFloor). Every probe program runs on this machine's cores in both. Peak RSS is
// k3strap's (rusage).

// scaleNS is the scale namespace of harness h: named with the instance's prefix, so that
// harness instances measure side by side and only their own `harness.sh down` removes it.
func scaleNS(h *harness.Harness) string { return h.Prefix() + "-scale" }

// scaleAddr is the address of scale host i (1-based).
func scaleAddr(i int) string { return fmt.Sprintf("10.125.%d.%d", i/250, i%250+1) }

type scaleRig struct {
	ns   string
	dir  string
	key  string
	sshd *exec.Cmd
	bin  built
}

// scaleUp creates the namespace, its n addresses and the sshd; the returned rig's close
// removes them.
func scaleUp(b *testing.B, n int) *scaleRig {
	b.Helper()
	h := harness.Require(b) // the harness lock keeps the machine quiet while measuring
	bin := buildOnce()
	if bin.err != nil {
		b.Fatal(bin.err)
	}
	base := filepath.Join(filepath.Dir(h.KeyPath()), "base")
	if _, err := os.Stat(filepath.Join(base, "usr/sbin/sshd")); err != nil {
		b.Skipf("no sshd in the harness base image: %v", err)
	}
	d := b.TempDir()
	r := &scaleRig{ns: scaleNS(h), dir: d, key: h.KeyPath(), bin: bin}
	pub, err := os.ReadFile(h.KeyPath() + ".pub")
	if err != nil {
		b.Fatal(err)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Contains(passwd, []byte("\nsshd:")) {
		passwd = append(passwd, []byte("sshd:x:64990:65534::/run/sshd:/usr/sbin/nologin\n")...)
	}
	// root's home on the endpoints is an empty directory: the sshd's sessions run root's login
	// shell, and bash started by sshd reads ~/.bashrc — on a development machine that may run
	// pyenv or similar (seconds of CPU per session on a loaded machine), which no real host
	// does and which both k3strap and the floor would pay per command.
	home := filepath.Join(d, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(string(passwd), "\n")
	for i, l := range lines {
		if f := strings.Split(l, ":"); len(f) == 7 && f[0] == "root" {
			f[5] = home
			lines[i] = strings.Join(f, ":")
		}
	}
	passwd = []byte(strings.Join(lines, "\n"))
	var batch strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&batch, "addr add %s/32 dev lo\n", scaleAddr(i))
	}
	files := map[string]string{
		"authorized_keys": string(pub),
		"passwd":          string(passwd),
		"addrs":           batch.String(),
		"sshd_config": fmt.Sprintf(`Port 22
ListenAddress 0.0.0.0
HostKey %[1]s/ssh_host_ed25519_key
PidFile %[1]s/sshd.pid
AuthorizedKeysFile %[1]s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
MaxStartups 4000
MaxSessions 100
LogLevel ERROR
Subsystem sftp %[2]s/usr/lib/openssh/sftp-server
`, d, base),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	setup := fmt.Sprintf(`set -e
ip netns del %[1]s 2>/dev/null || true
ip netns add %[1]s
ip -n %[1]s link set lo up
ip -n %[1]s -batch %[2]s/addrs
ssh-keygen -q -t ed25519 -N '' -f %[2]s/ssh_host_ed25519_key
mkdir -p %[2]s/lib /run/sshd
cp %[3]s/usr/lib/x86_64-linux-gnu/libwrap.so.0* %[2]s/lib/
`, r.ns, d, base)
	if out, err := exec.Command("bash", "-c", setup).CombinedOutput(); err != nil {
		b.Fatalf("scale setup: %v\n%s", err, out)
	}
	r.sshd = exec.Command("ip", "netns", "exec", r.ns, "unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount --bind %[1]s/passwd /etc/passwd && LD_LIBRARY_PATH=%[1]s/lib exec %[2]s/usr/sbin/sshd -D -e -f %[1]s/sshd_config", d, base))
	var sshdLog bytes.Buffer
	r.sshd.Stdout, r.sshd.Stderr = &sshdLog, &sshdLog
	if err := r.sshd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = r.sshd.Process.Signal(syscall.SIGTERM)
		_ = r.sshd.Wait()
		_ = exec.Command("ip", "netns", "del", r.ns).Run()
		if b.Failed() {
			b.Logf("sshd:\n%s", sshdLog.String())
		}
	})
	// Wait for sshd, then record every address's host key (not measured).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := exec.Command("ip", "netns", "exec", r.ns, "bash", "-c", "exec 3<>/dev/tcp/"+scaleAddr(1)+"/22").Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("sshd did not start:\n%s", sshdLog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := r.floor(n, 50, ""); err != nil {
		b.Fatalf("warm-up: %v\n%s", err, sshdLog.String())
	}
	return r
}

// floor runs one plain ssh per host (the first n), conc at a time, each running the facts
// script k3strap runs, and returns the wall time. With cm (a control path prefix) each ssh
// leaves its connection open as a control master, as k3strap keeps its connection for the
// next steps: probeFloor runs over it (and closeMasters ends them).
func (r *scaleRig) floor(n, conc int, cm string) (time.Duration, error) {
	script := facts.Script(facts.ScriptInput{Files: []string{"/etc/rancher/k3s/config.yaml", "/usr/local/bin/k3s"}})
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for i := 1; i <= n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := []string{"netns", "exec", r.ns, "ssh", "-i", r.key,
				"-o", "UserKnownHostsFile=" + filepath.Join(r.dir, "known_hosts"), "-o", "StrictHostKeyChecking=accept-new",
				"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-F", "none"}
			if cm != "" {
				args = append(args, "-o", "ControlMaster=yes", "-o", "ControlPath="+cm+"%h", "-o", "ControlPersist=300")
			}
			cmd := exec.CommandContext(ctx, "ip", append(args, "root@"+scaleAddr(i), "sh", "-c", shellQuote(script))...)
			if out, err := cmd.Output(); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("ssh %s: %v: %s", scaleAddr(i), err, out)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// probeFloor runs the path check's commands (netcheck.ProbeScript and the sweeps after it) on
// each of the first n hosts with plain ssh over the connection the facts floor left open (cm,
// its control path prefix; k3strap too opens a session on the connection it holds), in the
// sweeps k3strap runs them in, over the paths k3strap tests (netcheck.PlanProbes of the rig's cluster: one server, agents, flannel VXLAN; the rig's hosts
// have no default route, so every path targets the inventory address, as in k3strap's run),
// driven by netcheck.RunPaths with k3strap's connect timeout. It returns the wall time and the
// number of probes; a path that is not open is an error (the floor must do the whole work).
func (r *scaleRig) probeFloor(n int, cm string) (time.Duration, int, error) {
	nc := &netcheck.Cluster{Ports: k3s.NodePorts(k3s.NodePortOptions{})}
	var hosts []netcheck.ProbeHost
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("n%03d", i)
		nc.Nodes = append(nc.Nodes, netcheck.Node{Name: name, Server: i == 1, Address: netip.MustParseAddr(scaleAddr(i)), Family: 4})
		addr := scaleAddr(i)
		hosts = append(hosts, netcheck.ProbeHost{Name: name, Exec: func(ctx context.Context, _, script string, stdin io.Reader, args ...string) (string, error) {
			line := "sh -c " + shellQuote(script) + " sh"
			for _, a := range args {
				line += " " + shellQuote(a)
			}
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", r.ns, "ssh", "-i", r.key,
				"-o", "UserKnownHostsFile="+filepath.Join(r.dir, "known_hosts"), "-o", "StrictHostKeyChecking=accept-new",
				"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-F", "none", "-o", "ControlMaster=no", "-o", "ControlPath="+cm+"%h",
				"root@"+addr, line)
			if stdin != nil {
				cmd.Stdin = stdin
			}
			out, err := cmd.Output()
			return string(out), err
		}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	rep := netcheck.RunPaths(ctx, nc, hosts, netcheck.PathOptions{ConnectTimeout: 3200 * time.Millisecond})
	d := time.Since(start)
	if len(rep.Hosts) > 0 {
		return d, len(rep.Results), &floorIncomplete{fmt.Sprintf("probe floor: %d hosts not tested (%v)", len(rep.Hosts), rep.Hosts)}
	}
	if f := rep.Failed(); len(f) > 0 {
		// The rig's paths are all open. At 500 endpoints every node's datagrams to the
		// one server arrive at once and some are lost (k3strap's own check loses some at
		// times too, and such a run is not counted): the floor then waits at most the
		// round's receipt grace (half a second) longer, which the ratio carries. A TCP connect
		// that timed out would cost the whole connect timeout: such a run is not counted.
		for _, r := range f {
			if r.Port.Proto != "udp" {
				return d, len(rep.Results), &floorIncomplete{fmt.Sprintf("probe floor: %d paths failed (%s → %s %s/%d: %s)", len(f), r.From, r.To, r.Port.Proto, r.Port.Port, r.Detail)}
			}
		}
		return d, len(rep.Results), &floorLost{n: len(f)}
	}
	return d, len(rep.Results), nil
}

// floorLost is a probe floor that tested every path but lost the datagrams of n of them.
type floorLost struct{ n int }

func (e *floorLost) Error() string {
	return fmt.Sprintf("probe floor: datagrams lost on %d paths", e.n)
}

// floorIncomplete is a probe floor that did not test every path open: its probes did not all
// start within the path check's ready wait, or a connect timed out on the loaded machine (as
// for a k3strap run that does not, the run is not counted).
type floorIncomplete struct{ msg string }

func (e *floorIncomplete) Error() string { return e.msg }

// closeMasters ends the control masters the facts floor left for the first n hosts (not timed).
func (r *scaleRig) closeMasters(n int, cm string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = exec.Command("ip", "netns", "exec", r.ns, "ssh", "-F", "none", "-o", "ControlPath="+cm+"%h", "-O", "exit", "root@"+scaleAddr(i)).Run()
		}()
	}
	wg.Wait()
}

const scaleInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: scale
spec:
  k3s:
    version: v1.36.3+k3s1
    install: airgap
    airgap:
      amd64:
        binary: {{.Artifacts}}/k3s
        checksums: {{.Artifacts}}/sha256sum-amd64.txt
    config:
      kubelet-arg: [fail-cgroupv1=false]
  ssh:
    user: root
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 20s
  hosts:
{{- range .Addrs}}
    - name: {{.Name}}
      address: {{.Addr}}
      role: {{.Role}}
{{- end}}
`

// inventory writes an inventory of the first n scale hosts (one server, agents) and returns
// its path.
func (r *scaleRig) inventory(b *testing.B, n int) string {
	type host struct{ Name, Addr, Role string }
	d := struct {
		Artifacts, Key, KnownHosts string
		Addrs                      []host
	}{Artifacts: r.bin.artifacts, Key: r.key, KnownHosts: filepath.Join(r.dir, "known_hosts")}
	for i := 1; i <= n; i++ {
		role := "agent"
		if i == 1 {
			role = "server"
		}
		d.Addrs = append(d.Addrs, host{fmt.Sprintf("n%03d", i), scaleAddr(i), role})
	}
	var buf bytes.Buffer
	if err := template.Must(template.New("inv").Parse(scaleInv)).Execute(&buf, d); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(r.dir, fmt.Sprintf("scale-%d.yaml", n))
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// scaleRun is one k3strap invocation inside the namespace.
type scaleRun struct {
	dur      time.Duration
	maxRSSKB int64
	// anon is the largest anonymous memory seen (heap, stacks, the runtime's own), file the
	// file-backed pages (the binary's code and read-only data) resident at that moment; both
	// sampled from /proc every 20 ms, in KiB.
	anon, file int64
	events     int
	bytes      int
	code       int
	stdout     string
}

func (r *scaleRig) k3strap(b *testing.B, args ...string) scaleRun {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", r.ns, r.bin.k3strap}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "HOME="+r.dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Start()
	var anon, file int64
	if err == nil {
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			anon, file = sampleMemory(cmd.Process.Pid, done)
		}()
		err = cmd.Wait()
		close(done)
		<-sampled
	}
	res := scaleRun{dur: time.Since(start), stdout: out.String(), bytes: out.Len(), anon: anon, file: file}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		b.Fatalf("k3strap: %v\n%s", err, errb.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.maxRSSKB = ru.Maxrss
	}
	res.events = strings.Count(res.stdout, "\n")
	if res.code != 0 {
		b.Fatalf("k3strap %s exited %d:\n%s\n%s", strings.Join(args, " "), res.code, tail(res.stdout, 3000), errb.String())
	}
	if !strings.Contains(res.stdout, `"type":"`+string(events.Summary)+`"`) {
		b.Fatalf("no summary event")
	}
	return res
}

// sampleMemory reads /proc/PID/status every 20 ms until done is closed and returns the largest
// RssAnon seen and the RssFile beside it (KiB). `ip netns exec` execs the command in place,
// so pid is k3strap's own once the exec happened (before it, ip's pages are sampled: far below).
func sampleMemory(pid int, done <-chan struct{}) (anon, file int64) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if m, err := procStatusKiB(strconv.Itoa(pid)); err == nil && m["RssAnon"] > anon {
			anon, file = m["RssAnon"], m["RssFile"]
		}
		select {
		case <-done:
			return anon, file
		case <-tick.C:
		}
	}
}

// pathsOutcome is "" when the paths step of a run's JSON events tested every path and all were
// open (the rig's paths are), else its finishing message.
func pathsOutcome(stdout string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.Contains(l, `"phase":"`+string(events.PhasePaths)+`"`) {
			continue
		}
		var e events.Event
		if json.Unmarshal([]byte(l), &e) != nil || e.Type != events.PhaseFinished {
			continue
		}
		if e.Status != events.StatusOK {
			return e.Message
		}
		return ""
	}
	return ""
}

// phaseTime is how long a step took in a run's JSON events (its started and finished
// events); 0 when it did not run.
func phaseTime(stdout string, phase events.Phase) time.Duration {
	var start, end time.Time
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.Contains(l, `"phase":"`+string(phase)+`"`) {
			continue
		}
		var e events.Event
		if json.Unmarshal([]byte(l), &e) != nil || e.Phase != phase {
			continue
		}
		switch e.Type {
		case events.PhaseStarted:
			start = e.Time
		case events.PhaseFinished:
			end = e.Time
		}
	}
	if start.IsZero() || end.IsZero() {
		return 0
	}
	return end.Sub(start)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// BenchmarkScale measures preflight and apply --dry-run against 100 and 500 SSH endpoints,
// each against the floor of the same run (facts floor + probe floor; goal: ≤ 1.1× at 100 and
// 500 hosts, peak RSS ≤ 100 MB at 500; docs/preflight.md "Cost at scale"). With -benchtime Nx
// the N runs alternate k3strap and the floors; x-floor-min and x-floor-max show the spread of
// the per-run ratios.
func BenchmarkScale(b *testing.B) {
	const most = 500
	r := scaleUp(b, most)
	for _, n := range []int{100, most} {
		inv := r.inventory(b, n)
		for _, mode := range []struct {
			name string
			args []string
		}{
			{"preflight", []string{"preflight"}},
			{"dry-run", []string{"apply", "--dry-run"}},
		} {
			b.Run(fmt.Sprintf("hosts=%d/%s", n, mode.name), func(b *testing.B) {
				conc := 0 // k3strap's default
				var floorSum, ourSum, factsSum, probeSum time.Duration
				var rss, anon int64
				ratioMin, ratioMax := 0.0, 0.0
				probes, iter, counted, discarded, floorLostPaths := 0, 0, 0, 0, 0
				var last scaleRun
				var paths time.Duration
				for b.Loop() {
					args := append(append([]string{}, mode.args...), "-f", inv, "--output", "json", "--ssh-config", "none",
						"--ignore-preflight-errors", "all", "--kubeconfig-out", filepath.Join(r.dir, "k"))
					if mode.name == "preflight" {
						args = slicesWithout(args, "--kubeconfig-out", filepath.Join(r.dir, "k"))
					}
					last = r.k3strap(b, args...)
					rss = max(rss, last.maxRSSKB)
					anon = max(anon, last.anon)
					b.Logf("k3strap %.2fs, peak RSS %.1f MB, largest anonymous %.1f MB (file-backed beside it %.1f MB)",
						last.dur.Seconds(), float64(last.maxRSSKB)/1024, float64(last.anon)/1024, float64(last.file)/1024)
					// The comparison holds only when k3strap and the floor each tested every
					// path: on a machine so loaded that the probes do not all start within the
					// step's ready wait, the run is not counted (and said so).
					notCounted := func(why string) {
						discarded++
						b.Logf("run not counted: %s", why)
						if discarded > 3 {
							b.Fatalf("%d runs without a complete path check: the machine is too loaded to measure", discarded)
						}
					}
					if msg := pathsOutcome(last.stdout); msg != "" {
						notCounted("k3strap's path check did not test every path: " + msg)
						continue
					}
					if conc == 0 {
						conc = defaultConcurrency
					}
					iter++
					cm := filepath.Join(r.dir, fmt.Sprintf("c%d-", iter))
					f, err := r.floor(n, conc, cm)
					if err != nil {
						r.closeMasters(n, cm)
						b.Fatal(err)
					}
					var pf time.Duration
					if phaseTime(last.stdout, events.PhasePaths) > 0 {
						masters, _ := filepath.Glob(cm + "*")
						b.Logf("facts floor %.2fs; %d of %d control masters open for the probe floor", f.Seconds(), len(masters), n)
						pf, probes, err = r.probeFloor(n, cm)
					}
					r.closeMasters(n, cm)
					var incomplete *floorIncomplete
					if errors.As(err, &incomplete) {
						notCounted("the floor's path check did not test every path open: " + err.Error())
						continue
					}
					var lost *floorLost
					if errors.As(err, &lost) {
						floorLostPaths += lost.n
						b.Logf("counted: %v (the rig's server receives every node's datagrams at once)", err)
						err = nil
					}
					if err != nil {
						b.Fatal(err)
					}
					counted++
					ourSum += last.dur
					paths += phaseTime(last.stdout, events.PhasePaths)
					factsSum += f
					probeSum += pf
					floorSum += f + pf
					ratio := last.dur.Seconds() / (f + pf).Seconds()
					if ratioMin == 0 || ratio < ratioMin {
						ratioMin = ratio
					}
					ratioMax = max(ratioMax, ratio)
					b.Logf("run: k3strap %.2fs (paths %.2fs), facts floor %.2fs, probe floor %.2fs, %.2f×",
						last.dur.Seconds(), phaseTime(last.stdout, events.PhasePaths).Seconds(), f.Seconds(), pf.Seconds(), ratio)
				}
				if counted == 0 {
					b.Fatal("no run counted")
				}
				nb := float64(counted)
				b.ReportMetric(floorSum.Seconds()*1000/nb, "floor-ms")
				b.ReportMetric(factsSum.Seconds()*1000/nb, "facts-floor-ms")
				b.ReportMetric(probeSum.Seconds()*1000/nb, "probe-floor-ms")
				b.ReportMetric(ratioMin, "x-floor-min")
				b.ReportMetric(ratioMax, "x-floor-max")
				b.ReportMetric(float64(discarded), "runs-not-counted")
				b.ReportMetric(float64(floorLostPaths), "floor-paths-lost")
				b.ReportMetric(ourSum.Seconds()*1000/nb, "k3strap-ms")
				b.ReportMetric(ourSum.Seconds()/floorSum.Seconds(), "x-floor")
				b.ReportMetric(float64(rss)/1024, "peak-RSS-MB")
				b.ReportMetric(float64(anon)/1024, "peak-anon-MB")
				b.ReportMetric(float64(last.events), "events")
				b.ReportMetric(float64(last.bytes)/1024, "output-KB")
				b.ReportMetric(paths.Seconds()*1000/nb, "paths-ms")
				b.Logf("%d hosts %s: k3strap %.2fs, floor %.2fs (facts %.2fs, %d at a time; probes %.2fs, %d paths, in the path check's sweeps), %.2f× (runs %.2f–%.2f×), peak RSS %.1f MB, %d events (%d kB)",
					n, mode.name, ourSum.Seconds()/nb, floorSum.Seconds()/nb, factsSum.Seconds()/nb, conc, probeSum.Seconds()/nb, probes,
					ourSum.Seconds()/floorSum.Seconds(), ratioMin, ratioMax, float64(rss)/1024, last.events, last.bytes/1024)
			})
		}
	}
}

// defaultConcurrency is k3strap's default --concurrency.
const defaultConcurrency = installer.DefaultConcurrency

func slicesWithout(args []string, drop ...string) []string {
	var out []string
	for _, a := range args {
		keep := true
		for _, d := range drop {
			if a == d {
				keep = false
			}
		}
		if keep {
			out = append(out, a)
		}
	}
	return out
}
