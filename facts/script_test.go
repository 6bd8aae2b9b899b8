// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"al.essio.dev/pkg/shellescape"
	"golang.org/x/sys/unix"
)

// shell is a way to run the script: argv before "-c", and an optional PATH.
type shell struct {
	argv []string
	path string
}

// shells returns the POSIX shells available here to run the script with: /bin/sh always, dash
// and busybox sh when installed, and busybox with only its own applets first on PATH (what an
// Alpine host offers).
func shells(t *testing.T) map[string]shell {
	t.Helper()
	out := map[string]shell{"sh": {argv: []string{"/bin/sh"}}}
	if p, err := exec.LookPath("dash"); err == nil {
		out["dash"] = shell{argv: []string{p}}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out["busybox"] = shell{argv: []string{p, "sh"}}
		dir := t.TempDir()
		if err := exec.Command(p, "--install", "-s", dir).Run(); err == nil {
			out["busybox-applets"] = shell{argv: []string{filepath.Join(dir, "sh")}, path: dir}
		}
	}
	return out
}

func runScript(t *testing.T, sh shell, script string, stdin string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(append([]string{}, sh.argv[1:]...), "-c", script)
	cmd := exec.CommandContext(ctx, sh.argv[0], args...)
	if sh.path != "" {
		cmd.Env = []string{"PATH=" + sh.path}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\nstderr: %s", sh.argv, err, stderr.String())
	}
	return out
}

func TestScriptSyntax(t *testing.T) {
	script := Script(ScriptInput{Files: []string{"/etc/rancher/k3s/config.yaml", "it's $(odd)"}, SudoPasswordOnStdin: true})
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			args := append(append([]string{}, sh.argv[1:]...), "-n", "-c", script)
			if out, err := exec.Command(sh.argv[0], args...).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", name, err, out)
			}
		})
	}
	if _, err := exec.LookPath("dash"); err != nil {
		t.Log("dash not installed: only /bin/sh checked")
	}
}

func TestScriptInputsAreQuoted(t *testing.T) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "pwned")
	files := []string{
		"$(touch " + canary + ")",
		"`touch " + canary + "`",
		"it's; touch " + canary,
		"with space",
		"new\nline",
		"",
	}
	s := Script(ScriptInput{Files: files})
	if strings.Contains(s, "new\nline") {
		t.Fatal("a path with a newline was embedded")
	}
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			h, err := Parse(runScript(t, sh, s, ""))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(canary); err == nil {
				t.Fatal("a file name was executed by the shell")
			}
			if !h.K3s.PrivilegedRead {
				if h.Sudo.OK {
					t.Fatalf("sudo OK but privileged reads did not finish: %+v", h.Sudo)
				}
				t.Skipf("no privilege here (sudo mode %q): file results not checked", h.Sudo.Mode)
			}
			for _, f := range files[:4] {
				v, ok := h.K3s.Files[f]
				if !ok || v != "" {
					t.Errorf("file %q: got %q, %v; want reported missing", f, v, ok)
				}
			}
			if len(h.K3s.Files) != 4 {
				t.Errorf("got %d files, want 4: %v", len(h.K3s.Files), h.K3s.Files)
			}
		})
	}
}

