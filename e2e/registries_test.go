// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// registriesInv: one server and two agents, airgap; spec.registries with its password in a 0600
// file, a2 with registries of its own (a site mirror, password from the environment), and a
// k3s-selinux RPM for el9 hosts.
const registriesInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: registries
spec:
  k3s:
{{template "k3s-airgap" .}}
    selinuxRPMs:
      el9: {{.Extra.rpm}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
  registries:
    mirrors:
      docker.io:
        endpoint: ["{{.Extra.specMirror}}"]
    configs:
      central.e2e:5000:
        auth:
          username: puller
          passwordFile: {{.Extra.passwordFile}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
    - name: a2
      address: {{(index .Hosts 2).Address}}
      role: agent
      registries:
        mirrors:
          docker.io:
            endpoint: ["{{.Extra.siteMirror}}"]
        configs:
          site2.e2e:5000:
            auth:
              username: site2
              passwordEnv: K3STRAP_E2E_SITE_PASSWORD
`

// Stand-ins on a1, which plays an SELinux-enforcing Rocky Linux 9 host without the k3s-selinux
// policy (the harness hosts are Debian 12 and their kernel has no SELinux).
const (
	standinState = "/var/lib/k3strap-e2e"
	dnfLog       = standinState + "/dnf.log"
	osReleaseEL9 = `# e2e stand-in: this Debian 12 host claims Rocky Linux 9 so that k3strap picks the el9 k3s-selinux RPM
NAME="Rocky Linux"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PRETTY_NAME="Rocky Linux 9.4 (e2e stand-in on Debian 12)"
`
	getenforceStandin = "#!/bin/sh\necho Enforcing # e2e stand-in\n"
	// dnfStandin records each call: its arguments, the sha256 of the file it was asked to
	// install (the last argument) and the K3s agent's state at that moment; then it marks
	// k3s-selinux installed for the rpm stand-in.
	dnfStandin = `#!/bin/sh
# e2e stand-in for dnf (not dnf): records the call and "installs" k3s-selinux for the rpm stand-in.
mkdir -p ` + standinState + `
last=
for a in "$@"; do last=$a; done
{
  echo "call"
  for a in "$@"; do echo "arg $a"; done
  echo "sha256 $(sha256sum "$last" | cut -d' ' -f1)"
  echo "k3s-agent $(systemctl show -p ActiveState --value k3s-agent.service) $(systemctl show -p ExecMainStartTimestampMonotonic --value k3s-agent.service)"
} >> ` + dnfLog + `
touch ` + standinState + `/k3s-selinux-installed
echo "Installed: k3s-selinux (e2e stand-in)"
`
	// rpmStandin answers rpm -q k3s-selinux only after the dnf stand-in ran.
	rpmStandin = `#!/bin/sh
# e2e stand-in for rpm (not rpm): knows k3s-selinux once the dnf stand-in "installed" it.
if [ "$1" = -q ] && [ "$2" = k3s-selinux ] && [ -f ` + standinState + `/k3s-selinux-installed ]; then
  echo k3s-selinux-1.6-1.el9.noarch
  exit 0
fi
echo "package $2 is not installed"
exit 1
`
)

// svcState is one host's K3s service as systemd reports it, plus its registries.yaml.
type svcState struct {
	mainPID, startMono, nRestarts, invocation string
	registriesSHA                             string
	// cursor is the journal position when the state was read: starts after it are counted.
	cursor string
}

func (c *testCluster) svcState(t *testing.T, i int) svcState {
	t.Helper()
	svc := map[bool]string{true: "k3s", false: "k3s-agent"}[i == 0]
	out := c.exec(i, "systemctl", "show", "-p", "MainPID", "-p", "ExecMainStartTimestampMonotonic", "-p", "NRestarts", "-p", "InvocationID", svc+".service")
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, "=")
		kv[k] = v
	}
	s := svcState{mainPID: kv["MainPID"], startMono: kv["ExecMainStartTimestampMonotonic"], nRestarts: kv["NRestarts"], invocation: kv["InvocationID"]}
	s.registriesSHA = strings.Fields(c.exec(i, "sha256sum", "/etc/rancher/k3s/registries.yaml"))[0]
	s.cursor = strings.TrimPrefix(c.exec(i, "sh", "-c", "journalctl -n 1 -o export | grep '^__CURSOR='"), "__CURSOR=")
	return s
}

// startsSince counts the (re)starts of host i's K3s service recorded in its journal after
// cursor: systemd's "unit started" messages (MESSAGE_ID SD_MESSAGE_UNIT_STARTED, UNIT the
// service). The entries are filtered here, not by journalctl: systemd 252's journalctl returns
// nothing for --after-cursor together with field matches.
func (c *testCluster) startsSince(t *testing.T, i int, cursor string) int {
	t.Helper()
	svc := map[bool]string{true: "k3s", false: "k3s-agent"}[i == 0]
	out := c.exec(i, "sh", "-c", `journalctl -q -o json --after-cursor="$1" | grep -F '"MESSAGE_ID":"39f53479d3a045ac8e11786248231fbf"' | grep -cF "\"UNIT\":\"$2.service\"" || true`, "sh", cursor, svc)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("counting starts on %s: %q", c.hosts[i].Name, out)
	}
	return n
}

// psSampler reads the process lists of the hosts (ps -eww -o args, through the harness, not
// SSH; names[i] for host i) and of this machine every interval, and records every command
// line holding a secret.
type psSampler struct {
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	n     map[string]int // samples per host ("local" for this machine)
	fails int
	leaks []string
}

func (c *testCluster) sampleProcesses(names, secrets []string, interval time.Duration) *psSampler {
	s := &psSampler{stop: make(chan struct{}), done: make(chan struct{}), n: map[string]int{}}
	// A test that stops early does not leave the sampler running on the hosts.
	c.t.Cleanup(s.halt)
	check := func(where, list string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n[where]++
		for _, l := range strings.Split(list, "\n") {
			for _, sec := range secrets {
				if strings.Contains(l, sec) {
					s.leaks = append(s.leaks, where+": "+strings.ReplaceAll(l, sec, "<SECRET>"))
				}
			}
		}
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			var wg sync.WaitGroup
			for i, h := range c.hosts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					out, err := c.h.Exec(ctx, h.Index, "ps", "-eww", "-o", "args=")
					if err != nil {
						s.mu.Lock()
						s.fails++
						s.mu.Unlock()
						return
					}
					check(names[i], string(out))
				}()
			}
			check("local", localCmdlines())
			wg.Wait()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// localCmdlines is this machine's process list (every /proc/PID/cmdline, one per line).
func localCmdlines() string {
	ents, _ := os.ReadDir("/proc")
	var b strings.Builder
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			b.WriteString(strings.ReplaceAll(string(cl), "\x00", " "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// halt stops the sampler and waits for its last sample (idempotent).
func (s *psSampler) halt() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// finish stops the sampler and fails t if a secret was seen or a host was never sampled.
func (s *psSampler) finish(t *testing.T, what string, hosts []string) {
	t.Helper()
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("%s: process lists sampled %v (%d failed reads)", what, s.n, s.fails)
	for _, h := range append(hosts, "local") {
		if s.n[h] < 3 {
			t.Errorf("%s: only %d process-list samples of %s", what, s.n[h], h)
		}
	}
	for _, l := range s.leaks {
		t.Errorf("%s: a registry password is in a process list: %s", what, l)
	}
}

func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestRegistriesLive on 1 server and 2 agents, airgap: spec.registries (password
// from a 0600 file) on cp1 and a1, a2 with registries of its own (password from the
// environment); a1 an SELinux-enforcing "Rocky 9" host without the policy, for which k3strap
// uploads the inventory's el9 k3s-selinux RPM and installs it (dnf stand-in) before K3s starts.
// Then (a) a2's own mirror changes: only a2's file changes and only a2's K3s restarts, once;
// (b) the spec's mirror changes: cp1 and a1 restart once each, a2 not. The install script runs
// in neither and the RPM is not installed again. Throughout, the passwords appear in no process
// list (sampled every 150 ms on every host and this machine), in no output, event or log file.
func TestRegistriesLive(t *testing.T) {
	c := newCluster(t, 3)
	names := []string{"cp1", "a1", "a2"}
	specPW, sitePW := randomSecret(t, "e2e-central-s3cret-"), randomSecret(t, "e2e-site-s3cret-")
	secrets := []string{specPW, sitePW}
	// hide keeps the passwords out of the test's own log.
	hide := strings.NewReplacer(specPW, "<spec password>", sitePW, "<site password>").Replace
	pwFile := filepath.Join(c.dir, "registry-password")
	if err := os.WriteFile(pwFile, []byte(specPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("K3STRAP_E2E_SITE_PASSWORD", sitePW)
	rpm := filepath.Join(c.dir, "k3s-selinux-1.6-1.el9.noarch.rpm")
	rpmBody := []byte("e2e stand-in: not an RPM; the dnf stand-in records its checksum\n" + randomSecret(t, "") + "\n")
	if err := os.WriteFile(rpm, rpmBody, 0o644); err != nil {
		t.Fatal(err)
	}
	rpmSum := sha256.Sum256(rpmBody)
	rpmSHA := hex.EncodeToString(rpmSum[:])
	extra := map[string]any{"rpm": rpm, "passwordFile": pwFile, "specMirror": "https://central.e2e:5000", "siteMirror": "https://site2.e2e:5000"}
	c.writeInventory(registriesInv, extra)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.exec(1, "rm", "-f", "/etc/os-release")
	for p, f := range map[string]struct {
		body string
		mode os.FileMode
	}{
		"/etc/os-release":            {osReleaseEL9, 0o644},
		"/usr/local/sbin/getenforce": {getenforceStandin, 0o755},
		"/usr/local/bin/dnf":         {dnfStandin, 0o755},
		"/usr/local/bin/rpm":         {rpmStandin, 0o755},
	} {
		if err := c.h.WriteFile(ctx, c.hosts[1].Index, p, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	// The sampler sees what runs: a canary on a command line for 1 s on a2 is caught (this
	// machine's harness command carries it too, so "local" catches it as well).
	canary := randomSecret(t, "e2e-canary-")
	ps := c.sampleProcesses(names, []string{canary}, 150*time.Millisecond)
	if _, err := c.h.Exec(ctx, c.hosts[2].Index, "sh", "-c", "sleep 1; : "+canary); err != nil {
		t.Fatal(err)
	}
	ps.halt()
	if !slices.ContainsFunc(ps.leaks, func(l string) bool { return strings.HasPrefix(l, "a2: ") }) {
		t.Fatalf("the process-list sampler missed a canary on a2's command line for 1 s (%d samples)", ps.n["a2"])
	}

	logFile := filepath.Join(c.dir, "k3strap.log")
	outputs := map[string]string{} // what k3strap printed or logged, by run
	apply := func(what string) run {
		t.Helper()
		ps := c.sampleProcesses(names, secrets, 150*time.Millisecond)
		r := c.k3strap(6*time.Minute, "apply", "--log-file", logFile)
		ps.finish(t, what, names)
		if r.code != 0 {
			r.dump(t)
			t.Fatalf("%s: apply exited %d", what, r.code)
		}
		outputs[what+" stdout"], outputs[what+" stderr"] = r.stdout, r.stderr
		for _, e := range r.events {
			for _, s := range secrets {
				if b, _ := json.Marshal(e); strings.Contains(string(b), s) {
					t.Errorf("%s: a registry password is in a %s event of %s", what, e.Type, e.Host)
				}
			}
		}
		return r
	}
	// hostEvents returns the events of host with step.
	hostEvents := func(r run, host, step string) []events.Event {
		var out []events.Event
		for _, e := range r.events {
			if e.Host == host && e.Step == step {
				out = append(out, e)
			}
		}
		return out
	}
	noInstall := func(what string, r run) {
		t.Helper()
		for _, n := range names {
			if ev := hostEvents(r, n, "install"); len(ev) > 0 {
				t.Errorf("%s: the install script ran on %s: %s", what, n, ev[0].Message)
			}
		}
		if calls := strings.Count(c.exec(1, "sh", "-c", "cat "+dnfLog+" 2>/dev/null || true"), "call\n"); calls != 1 {
			t.Errorf("%s: dnf was called %d times in all, want once (the first apply)", what, calls)
		}
	}

	// --- first apply: every host, a1 gets the RPM installed before K3s starts.
	r := apply("first apply")
	firstDur := r.duration
	warned := false
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SELinux" && e.Host == "a1" {
			warned = e.Finding.Severity == "warning" && strings.Contains(e.Finding.Message, "spec.k3s.selinuxRPMs.el9")
			if !warned {
				t.Errorf("SELinux finding on a1: %s %s, want a warning that the run installs the el9 RPM", e.Finding.Severity, e.Finding.Message)
			}
		}
	}
	if !warned {
		t.Error("no SELinux finding says the run installs a1's k3s-selinux RPM (does a1 look like Rocky 9 and enforcing?)")
	}
	regs := map[string]string{}
	for i, n := range names {
		cfg := c.exec(i, "cat", "/etc/rancher/k3s/config.yaml")
		if (n == "a1") != strings.Contains(cfg, "selinux: true") {
			t.Errorf("%s: selinux: true only on the enforcing a1:\n%s", n, cfg)
		}
		regs[n] = c.exec(i, "sh", "-c", "stat -c %a /etc/rancher/k3s/registries.yaml; cat /etc/rancher/k3s/registries.yaml")
		if !strings.HasPrefix(regs[n], "600\n") {
			t.Errorf("%s registries.yaml mode: %s", n, strings.SplitN(regs[n], "\n", 2)[0])
		}
		onHost := c.exec(i, "sh", "-c", "sha256sum /var/lib/k3strap/k3s-selinux.rpm 2>/dev/null | cut -d' ' -f1")
		if (n == "a1") != (onHost == rpmSHA) || (n != "a1" && onHost != "") {
			t.Errorf("%s: the RPM on the host has sha256 %q, want %q only on a1", n, onHost, rpmSHA)
		}
	}
	for n, want := range map[string][]string{
		"cp1": {"https://central.e2e:5000", "password: " + specPW},
		"a1":  {"https://central.e2e:5000", "password: " + specPW},
		"a2":  {"https://site2.e2e:5000", "password: " + sitePW, "username: site2"},
	} {
		for _, s := range want {
			if !strings.Contains(regs[n], s) {
				t.Errorf("%s registries.yaml lacks %q", n, hide(s))
			}
		}
	}
	if strings.Contains(regs["a2"], "central") || strings.Contains(regs["a2"], specPW) {
		t.Error("a2's own registries were merged with spec.registries")
	}
	dnf := c.exec(1, "sh", "-c", "cat "+dnfLog+" 2>/dev/null || true")
	if calls := strings.Count(dnf, "call\n"); calls != 1 {
		t.Errorf("first apply: dnf was called %d times on a1, want once: the inventory's k3s-selinux RPM was not installed", calls)
	}
	var args []string
	var dnfSHA, agentAtDNF string
	for _, l := range strings.Split(dnf, "\n") {
		switch {
		case strings.HasPrefix(l, "arg "):
			args = append(args, strings.TrimPrefix(l, "arg "))
		case strings.HasPrefix(l, "sha256 "):
			dnfSHA = strings.TrimPrefix(l, "sha256 ")
		case strings.HasPrefix(l, "k3s-agent "):
			agentAtDNF = strings.TrimPrefix(l, "k3s-agent ")
		}
	}
	t.Logf("dnf stand-in on a1: args %q, sha256 %.12s, k3s-agent then: %s", args, dnfSHA, agentAtDNF)
	if len(args) < 2 || args[0] != "install" || !slices.Contains(args, "-y") || !slices.Contains(args, "--disablerepo=*") || args[len(args)-1] != "/var/lib/k3strap/k3s-selinux.rpm" {
		t.Errorf("dnf was called with %q, want install -y --disablerepo=* /var/lib/k3strap/k3s-selinux.rpm (offline)", args)
	}
	if dnfSHA != rpmSHA {
		t.Errorf("dnf got a file with sha256 %s, the inventory's RPM has %s", dnfSHA, rpmSHA)
	}
	// ExecMainStartTimestampMonotonic 0: the agent had never started when dnf ran.
	if f := strings.Fields(agentAtDNF); len(f) != 2 || f[0] == "active" || f[1] != "0" {
		t.Errorf("K3s on a1 had already started when k3s-selinux was installed: %q", agentAtDNF)
	}
	if st := c.exec(1, "systemctl", "show", "-p", "ExecMainStartTimestampMonotonic", "--value", "k3s-agent"); st == "0" || st == "" {
		t.Errorf("k3s-agent on a1 has not started: %q", st)
	}
	if ev := hostEvents(r, "a1", "install"); len(ev) != 1 {
		t.Errorf("a1: %d install events, want 1", len(ev))
	}

	// Render shows a2's own file and the spec's, masked.
	rr := c.k3strap(time.Minute, "render", "--output", "plain")
	outputs["render stdout"], outputs["render stderr"] = rr.stdout, rr.stderr
	if rr.code != 0 || !strings.Contains(rr.stdout, "https://site2.e2e:5000") || !strings.Contains(rr.stdout, "https://central.e2e:5000") || !strings.Contains(rr.stdout, "********") {
		t.Errorf("render (exit %d) does not show both registries masked:\n%s", rr.code, rr.stdout)
	}

	// --- (a) a2's own mirror changes: only a2.
	before := map[string]svcState{}
	for i, n := range names {
		before[n] = c.svcState(t, i)
	}
	extra["siteMirror"] = "https://site2b.e2e:5000"
	c.writeInventory(registriesInv, extra)
	dr := c.k3strap(2*time.Minute, "apply", "--dry-run")
	outputs["dry-run stdout"], outputs["dry-run stderr"] = dr.stdout, dr.stderr
	if dr.code != 0 || !strings.Contains(dr.stdout, "site2b.e2e") {
		t.Errorf("dry-run (exit %d) does not show a2's mirror change", dr.code)
	}
	r = apply("(a) a2's own mirror")
	aDur := r.duration
	restartsA := c.checkRestarts(t, "(a)", r, names, before, map[string]bool{"a2": true})
	noInstall("(a)", r)
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == "SELinux" && e.Host == "a1" {
			t.Errorf("(a): a1 still lacks the k3s-selinux policy: %s", e.Finding.Message)
		}
	}
	if reg := c.exec(2, "cat", "/etc/rancher/k3s/registries.yaml"); !strings.Contains(reg, "https://site2b.e2e:5000") {
		t.Errorf("(a): a2's registries.yaml lacks the new mirror:\n%s", hide(reg))
	}

	// --- (b) the spec's mirror changes: every host on spec.registries, not a2.
	for i, n := range names {
		before[n] = c.svcState(t, i)
	}
	extra["specMirror"] = "https://central2.e2e:5000"
	c.writeInventory(registriesInv, extra)
	r = apply("(b) the spec's mirror")
	bDur := r.duration
	restartsB := c.checkRestarts(t, "(b)", r, names, before, map[string]bool{"cp1": true, "a1": true})
	noInstall("(b)", r)
	for i, n := range names[:2] {
		if reg := c.exec(i, "cat", "/etc/rancher/k3s/registries.yaml"); !strings.Contains(reg, "https://central2.e2e:5000") {
			t.Errorf("(b): %s's registries.yaml lacks the new mirror", n)
		}
	}

	if b, err := os.ReadFile(logFile); err != nil {
		t.Errorf("log file: %v", err)
	} else {
		outputs["--log-file"] = string(b)
	}
	for what, o := range outputs {
		for _, s := range secrets {
			if strings.Contains(o, s) {
				t.Errorf("a registry password is in k3strap's %s", what)
			}
		}
	}
	t.Logf("apply durations: first %s, (a) %s, (b) %s; starts per host: (a) %v, (b) %v",
		firstDur.Round(time.Millisecond), aDur.Round(time.Millisecond), bDur.Round(time.Millisecond), restartsA, restartsB)
}

// checkRestarts compares every host's service and registries.yaml with before: the hosts in
// want restarted exactly once (a new main process, one journal start, a changed file) and the
// event stream says so; the others kept their process, start time and file. NRestarts (crash
// restarts) stays. It returns the starts counted per host.
func (c *testCluster) checkRestarts(t *testing.T, what string, r run, names []string, before map[string]svcState, want map[string]bool) map[string]int {
	t.Helper()
	starts := map[string]int{}
	for i, n := range names {
		b, a := before[n], c.svcState(t, i)
		starts[n] = c.startsSince(t, i, b.cursor)
		restarted := a.mainPID != b.mainPID || a.startMono != b.startMono || a.invocation != b.invocation
		if restarted != want[n] {
			t.Errorf("%s: %s restarted=%v (pid %s→%s, start %s→%s), want %v", what, n, restarted, b.mainPID, a.mainPID, b.startMono, a.startMono, want[n])
		}
		if wantStarts := map[bool]int{true: 1, false: 0}[want[n]]; starts[n] != wantStarts {
			t.Errorf("%s: %s's K3s started %d times, want %d", what, n, starts[n], wantStarts)
		}
		if a.nRestarts != b.nRestarts {
			t.Errorf("%s: %s's K3s crashed and was restarted by systemd (NRestarts %s→%s)", what, n, b.nRestarts, a.nRestarts)
		}
		if (a.registriesSHA != b.registriesSHA) != want[n] {
			t.Errorf("%s: %s's registries.yaml changed=%v, want %v", what, n, a.registriesSHA != b.registriesSHA, want[n])
		}
		var startEv, converge []events.Event
		for _, e := range r.events {
			if e.Host == n && e.Step == "start" {
				startEv = append(startEv, e)
			}
			if e.Host == n && e.Step == "converge" {
				converge = append(converge, e)
			}
		}
		if want[n] {
			if len(startEv) != 1 || !strings.Contains(startEv[0].Message, "restarted") {
				t.Errorf("%s: %s: start events %v, want one restart", what, n, startEv)
			}
			if len(converge) != 1 || converge[0].Status != events.StatusChanged || !strings.Contains(converge[0].Message, "/etc/rancher/k3s/registries.yaml") {
				t.Errorf("%s: %s: converge events %v, want one that wrote registries.yaml", what, n, converge)
			}
		} else {
			if len(startEv) != 0 {
				t.Errorf("%s: %s: start events %v, want none", what, n, startEv)
			}
			if len(converge) != 1 || converge[0].Status != events.StatusUnchanged {
				t.Errorf("%s: %s: converge events %v, want one unchanged", what, n, converge)
			}
		}
	}
	return starts
}
