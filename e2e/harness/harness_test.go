// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
)

// sshClient runs the system ssh client against harness hosts.
type sshClient struct {
	key     string
	config  string   // ssh_config for -F (jump hosts)
	extra   []string // more ssh options
	timeout time.Duration
}

func newSSH(h *harness.Harness) sshClient {
	return sshClient{key: h.KeyPath(), config: h.SSHConfigPath(), timeout: 30 * time.Second}
}

func (c sshClient) args(target string, connectTimeout int) []string {
	a := []string{"-i", c.key, "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", fmt.Sprintf("ConnectTimeout=%d", connectTimeout)}
	return append(append(a, c.extra...), target)
}

// run executes remote on user@addr and returns stdout, stderr and the error.
func (c sshClient) run(ctx context.Context, userAt string, stdin []byte, remote string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append(c.args(userAt, 5), "--", remote)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func (c sshClient) must(t *testing.T, ctx context.Context, userAt, remote string) string {
	t.Helper()
	out, errOut, err := c.run(ctx, userAt, nil, remote)
	if err != nil {
		t.Fatalf("ssh %s %q: %v: %s", userAt, remote, err, errOut)
	}
	return strings.TrimSpace(out)
}

// unreachable asserts that an SSH connection to userAt fails within connectTimeout seconds.
func (c sshClient) unreachable(t *testing.T, ctx context.Context, userAt string, connectTimeout int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(connectTimeout+10)*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", append(c.args(userAt, connectTimeout), "--", "true")...).CombinedOutput()
	if err == nil {
		t.Fatalf("ssh %s succeeded, want unreachable", userAt)
	}
	t.Logf("ssh %s fails as expected: %s", userAt, strings.TrimSpace(string(out)))
}

// eventually retries ssh until it works (links need a moment after Heal).
func (c sshClient) eventually(t *testing.T, ctx context.Context, userAt, remote string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, errOut, err := c.run(ctx, userAt, nil, remote)
		if err == nil {
			return strings.TrimSpace(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh %s still failing after %s: %v: %s", userAt, within, err, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hostKeyFingerprint returns the SHA256 fingerprint of addr's ed25519 host key.
func hostKeyFingerprint(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	scan, err := exec.CommandContext(ctx, "ssh-keyscan", "-T", "5", "-t", "ed25519", addr).Output()
	if err != nil || len(scan) == 0 {
		t.Fatalf("ssh-keyscan %s: %v", addr, err)
	}
	cmd := exec.CommandContext(ctx, "ssh-keygen", "-l", "-f", "-")
	cmd.Stdin = bytes.NewReader(scan)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh-keygen -l: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
		t.Fatalf("unexpected fingerprint line %q", out)
	}
	return f[1]
}

func upOrFatal(t *testing.T, h *harness.Harness, n int, opts harness.Options) []harness.Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	hosts, err := h.Up(ctx, n, opts)
	if err != nil {
		t.Fatalf("Up(%d, %+v): %v", n, opts, err)
	}
	t.Logf("Up(%d, %q) took %s", n, opts.Topology, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Down(ctx); err != nil {
			t.Errorf("Down: %v", err)
		}
	})
	return hosts
}

func TestFlatHosts(t *testing.T) {
	h := harness.Require(t)
	hosts := upOrFatal(t, h, 3, harness.Options{})
	if h.Bastion() != nil {
		t.Errorf("flat topology has a bastion: %+v", h.Bastion())
	}
	ssh := newSSH(h)
	ctx := context.Background()
	root := func(i int) string { return "root@" + hosts[i-1].Address }

	t.Run("identity", func(t *testing.T) {
		names, ids := map[string]bool{}, map[string]bool{}
		for i, host := range hosts {
			if want := fmt.Sprintf("%s.%d", h.PublicNet(), 11+i); host.Address != want || host.Index != i+1 || host.Name != fmt.Sprintf("h%d", i+1) {
				t.Errorf("host %d = %+v, want h%d at %s", i, host, i+1, want)
			}
			out := ssh.must(t, ctx, "root@"+host.Address, "hostname; cat /etc/machine-id")
			f := strings.Fields(out)
			if len(f) != 2 {
				t.Fatalf("%s: unexpected output %q", host.Name, out)
			}
			if f[0] != host.Name {
				t.Errorf("%s reports hostname %q", host.Name, f[0])
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(f[1]) {
				t.Errorf("%s: machine-id %q", host.Name, f[1])
			}
			names[f[0]], ids[f[1]] = true, true
		}
		if len(names) != len(hosts) || len(ids) != len(hosts) {
			t.Errorf("hostnames %v / machine-ids %v are not distinct", names, ids)
		}
	})

	t.Run("systemd", func(t *testing.T) {
		for _, host := range hosts {
			// exit status is non-zero for "degraded": judge the printed state
			out, errOut, _ := ssh.run(ctx, "root@"+host.Address, nil, "systemctl is-system-running --wait")
			if s := strings.TrimSpace(out); s != "running" && s != "degraded" {
				t.Errorf("%s: systemctl is-system-running = %q (%s)", host.Name, s, errOut)
			}
			if out := ssh.must(t, ctx, "root@"+host.Address, "ps -o comm= -p 1"); out != "systemd" {
				t.Errorf("%s: PID 1 is %q", host.Name, out)
			}
		}
	})

	t.Run("network", func(t *testing.T) {
		for _, host := range hosts {
			if out := ssh.must(t, ctx, "root@"+host.Address, "ip route show default"); !strings.HasPrefix(out, "default via "+h.PublicNet()+".1") {
				t.Errorf("%s: default route %q", host.Name, out)
			}
		}
		out := ssh.must(t, ctx, root(1), "getent hosts h2 h3")
		for _, want := range []string{hosts[1].Address + " ", hosts[2].Address + " "} {
			if !strings.Contains(out, want) {
				t.Errorf("h1 resolves %q, lacks %q", out, want)
			}
		}
		if out := ssh.must(t, ctx, root(1), `bash -c 'exec 3<>/dev/tcp/h3/22; head -c 7 <&3'`); out != "SSH-2.0" {
			t.Errorf("h1 -> h3:22 by name: %q", out)
		}
	})

	t.Run("sudo", func(t *testing.T) {
		addr := hosts[0].Address
		if out := ssh.must(t, ctx, "deploy@"+addr, "id -un; sudo -n id -u"); out != "deploy\n0" {
			t.Errorf("deploy: %q", out)
		}
		_, errOut, err := ssh.run(ctx, "pwuser@"+addr, nil, "sudo -n true")
		if err == nil || !strings.Contains(errOut, "password is required") {
			t.Errorf("pwuser sudo -n: err=%v stderr=%q, want 'a password is required'", err, errOut)
		}
		pw, err := h.PasswordOf(harness.PasswordUser)
		if err != nil || len(pw) < 12 {
			t.Fatalf("PasswordOf: %v (len %d)", err, len(pw))
		}
		if st, err := os.Stat(filepath.Join(h.Dir(), "pwuser.password")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("password file: %v mode %v", err, st.Mode())
		}
		out, errOut, err := ssh.run(ctx, "pwuser@"+addr, []byte(pw+"\n"), "sudo -S -p '' id -u")
		if err != nil || strings.TrimSpace(out) != "0" {
			t.Errorf("pwuser sudo -S with the password: %v %q %q", err, out, errOut)
		}
		_, _, err = ssh.run(ctx, "pwuser@"+addr, []byte("wrong-"+pw+"\n"), "sudo -k; sudo -S -p '' true")
		if err == nil {
			t.Error("pwuser sudo -S with a wrong password succeeded")
		}
	})

	t.Run("exec and write file", func(t *testing.T) {
		out, err := h.Exec(ctx, 2, "hostname")
		if err != nil || strings.TrimSpace(string(out)) != "h2" {
			t.Fatalf("Exec hostname: %q %v", out, err)
		}
		data := []byte("secret: s3cr3t\nline 2\n")
		if err := h.WriteFile(ctx, 2, "/etc/k3strap-test/conf.yaml", data, 0o600); err != nil {
			t.Fatal(err)
		}
		got := ssh.must(t, ctx, root(2), "stat -c '%a %U' /etc/k3strap-test/conf.yaml; cat /etc/k3strap-test/conf.yaml")
		if want := "600 root\n" + strings.TrimSpace(string(data)); got != want {
			t.Errorf("file on h2 = %q, want %q", got, want)
		}
		if _, _, err := ssh.run(ctx, root(1), nil, "test -e /etc/k3strap-test/conf.yaml"); err == nil {
			t.Error("file written on h2 is visible on h1")
		}
		if _, err := h.Exec(ctx, 2, "false"); err == nil || !strings.Contains(err.Error(), "exec 2") {
			t.Errorf("Exec false: %v", err)
		}
	})

	t.Run("cut and heal", func(t *testing.T) {
		if err := h.Cut(ctx, 3); err != nil {
			t.Fatal(err)
		}
		ssh.unreachable(t, ctx, root(3), 2)
		ssh.must(t, ctx, root(1), "true") // others unaffected
		if out, err := h.Exec(ctx, 3, "hostname"); err != nil || strings.TrimSpace(string(out)) != "h3" {
			t.Errorf("cut host is not running: %q %v", out, err)
		}
		if err := h.Heal(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if out := ssh.eventually(t, ctx, root(3), "hostname", 15*time.Second); out != "h3" {
			t.Errorf("after heal: %q", out)
		}
	})

	t.Run("reset", func(t *testing.T) {
		before := ssh.must(t, ctx, root(1), "echo dirty > /root/marker; cat /etc/machine-id")
		fp := hostKeyFingerprint(t, ctx, hosts[0].Address)
		start := time.Now()
		if err := h.Reset(ctx, 1); err != nil {
			t.Fatal(err)
		}
		t.Logf("Reset(1) took %s", time.Since(start).Round(time.Millisecond))
		out := ssh.must(t, ctx, root(1), "test -e /root/marker && echo present || echo gone; hostname; cat /etc/machine-id")
		if want := "gone\nh1\n" + before; out != want {
			t.Errorf("after reset: %q, want %q", out, want)
		}
		if after := hostKeyFingerprint(t, ctx, hosts[0].Address); after != fp {
			t.Errorf("reset changed the host key: %s -> %s", fp, after)
		}
	})

	t.Run("regen hostkey", func(t *testing.T) {
		known := filepath.Join(t.TempDir(), "known_hosts")
		// records the host key on first use, then insists on it
		strictRun := func() (string, error) {
			cmd := exec.CommandContext(ctx, "ssh", "-i", h.KeyPath(), "-o", "UserKnownHostsFile="+known,
				"-o", "StrictHostKeyChecking=accept-new", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
				root(2), "hostname")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := strictRun(); err != nil {
			t.Fatalf("first connection (records the key): %v %s", err, out)
		}
		fp := hostKeyFingerprint(t, ctx, hosts[1].Address)
		if err := h.RegenHostKey(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if after := hostKeyFingerprint(t, ctx, hosts[1].Address); after == fp {
			t.Errorf("host key unchanged: %s", fp)
		}
		out, err := strictRun()
		if err == nil || !strings.Contains(out, "REMOTE HOST IDENTIFICATION HAS CHANGED") {
			t.Errorf("ssh with the old known_hosts: err=%v out=%q, want a host key mismatch", err, out)
		}
	})

	t.Run("kernel mask", func(t *testing.T) {
		if !machineHas(t, "CONFIG_IP_SET=y", "/sys/module/ip_set") {
			t.Skip("this machine's kernel has no built-in ip_set to hide")
		}
		const probe = `zcat /proc/config.gz | grep -q '^CONFIG_IP_SET=' && echo config-yes || echo config-no
zcat /proc/config.gz | grep -qx '# CONFIG_IP_SET is not set' && echo notset-yes || echo notset-no
test -e /sys/module/ip_set && echo module-yes || echo module-no
test -d /sys/module/kernel && echo other-yes || echo other-no`
		masked := "config-no\nnotset-yes\nmodule-no\nother-yes"
		plain := "config-yes\nnotset-no\nmodule-yes\nother-yes"
		if err := h.KernelMask(ctx, 2, "ip_set"); err != nil {
			t.Fatal(err)
		}
		if out := ssh.must(t, ctx, root(2), probe); out != masked {
			t.Errorf("masked h2 sees %q, want %q", out, masked)
		}
		if out := ssh.must(t, ctx, root(1), probe); out != plain {
			t.Errorf("h1 sees %q, want %q", out, plain)
		}
		if !machineHas(t, "CONFIG_IP_SET=y", "/sys/module/ip_set") {
			t.Error("the mask leaked to the machine itself")
		}
		if err := h.Reset(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if out := ssh.must(t, ctx, root(2), probe); out != masked {
			t.Errorf("after Reset h2 sees %q, want the mask kept: %q", out, masked)
		}
		if err := h.KernelUnmask(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if out := ssh.must(t, ctx, root(2), probe); out != plain {
			t.Errorf("unmasked h2 sees %q, want %q", out, plain)
		}
	})

	t.Run("kill stop start", func(t *testing.T) {
		if err := h.Kill(ctx, 3); err != nil {
			t.Fatal(err)
		}
		ssh.unreachable(t, ctx, root(3), 2)
		if _, err := h.Exec(ctx, 3, "true"); err == nil {
			t.Error("Exec on a killed host succeeded")
		}
		if err := h.Start(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if out := ssh.must(t, ctx, root(3), "hostname"); out != "h3" {
			t.Errorf("after start: %q", out)
		}
		if err := h.Stop(ctx, 3); err != nil {
			t.Fatal(err)
		}
		ssh.unreachable(t, ctx, root(3), 2)
		if err := h.Start(ctx, 3); err != nil {
			t.Fatal(err)
		}
		ssh.must(t, ctx, root(3), "true")
	})
}

// machineHas reports whether this machine's /proc/config.gz has the line and path exists.
func machineHas(t *testing.T, configLine, path string) bool {
	t.Helper()
	out, err := exec.Command("sh", "-c", "zcat /proc/config.gz").Output()
	if err != nil {
		return false
	}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if sc.Text() == configLine {
			found = true
		}
	}
	_, statErr := os.Stat(path)
	return found && statErr == nil
}

func TestBastionTopology(t *testing.T) {
	h := harness.Require(t)
	hosts := upOrFatal(t, h, 2, harness.Options{Topology: harness.TopologyBastion})
	ctx := context.Background()
	b := h.Bastion()
	if b == nil || b.Address != h.PublicNet()+".10" || b.Name != "h0" || b.Index != 0 {
		t.Fatalf("bastion = %+v", b)
	}
	for i, host := range hosts {
		if want := fmt.Sprintf("%s.%d", h.PrivateNet(), 11+i); host.Address != want {
			t.Errorf("%s at %s, want %s", host.Name, host.Address, want)
		}
	}
	ssh := newSSH(h)
	if out := ssh.must(t, ctx, "root@"+b.Address, "hostname"); out != "h0" {
		t.Errorf("bastion hostname %q", out)
	}
	for _, host := range hosts {
		ssh.unreachable(t, ctx, "root@"+host.Address, 2)
	}

	jump := newSSH(h)
	jump.extra = []string{"-F", h.SSHConfigPath(), "-J", "root@" + b.Address}
	for _, host := range hosts {
		out := jump.must(t, ctx, "root@"+host.Address, "hostname; ip route show default")
		if want := host.Name + "\ndefault via " + h.PrivateNet() + ".1"; !strings.HasPrefix(out, want) {
			t.Errorf("via bastion: %q, want prefix %q", out, want)
		}
	}
	if out := jump.must(t, ctx, "root@"+hosts[0].Address, `bash -c 'exec 3<>/dev/tcp/h2/22; head -c 7 <&3'`); out != "SSH-2.0" {
		t.Errorf("h1 -> h2:22 by name: %q", out)
	}
	if err := h.Cut(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := jump.run(ctx, "root@"+hosts[0].Address, nil, "true"); err == nil {
		t.Error("cut private host still reachable through the bastion")
	}
	if err := h.Heal(ctx, 1); err != nil {
		t.Fatal(err)
	}
	jump.eventually(t, ctx, "root@"+hosts[0].Address, "true", 15*time.Second)
}

func TestUpTen(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 10-host timing test")
	}
	h := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.Down(ctx); err != nil { // measure a cold start of the hosts, base already built
		t.Fatal(err)
	}
	start := time.Now()
	hosts := upOrFatal(t, h, 10, harness.Options{})
	took := time.Since(start)
	if took > 15*time.Second {
		t.Errorf("10 hosts took %s, target < 15 s", took)
	}
	ssh := newSSH(h)
	var wg sync.WaitGroup
	for _, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, err := ssh.run(ctx, "root@"+host.Address, nil, "hostname")
			if err != nil || strings.TrimSpace(out) != host.Name {
				t.Errorf("%s: %q %v %s", host.Name, out, err, errOut)
			}
		}()
	}
	wg.Wait()
}

// TestDownLeavesNothing checks that Down removes every trace from the machine, twice in a row.
func TestDownLeavesNothing(t *testing.T) {
	h := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := h.Up(ctx, 2, harness.Options{Topology: harness.TopologyBastion}); err != nil {
		t.Fatal(err)
	}
	if err := h.KernelMask(ctx, 1, "vxlan"); err != nil {
		t.Fatal(err)
	}
	if traces := machineTraces(t, h); len(traces) == 0 {
		t.Fatal("no traces found while hosts are up: the check itself is broken")
	}
	frozen := freezeInHost(t, h, 1)
	for round := 1; round <= 2; round++ {
		if err := h.Down(ctx); err != nil {
			t.Fatalf("Down #%d: %v", round, err)
		}
		if traces := machineTraces(t, h); len(traces) > 0 {
			t.Errorf("after Down #%d: %s", round, strings.Join(traces, "; "))
		}
	}
	if h.Hosts() != nil || h.Bastion() != nil {
		t.Error("Hosts/Bastion still set after Down")
	}
	if frozen != nil {
		_ = frozen.Wait() // reaped; Down killed it
	}
}

// freezeInHost starts a process in a frozen cgroup below host i's freezer cgroup, as runc
// leaves a container it was creating when the host is torn down: a frozen task takes SIGKILL
// only once thawed, so Down must thaw it. nil when this machine has no cgroup v1 freezer.
func freezeInHost(t *testing.T, h *harness.Harness, i int) *exec.Cmd {
	t.Helper()
	out, err := exec.Command("find", "/sys/fs/cgroup/freezer", "-maxdepth", "5", "-type", "d", "-name", fmt.Sprintf("%s-h%d", h.Prefix(), i)).Output()
	host := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if err != nil || host == "" {
		t.Logf("no cgroup v1 freezer for host %d here: the frozen-task case is not tried", i)
		return nil
	}
	dir := filepath.Join(host, "k3strap-test-frozen")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// machineTraces lists what the harness left on the machine: netns, links, mounts, nft tables,
// cgroups, nspawn processes.
func machineTraces(t *testing.T, h *harness.Harness) []string {
	t.Helper()
	var traces []string
	cmd := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v %s", name, args, err, out)
		}
		return string(out)
	}
	for _, l := range strings.Split(cmd("ip", "netns", "list"), "\n") {
		if strings.HasPrefix(l, h.Prefix()+"-") {
			traces = append(traces, "netns "+l)
		}
	}
	for _, l := range strings.Split(cmd("ip", "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], h.Prefix()) {
			traces = append(traces, "link "+f[1])
		}
	}
	if strings.Contains(cmd("nft", "list", "tables")+"\n", "inet "+h.Prefix()+"\n") {
		traces = append(traces, "nft table inet "+h.Prefix())
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, filepath.Join(h.StateDir(), "hosts")) {
			traces = append(traces, "mount "+l)
		}
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + h.Prefix() + "-h*")
	more, _ := filepath.Glob("/sys/fs/cgroup/*/*/*/" + h.Prefix() + "-h*")
	for _, c := range append(cgs, more...) {
		traces = append(traces, "cgroup "+c)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err != nil || strings.TrimSpace(string(b)) != "systemd-nspawn" {
			continue
		}
		argv, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		st, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if bytes.Contains(argv, []byte(h.StateDir()+"/hosts/")) && !bytes.Contains(st, []byte(") Z ")) {
			traces = append(traces, "process "+filepath.Dir(p))
		}
	}
	return traces
}

// TestK3sSysctls: holding sets the machine's kernel sysctls a real K3s kubelet needs; releasing
// puts back exactly what was there before, also when the hold was taken twice.
func TestK3sSysctls(t *testing.T) {
	h := harness.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops"}
	read := func() []string {
		var out []string
		for _, k := range keys {
			b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, k+"="+strings.TrimSpace(string(b)))
		}
		return out
	}
	before := read()
	t.Cleanup(func() { _ = h.ReleaseK3sSysctls(context.Background()) })
	for range 2 {
		if err := h.HoldK3sSysctls(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(read(), " "), "vm.overcommit_memory=1 kernel.panic=10 kernel.panic_on_oops=1"; got != want {
		t.Errorf("held: %s, want %s", got, want)
	}
	if err := h.ReleaseK3sSysctls(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("released: %v, want the values from before %v", got, before)
	}
}