// TestScriptOnThisHost runs the real script on this machine with every available shell and
// compares the parsed facts with what Go reads through independent interfaces (syscalls,
// sockets it opens itself, net.Interfaces).
func TestScriptOnThisHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the facts script targets Linux hosts")
	}
	dir := t.TempDir()
	managed := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(managed, []byte("node-name: test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("node-name: test\n"))
	missing := filepath.Join(dir, "registries.yaml")

	// Sockets this test holds while the script runs.
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ul, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tcpPort := tl.Addr().(*net.TCPAddr).Port
	udpPort := ul.LocalAddr().(*net.UDPAddr).Port

	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	wantMem := int64(si.Totalram) * int64(si.Unit) / 1024
	wantSwap := int64(si.Totalswap) * int64(si.Unit) / 1024
	hostname, _ := os.Hostname()
	wantCgroup := 1
	var sfs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &sfs); err == nil && sfs.Type == unix.CGROUP2_SUPER_MAGIC {
		wantCgroup = 2
	}

	script := Script(ScriptInput{Files: []string{managed, missing}})
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			sent := time.Now()
			out := runScript(t, sh, script, "")
			received := time.Now()
			h, err := Parse(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if want := runtime.GOARCH; (want == "amd64" || want == "arm64" || want == "arm") && h.Arch != want {
				t.Errorf("Arch = %q (machine %q), want %q", h.Arch, h.Machine, want)
			}
			if h.KernelRelease != release {
				t.Errorf("KernelRelease = %q, want %q", h.KernelRelease, release)
			}
			if h.Hostname != hostname {
				t.Errorf("Hostname = %q, want %q", h.Hostname, hostname)
			}
			if h.MemTotalKiB <= 0 || h.MemTotalKiB != wantMem {
				t.Errorf("MemTotalKiB = %d, want %d (sysinfo)", h.MemTotalKiB, wantMem)
			}
			if h.SwapTotalKiB != wantSwap {
				t.Errorf("SwapTotalKiB = %d, want %d (sysinfo)", h.SwapTotalKiB, wantSwap)
			}
			if h.FormatVersion != FormatVersion {
				t.Errorf("FormatVersion = %d", h.FormatVersion)
			}
			checkOSRelease(t, h)
			checkInit(t, h)
			if h.Cgroup.Version != wantCgroup {
				t.Errorf("Cgroup.Version = %d, want %d (statfs /sys/fs/cgroup)", h.Cgroup.Version, wantCgroup)
			}
			if !slices.Contains(h.Cgroup.Controllers, "memory") {
				t.Errorf("Cgroup.Controllers %v lacks memory", h.Cgroup.Controllers)
			}
			checkKernel(t, h, release)
			checkDisk(t, h)
			if !hasPort(h, "tcp", tcpPort) {
				t.Errorf("TCP listener on port %d not in %v", tcpPort, h.Listening)
			}
			if !hasPort(h, "udp", udpPort) {
				t.Errorf("UDP socket on port %d not in %v", udpPort, h.Listening)
			}
			checkAddresses(t, h)
			checkDefaultRoute(t, h)
			if b, err := os.ReadFile("/etc/machine-id"); err == nil && h.MachineID != strings.TrimSpace(string(b)) {
				t.Errorf("MachineID = %q, want %q", h.MachineID, strings.TrimSpace(string(b)))
			}
			if b, err := os.ReadFile("/proc/sys/kernel/keys/root_maxkeys"); err == nil {
				want, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				if h.KeysRootMaxKeys != want {
					t.Errorf("KeysRootMaxKeys = %d, want %d", h.KeysRootMaxKeys, want)
				}
			}
			if h.RemoteClock.Before(sent.Add(-time.Second)) || h.RemoteClock.After(received.Add(time.Second)) {
				t.Errorf("RemoteClock %v outside [%v, %v]", h.RemoteClock, sent, received)
			}
			h.SetClockSkew(sent, received)
			if d := h.ClockSkew; d > 2*time.Second || d < -2*time.Second {
				t.Errorf("ClockSkew = %v on the local machine", d)
			}
			_, k3sErr := exec.LookPath("k3s")
			if (k3sErr == nil) != (h.K3s.BinaryPath != "") {
				t.Errorf("k3s on PATH: %v, BinaryPath %q", k3sErr == nil, h.K3s.BinaryPath)
			}
			_, subnetErr := os.Stat("/run/flannel/subnet.env")
			if h.K3s.SubnetEnvPresent != (subnetErr == nil) {
				t.Errorf("SubnetEnvPresent = %v", h.K3s.SubnetEnvPresent)
			}
			checkSudo(t, h)
			if h.K3s.PrivilegedRead {
				if got := h.K3s.Files[managed]; got != hex.EncodeToString(sum[:]) {
					t.Errorf("sha256 of %s = %q, want %x", managed, got, sum)
				}
				if got, ok := h.K3s.Files[missing]; !ok || got != "" {
					t.Errorf("missing file reported as %q, %v", got, ok)
				}
				_, tokErr := os.Stat("/var/lib/rancher/k3s/server/token")
				if h.K3s.TokenPresent != (tokErr == nil) {
					t.Errorf("TokenPresent = %v", h.K3s.TokenPresent)
				}
			}
		})
	}
}

func checkOSRelease(t *testing.T, h *Host) {
	t.Helper()
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ID="); ok {
			if want := strings.Trim(v, `"'`); h.OS.ID != want {
				t.Errorf("OS.ID = %q, want %q", h.OS.ID, want)
			}
			return
		}
	}
}

func checkInit(t *testing.T, h *Host) {
	t.Helper()
	want := "none"
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		want = "systemd"
	} else if _, err := os.Stat("/sbin/openrc-run"); err == nil {
		want = "openrc"
	}
	if h.InitSystem != want {
		t.Errorf("InitSystem = %q, want %q", h.InitSystem, want)
	}
}

func checkKernel(t *testing.T, h *Host, release string) {
	t.Helper()
	k := h.Kernel
	switch {
	case fileExists("/proc/config.gz"):
		if k.ConfigSource != "/proc/config.gz" {
			t.Errorf("ConfigSource = %q, want /proc/config.gz", k.ConfigSource)
		}
	case fileExists("/boot/config-" + release):
		if k.ConfigSource != "/boot/config-"+release {
			t.Errorf("ConfigSource = %q", k.ConfigSource)
		}
	default:
		if k.ConfigSource != "" {
			t.Errorf("ConfigSource = %q, want none", k.ConfigSource)
		}
	}
	if k.ConfigSource != "" && len(k.Config) == 0 {
		t.Error("kernel config read but empty")
	}
	if got, want := k.ModuleSupport, fileExists("/proc/modules"); got != want {
		t.Errorf("ModuleSupport = %v, want %v", got, want)
	}
	ents, err := os.ReadDir("/sys/module")
	if err == nil {
		if !k.SysModuleRead || len(k.SysModule) != len(ents) {
			t.Errorf("SysModule: read %v, %d names, want %d", k.SysModuleRead, len(k.SysModule), len(ents))
		}
	}
	ns, _ := os.ReadDir("/proc/self/ns")
	if len(ns) != len(k.Namespaces) || !slices.Contains(k.Namespaces, "net") {
		t.Errorf("Namespaces = %v, /proc/self/ns has %d", k.Namespaces, len(ns))
	}
	if !k.Readable() {
		t.Error("Kernel.Readable() = false on this host")
	}
}

func checkDisk(t *testing.T, h *Host) {
	t.Helper()
	p := "/var/lib/rancher"
	for !fileExists(p) {
		p = filepath.Dir(p)
	}
	if h.DiskPath != p {
		t.Errorf("DiskPath = %q, want %q", h.DiskPath, p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	want := int64(st.Bavail) * st.Bsize / 1024
	if d := h.DiskFreeKiB - want; h.DiskFreeKiB <= 0 || d > 1<<20 || d < -(1<<20) {
		t.Errorf("DiskFreeKiB = %d, statfs says %d", h.DiskFreeKiB, want)
	}
}

func checkAddresses(t *testing.T, h *Host) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		want = append(want, ipn.IP.String())
	}
	slices.Sort(want)
	got := slices.Clone(h.Addresses)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("Addresses = %v, want %v", got, want)
	}
}

func checkDefaultRoute(t *testing.T, h *Host) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Log("no ip command: default route not cross-checked")
		return
	}
	out, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		if h.DefaultRoute != nil {
			t.Errorf("DefaultRoute = %+v, ip says none", h.DefaultRoute)
		}
		return
	}
	if h.DefaultRoute == nil {
		t.Fatalf("DefaultRoute = nil, ip says %q", out)
	}
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "via":
			if h.DefaultRoute.Gateway != f[i+1] {
				t.Errorf("Gateway = %q, ip says %q", h.DefaultRoute.Gateway, f[i+1])
			}
		case "dev":
			if h.DefaultRoute.Interface != f[i+1] {
				t.Errorf("Interface = %q, ip says %q", h.DefaultRoute.Interface, f[i+1])
			}
		}
	}
}

func checkSudo(t *testing.T, h *Host) {
	t.Helper()
	if os.Geteuid() == 0 {
		if !h.Sudo.Root || !h.Sudo.OK || h.Sudo.Mode != "root" || !h.K3s.PrivilegedRead {
			t.Errorf("running as root: Sudo = %+v, PrivilegedRead %v", h.Sudo, h.K3s.PrivilegedRead)
		}
		return
	}
	if h.Sudo.Root {
		t.Errorf("not root but Sudo.Root: %+v", h.Sudo)
	}
	if h.Sudo.OK != h.K3s.PrivilegedRead {
		t.Errorf("Sudo.OK %v but PrivilegedRead %v", h.Sudo.OK, h.K3s.PrivilegedRead)
	}
}

func hasPort(h *Host, proto string, port int) bool {
	for _, p := range h.Listening {
		if p.Proto == proto && p.Port == port {
			return true
		}
	}
	return false
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestScriptFindsK3sBinary puts a fake k3s first on PATH (like the simulator does) and checks
// that the script reports its version line.
func TestScriptFindsK3sBinary(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho 'k3s version v1.36.3+k3s1 (simulator)'\necho 'go version go1.25.4'\n"
	if err := os.WriteFile(filepath.Join(dir, "k3s"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "PATH=" + shellescape.Quote(dir) + ":$PATH\n" + Script(ScriptInput{})
	for name, sh := range shells(t) {
		if sh.path != "" {
			continue // its PATH holds only busybox applets
		}
		t.Run(name, func(t *testing.T) {
			h, err := Parse(runScript(t, sh, script, ""))
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "BinaryVersion", h.K3s.BinaryVersion, "v1.36.3+k3s1")
			eq(t, "BinaryLabel", h.K3s.BinaryLabel, "simulator")
			eq(t, "BinaryPath", h.K3s.BinaryPath, filepath.Join(dir, "k3s"))
			eq(t, "Installed", h.K3s.Installed(), true)
		})
	}
}

// TestScriptCompresses: the document comes gzip-compressed where the host has gzip and plain
// where it has not (dash with BusyBox's applets minus gzip on PATH; BusyBox's own shell would
// find its gzip applet whatever PATH says), and Parse reads both the same.
func TestScriptCompresses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the facts script targets Linux hosts")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox (make test-setup installs busybox-static): the fallback is run with its applets minus gzip")
	}
	with := t.TempDir()
	if err := exec.Command(bb, "--install", "-s", with).Run(); err != nil {
		t.Fatalf("busybox --install: %v", err)
	}
	without := t.TempDir()
	entries, err := os.ReadDir(with)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "gzip" {
			if err := os.Symlink(bb, filepath.Join(without, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	script := Script(ScriptInput{})
	zipped := runScript(t, shell{argv: []string{filepath.Join(with, "sh")}, path: with}, script, "")
	plain := runScript(t, shell{argv: []string{"/bin/sh"}, path: without}, script, "")
	if len(zipped) < 2 || zipped[0] != 0x1f || zipped[1] != 0x8b {
		t.Fatalf("with gzip on PATH the document is not gzip-compressed: %q", clip(string(zipped)))
	}
	if !strings.HasPrefix(string(plain), magic+" ") {
		t.Fatalf("without gzip the document is not plain: %q", clip(string(plain)))
	}
	hz, err := Parse(zipped)
	if err != nil {
		t.Fatalf("Parse(compressed): %v", err)
	}
	hp, err := Parse(plain)
	if err != nil {
		t.Fatalf("Parse(plain): %v", err)
	}
	if hz.OS.ID == "" || hz.OS.ID != hp.OS.ID || hz.KernelRelease != hp.KernelRelease || len(hz.Addresses) != len(hp.Addresses) {
		t.Errorf("the two documents differ: OS %q/%q, kernel %q/%q, %d/%d addresses", hz.OS.ID, hp.OS.ID, hz.KernelRelease, hp.KernelRelease, len(hz.Addresses), len(hp.Addresses))
	}
	if len(zipped)*3 > len(plain) {
		t.Errorf("compressed %d bytes of %d: less than a third saved", len(zipped), len(plain))
	}
	if _, err := Parse(zipped[:len(zipped)/2]); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Parse(cut gzip stream) = %v, want a damaged-document error", err)
	}
}

// TestScriptWithoutComments: the script as sent (its comment lines dropped) is a third
// smaller and prints the same sections as the script with its comments.
func TestScriptWithoutComments(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the facts script targets Linux hosts")
	}
	in := ScriptInput{Files: []string{"/etc/hostname"}}
	full, sent := script(in), Script(in)
	if len(sent)*4 > len(full)*3 {
		t.Errorf("without comments %d bytes of %d", len(sent), len(full))
	}
	sections := func(s string) []string {
		out, err := gunzip(runScript(t, shell{argv: []string{"/bin/sh"}}, s, ""))
		if err != nil {
			t.Fatal(err)
		}
		var heads []string
		for l := range strings.Lines(string(out)) {
			if strings.HasPrefix(l, "@@ ") {
				heads = append(heads, strings.TrimSpace(l))
			}
		}
		return heads
	}
	a, b := sections(full), sections(sent)
	if len(a) < 20 || !slices.Equal(a, b) {
		t.Errorf("sections with comments:\n%s\nwithout:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
