// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package harness gives end-to-end tests throw-away Linux hosts on this machine: systemd-nspawn
// --boot containers over a shared debootstrap'ed Debian 12, each with its own network namespace,
// address, hostname, machine-id, SSH host keys and a real OpenSSH sshd (see harness.sh in this
// directory for the topology, addresses and the kernel-mask feature table).
//
// Tests get the process-wide harness with Require, bring hosts up with Up and reach them over SSH
// with KeyPath (users root, deploy and pwuser). The harness needs root; Require skips the test
// otherwise.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// Topologies accepted in Options.Topology.
const (
	// TopologyFlat puts hosts h1..hN on the public bridge (10.123.0.0/24), reachable from this
	// machine. The empty string means TopologyFlat.
	TopologyFlat = "flat"
	// TopologyBastion adds host h0 on the public bridge and on a private one (10.124.0.0/24);
	// h1..hN are only on the private bridge and reachable through h0 (ssh -J).
	TopologyBastion = "bastion"
)

// Host kinds accepted in Options.Kind: every host of an Up is of one kind, each kind over its
// own base image under Dir (built once, on first use or by `harness.sh base KIND`; see
// harness.sh for what each image holds).
const (
	// KindBookworm is Debian 12 with systemd as PID 1 (the base image Dir/base). The empty
	// string means KindBookworm.
	KindBookworm = "bookworm"
	// KindTrixie is Debian 13 with systemd 257 as PID 1 and iptables defaulting to its
	// nf_tables backend (Dir/base-trixie).
	KindTrixie = "trixie"
	// KindOpenRC is Debian 12 booted by sysvinit with OpenRC as its rc, no systemd installed
	// (Dir/base-openrc). Exec, WriteFile, Stop, Start, Kill and Reset work as on the other
	// kinds (Stop is the host's own runlevel 0).
	KindOpenRC = "openrc"
)

// DefaultDir is where the base image, the harness SSH key and the hosts live unless HARNESS_DIR
// says otherwise.
const DefaultDir = "/var/tmp/k3strap-e2e"

// PasswordUser is the base image's user whose sudo asks for a password (see PasswordOf).
const PasswordUser = "pwuser"

// Timeouts of the harness's own long operations.
const (
	baseTimeout = 20 * time.Minute // debootstrap over the network
	lockTimeout = 30 * time.Minute // another test process holding the harness
	stderrTail  = 4096             // bytes of the script's stderr kept for errors
)

// ErrNoPassword is returned by PasswordOf for users that have no password.
var ErrNoPassword = errors.New("harness: user has no password")

var featureName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Options shapes the hosts brought up by Up.
type Options struct {
	// Topology is TopologyFlat (default when empty) or TopologyBastion.
	Topology string
	// Kind is the host kind, KindBookworm (default when empty), KindTrixie or KindOpenRC. A
	// base image missing for it is built first (a debootstrap: about two minutes, needs the
	// Debian mirror; HARNESS_BASE_ROOTFS_TRIXIE or _OPENRC name a rootfs to copy instead).
	Kind string
}

// Host is one throw-away host.
type Host struct {
	// Index is i in h<i>: 1..N, 0 for the bastion.
	Index int
	// Name is the host name, "h<i>"; every host resolves every other by name (/etc/hosts).
	Name string
	// Address is the IPv4 address a client uses on port 22: on the public bridge, or on the
	// private one (reachable only through the bastion) for h1..hN in TopologyBastion.
	Address string
}

// Harness drives harness.sh. Its methods are safe for concurrent use, but operations on the
// same host should not overlap, and Up/Down must not overlap with anything.
type Harness struct {
	script string
	dir    string
	// inst is HARNESS_INSTANCE (0..maxInstance).
	inst int
	// state is this instance's directory (dir itself for HARNESS_INSTANCE 0, dir/i<k> else):
	// its hosts, lock and ssh_config.
	state string
	// lock is the cross-process file lock; it must stay referenced for the life of the
	// process (a collected *flock.Flock closes its file, which releases the lock).
	lock *flock.Flock

	mu      sync.Mutex
	hosts   []Host
	bastion *Host
}

// process is the one Harness of this test process (Require). It is the package's only mutable
// state: the hosts are a machine-wide resource, and the file lock taken on first use keeps other
// test processes (other packages under `go test ./...`) out until this process exits.
var process struct {
	once sync.Once
	h    *Harness
	err  error
}

// Require returns the process-wide harness, building the base image first if it is missing
// (about 70 s, needs the Debian mirror). It skips the test when K3STRAP_E2E=0, when not running
// as root, or when a required tool (systemd-nspawn, debootstrap, nft, ip, ssh, nsenter) is
// missing, and fails it when the harness cannot be prepared. The first call waits, up to 30
// minutes or the test deadline, for other processes using the same HARNESS_DIR to finish.
func Require(t testing.TB) *Harness {
	t.Helper()
	if reason := skipReason(os.Getenv, os.Geteuid(), exec.LookPath); reason != "" {
		t.Skip(reason)
	}
	process.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), lockTimeout+baseTimeout)
		defer cancel()
		if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
			if d, ok := dt.Deadline(); ok {
				ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
				defer cancel()
			}
		}
		process.h, process.err = open(ctx)
	})
	if process.err != nil {
		t.Fatalf("e2e harness: %v", process.err)
	}
	return process.h
}

// ReleaseOnInterrupt makes SIGINT and SIGTERM put back the machine sysctls this process holds
// (HoldK3sSysctls) before the process exits with 130: a test binary interrupted with Ctrl-C
// runs no cleanup of its own. Call it once from TestMain.
func ReleaseOnInterrupt() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		if h := process.h; h != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_ = h.ReleaseK3sSysctls(ctx)
			cancel()
		}
		os.Exit(130)
	}()
}

// skipReason says why the harness cannot run here, or "" when it can.
func skipReason(getenv func(string) string, euid int, lookPath func(string) (string, error)) string {
	if getenv("K3STRAP_E2E") == "0" {
		return "e2e harness disabled by K3STRAP_E2E=0"
	}
	if euid != 0 {
		return "e2e harness needs root (systemd-nspawn, network namespaces, mounts)"
	}
	var missing []string
	for _, tool := range []string{"systemd-nspawn", "debootstrap", "nft", "ip", "ssh", "ssh-keygen", "nsenter", "flock", "bash"} {
		if _, err := lookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return "e2e harness needs " + strings.Join(missing, ", ") + " (as root: e2e/harness/harness.sh deps)"
	}
	return ""
}

// open locates harness.sh, takes the cross-process lock and builds the base image if needed.
func open(ctx context.Context) (*Harness, error) {
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	dir := os.Getenv("HARNESS_DIR")
	if dir == "" {
		dir = DefaultDir
	}
	state, inst := dir, 0
	if v := os.Getenv("HARNESS_INSTANCE"); v != "" && v != "0" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > maxInstance || strconv.Itoa(k) != v {
			return nil, fmt.Errorf("HARNESS_INSTANCE=%q: want 0..%d", v, maxInstance)
		}
		state, inst = filepath.Join(dir, "i"+v), k
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	lock := flock.New(filepath.Join(state, ".go-test.lock"))
	lctx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	ok, err := lock.TryLockContext(lctx, 500*time.Millisecond)
	if err != nil || !ok {
		return nil, fmt.Errorf("lock %s (another test process is using the harness): %v", lock.Path(), err)
	}
	// The lock is held until the process exits: the OS releases it then. The Harness keeps
	// the Flock referenced so that its file is not closed (and the lock lost) by the GC.
	h := &Harness{script: script, dir: dir, state: state, inst: inst, lock: lock}
	// A sysctl hold of this instance left by a process that was killed: this process holds the
	// instance's lock now, so nobody else can own it.
	if _, err := h.run(ctx, nil, nil, "sysctl-release"); err != nil {
		return nil, err
	}
	bctx, bcancel := context.WithTimeout(ctx, baseTimeout)
	defer bcancel()
	if _, err := h.run(bctx, nil, nil, "base"); err != nil {
		return nil, err
	}
	return h, nil
}

// scriptPath finds harness.sh next to this source file, or at $K3STRAP_HARNESS_SCRIPT.
func scriptPath() (string, error) {
	if p := os.Getenv("K3STRAP_HARNESS_SCRIPT"); p != "" {
		return p, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate harness.sh (set K3STRAP_HARNESS_SCRIPT)")
	}
	p := filepath.Join(filepath.Dir(file), "harness.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("harness.sh not found (set K3STRAP_HARNESS_SCRIPT): %w", err)
	}
	return p, nil
}

// Dir returns the harness directory (HARNESS_DIR).
func (h *Harness) Dir() string { return h.dir }

// StateDir returns this instance's directory (its hosts, lock and ssh_config): Dir for
// HARNESS_INSTANCE 0, Dir/i<k> for instance k.
func (h *Harness) StateDir() string { return h.state }

// Prefix is the name prefix of this instance's network namespaces, links, nft tables and
// cgroups: "k3st" for instance 0, "k3i<k>" for instance k.
func (h *Harness) Prefix() string {
	if h.inst == 0 {
		return "k3st"
	}
	return "k3i" + strconv.Itoa(h.inst)
}

// PublicNet is the first three octets of the public bridge's /24 ("10.123.0" for instance 0,
// 10.(123+2k).0 for instance k): the bridge is .1, host i is .(10+i).
func (h *Harness) PublicNet() string { return fmt.Sprintf("10.%d.0", netBase(h.inst)) }

// maxInstance is the highest HARNESS_INSTANCE (harness.sh says the same).
const maxInstance = 19

// netBase is the second octet of instance k's public net: 123+2k for k < 10, 143+2k above
// (past the uplink nets 10.143-10.152 of instances 0-9); harness.sh's NETBASE.
func netBase(k int) int {
	if k < 10 {
		return 123 + 2*k
	}
	return 143 + 2*k
}

// PrivateNet is PublicNet of the bastion topology's private bridge (10.(124+2k).0).
func (h *Harness) PrivateNet() string { return fmt.Sprintf("10.%d.0", netBase(h.inst)+1) }

// KeyPath returns the private key (ed25519, no passphrase) accepted for root, deploy and pwuser
// on every host.
func (h *Harness) KeyPath() string { return filepath.Join(h.dir, "id_ed25519") }

// SSHConfigPath returns an ssh_config (identity, no host key checking, batch mode) for
// `ssh -F`; unlike -o options it also applies to -J jump hosts. It exists after Up.
func (h *Harness) SSHConfigPath() string { return filepath.Join(h.state, "ssh_config") }

// HoldK3sSysctls sets the machine's kernel sysctls that a real K3s kubelet writes unless they
// already hold its values (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1;
// /proc/sys is read-only inside a host), saving the old values once. ReleaseK3sSysctls, Down,
// the next process to open this instance, or `harness.sh down` put them back.
func (h *Harness) HoldK3sSysctls(ctx context.Context) error {
	_, err := h.run(ctx, nil, nil, "sysctl-hold")
	return err
}

// ReleaseK3sSysctls ends this instance's hold; the saved values come back when no instance
// holds them any more.
func (h *Harness) ReleaseK3sSysctls(ctx context.Context) error {
	_, err := h.run(ctx, nil, nil, "sysctl-release")
	return err
}

// PasswordOf returns the password of user: PasswordUser has one (random per harness directory,
// the same in every kind's base; read from the 0600 file HARNESS_DIR/pwuser.password); any other
// user yields ErrNoPassword. The password must not be logged.
func (h *Harness) PasswordOf(user string) (string, error) {
	if user != PasswordUser {
		return "", fmt.Errorf("%w: %q", ErrNoPassword, user)
	}
	b, err := os.ReadFile(filepath.Join(h.dir, "pwuser.password"))
	if err != nil {
		return "", fmt.Errorf("harness: password of %s: %w", user, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Up brings n hosts (1..200) up and returns h1..hn once every host's sshd accepts a root key
// login (measured on a 2-core machine: 3 hosts 1.3-2.3 s, 10 hosts 4-6 s). It is idempotent for
// the same n, topology and kind; hosts of another count, topology or kind are torn down first. Existing
// hosts are not reset (see Reset). In TopologyBastion the bastion h0 comes in addition to the n
// hosts (see Bastion).
func (h *Harness) Up(ctx context.Context, n int, opts Options) ([]Host, error) {
	topo := opts.Topology
	if topo == "" {
		topo = TopologyFlat
	}
	if topo != TopologyFlat && topo != TopologyBastion {
		return nil, fmt.Errorf("harness: unknown topology %q", topo)
	}
	kind := opts.Kind
	if kind == "" {
		kind = KindBookworm
	}
	if kind != KindBookworm && kind != KindTrixie && kind != KindOpenRC {
		return nil, fmt.Errorf("harness: unknown host kind %q", kind)
	}
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("harness: host count %d out of range 1..200", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts, h.bastion = nil, nil
	if _, err := h.run(ctx, nil, []string{"HARNESS_TOPOLOGY=" + topo, "HARNESS_KIND=" + kind}, "up", strconv.Itoa(n)); err != nil {
		return nil, err
	}
	out, err := h.run(ctx, nil, nil, "env")
	if err != nil {
		return nil, err
	}
	hosts, bastion, err := parseEnv(out)
	if err != nil {
		return nil, err
	}
	if len(hosts) != n {
		return nil, fmt.Errorf("harness: asked for %d hosts, env lists %d", n, len(hosts))
	}
	h.hosts, h.bastion = hosts, bastion
	return append([]Host(nil), hosts...), nil
}

// Base builds the base image of host kind kind (KindBookworm when empty) unless it is there
// already, as Up would: a debootstrap of up to about 5 minutes on a loaded 2-core machine, so
// callers give it a context of its own (Up's callers usually give Up a few minutes). Other
// processes building the same image are waited for.
func (h *Harness) Base(ctx context.Context, kind string) error {
	if kind == "" {
		kind = KindBookworm
	}
	if kind != KindBookworm && kind != KindTrixie && kind != KindOpenRC {
		return fmt.Errorf("harness: unknown host kind %q", kind)
	}
	_, err := h.run(ctx, nil, nil, "base", kind)
	return err
}

// parseEnv reads `harness.sh env` output: HARNESS_H<i>=addr lines give h1..hN (sorted by
// index), HARNESS_BASTION=addr gives h0.
func parseEnv(out []byte) ([]Host, *Host, error) {
	var hosts []Host
	var bastion *Host
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch {
		case k == "HARNESS_BASTION":
			bastion = &Host{Index: 0, Name: "h0", Address: v}
		case strings.HasPrefix(k, "HARNESS_H"):
			i, err := strconv.Atoi(strings.TrimPrefix(k, "HARNESS_H"))
			if err != nil || i < 1 {
				return nil, nil, fmt.Errorf("harness: bad env line %q", sc.Text())
			}
			hosts = append(hosts, Host{Index: i, Name: "h" + strconv.Itoa(i), Address: v})
		}
	}
	for j := range hosts {
		if hosts[j].Index != j+1 {
			return nil, nil, fmt.Errorf("harness: env lists host h%d at position %d", hosts[j].Index, j+1)
		}
	}
	return hosts, bastion, sc.Err()
}

// Hosts returns h1..hN of the last Up (nil after Down).
func (h *Harness) Hosts() []Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Host(nil), h.hosts...)
}

// Bastion returns h0 when the last Up used TopologyBastion, else nil.
func (h *Harness) Bastion() *Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bastion == nil {
		return nil
	}
	b := *h.bastion
	return &b
}

// Down removes every host and everything the harness added to the machine (network
// namespaces, veths, bridges, nft table, mounts, cgroups). Safe to call at any time, repeatedly.
func (h *Harness) Down(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts, h.bastion = nil, nil
	_, err := h.run(ctx, nil, nil, "down")
	return err
}

// Reset wipes host i's filesystem back to the base image, keeping its SSH host keys, machine-id
// and kernel mask, and boots it again; it returns when sshd answers (measured: 0.6-1 s).
func (h *Harness) Reset(ctx context.Context, i int) error { return h.hostCmd(ctx, "reset", i) }

// FirstBoot makes host i a brand-new cloud-init box (Debian's cloud-init over the base, its
// disk wiped as by Reset) whose NoCloud seed is the directory seed (user-data, meta-data and
// whatever lies beside them, in /var/lib/cloud/seed/nocloud), boots it and returns when SSH
// answers; nothing logs in. The first call builds the cloud-init layer (about a minute, once
// per harness directory). The host stays a cloud-init host across Stop/Start until Reset or Down.
func (h *Harness) FirstBoot(ctx context.Context, i int, seed string) error {
	_, err := h.run(ctx, nil, nil, "firstboot", strconv.Itoa(i), seed)
	return err
}

// Stop powers host i off gracefully (systemd shutdown, up to 15 s, then killed).
func (h *Harness) Stop(ctx context.Context, i int) error { return h.hostCmd(ctx, "stop", i) }

// Start boots host i again, filesystem kept, and returns when SSH answers.
func (h *Harness) Start(ctx context.Context, i int) error { return h.hostCmd(ctx, "start", i) }

// Kill crashes host i: SIGKILL to its PID 1, every process of the host dies at once.
func (h *Harness) Kill(ctx context.Context, i int) error { return h.hostCmd(ctx, "kill", i) }

// Cut unplugs host i's network cable(s): its processes keep running, packets are lost.
func (h *Harness) Cut(ctx context.Context, i int) error { return h.hostCmd(ctx, "cut", i) }

// Heal replugs host i's cable(s) after Cut.
func (h *Harness) Heal(ctx context.Context, i int) error { return h.hostCmd(ctx, "heal", i) }

// Loss makes host i lose pct percent of its packets in each direction (0 ends it), with
// nftables in the host's own network namespace. It survives Reset; tests set it back to 0.
func (h *Harness) Loss(ctx context.Context, i, pct int) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("harness: loss %d%% out of range", pct)
	}
	_, err := h.run(ctx, nil, nil, "loss", strconv.Itoa(i), strconv.Itoa(pct))
	return err
}

// Rate limits what host i receives to kbytes kB/s (excess packets dropped; 0 ends it). It
// survives Reset; tests set it back to 0.
func (h *Harness) Rate(ctx context.Context, i, kbytes int) error {
	if kbytes < 0 {
		return fmt.Errorf("harness: rate %d out of range", kbytes)
	}
	_, err := h.run(ctx, nil, nil, "rate", strconv.Itoa(i), strconv.Itoa(kbytes))
	return err
}

// Nft runs `nft args...` in host i's network namespace with stdin (e.g. Nft(ctx, i, ruleset,
// "-f", "-") loads a table). The rules are real: the host's kernel applies them and its own nft
// lists them. Reset removes them.
func (h *Harness) Nft(ctx context.Context, i int, stdin string, args ...string) error {
	_, err := h.run(ctx, []byte(stdin), nil, append([]string{"nft", strconv.Itoa(i)}, args...)...)
	return err
}

// Uplink gives host i a second cable, wan0 on the uplink bridge (UplinkNet), and moves its
// default route there: a multi-homed host whose inventory address (eth0) is not on the default
// route's interface. Reset takes it away.
func (h *Harness) Uplink(ctx context.Context, i int) error { return h.hostCmd(ctx, "uplink", i) }

// UplinkNet is the uplink bridge's /24 without its last octet ("10.146.0" for instance 3);
// host i's wan0 address ends in 10+i.
func (h *Harness) UplinkNet() string {
	if h.inst >= 10 {
		return fmt.Sprintf("10.%d.0", 173+h.inst)
	}
	return fmt.Sprintf("10.%d.0", 143+h.inst)
}

// IPv6 gives host i an IPv6 address as well (opt-in): IPv6Addr(i) on eth0, the public bridge
// fd00:123:<instance>::1/64 and a default IPv6 route via it. It stays across Stop and Start;
// Reset takes it away (the host is back at its first boot), Down too. The bridge guard (an inet table) keeps IPv6 on the bridge.
func (h *Harness) IPv6(ctx context.Context, i int) error { return h.hostCmd(ctx, "ipv6", i) }

// IPv6Addr is host i's IPv6 address once IPv6 ran: fd00:123:<instance>::<10+i in hex>, in
// its canonical text form (RFC 5952: instance 0 gives fd00:123::b, not fd00:123:0::b), which is
// how k3strap and the kernel print it.
func (h *Harness) IPv6Addr(i int) string {
	return netip.MustParseAddr(fmt.Sprintf("fd00:123:%d::%x", h.inst, 10+i)).String()
}

// MTU sets host i's eth0 MTU: larger packets from the other hosts are dropped without an
// ICMP, a black hole as on a link with a smaller MTU. Reset sets it back to 1500.
func (h *Harness) MTU(ctx context.Context, i, mtu int) error {
	_, err := h.run(ctx, nil, nil, "mtu", strconv.Itoa(i), strconv.Itoa(mtu))
	return err
}

// RegenHostKey gives host i new SSH host keys (sshd reloaded), so clients that recorded the old
// key see a host key mismatch.
func (h *Harness) RegenHostKey(ctx context.Context, i int) error {
	return h.hostCmd(ctx, "regen-hostkey", i)
}

// KernelMask makes host i, and only it, see a kernel without the given features (for example
// "ip_set", "xt_set", "vxlan", "wireguard", "IP_SET_HASH_IP"): /proc/config.gz lists them as
// "is not set" and /sys/module hides their modules. It replaces any earlier mask of host i and
// survives Stop/Start/Kill/Reset until KernelUnmask. The feature-to-CONFIG table is in
// harness.sh. Names must match [A-Za-z0-9_]+.
func (h *Harness) KernelMask(ctx context.Context, i int, features ...string) error {
	if len(features) == 0 {
		return errors.New("harness: KernelMask needs at least one feature")
	}
	for _, f := range features {
		if !featureName.MatchString(f) {
			return fmt.Errorf("harness: bad kernel feature name %q", f)
		}
	}
	_, err := h.run(ctx, nil, nil, append([]string{"kernel-mask", strconv.Itoa(i)}, features...)...)
	return err
}

// KernelUnmask makes host i see the machine's kernel again.
func (h *Harness) KernelUnmask(ctx context.Context, i int) error {
	return h.hostCmd(ctx, "kernel-unmask", i)
}

// Exec runs args inside host i as root (all its namespaces, no SSH, minimal environment) and
// returns its stdout. A non-zero exit is an error carrying the stderr tail. Commands must not
// leave background processes holding stdout open (use systemd-run inside the host).
func (h *Harness) Exec(ctx context.Context, i int, args ...string) ([]byte, error) {
	return h.ExecInput(ctx, i, nil, args...)
}

// ExecInput is Exec with stdin (nil: empty).
func (h *Harness) ExecInput(ctx context.Context, i int, stdin []byte, args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("harness: Exec needs a command")
	}
	return h.run(ctx, stdin, nil, append([]string{"exec", strconv.Itoa(i)}, args...)...)
}

// writeFileScript replaces $1 atomically with stdin, mode $2 (octal), creating parent dirs.
const writeFileScript = `set -e
mkdir -p "$(dirname "$1")"
t=$(mktemp "$1.XXXXXX")
cat > "$t"
chmod "$2" "$t"
mv -f "$t" "$1"`

// WriteFile writes data to the absolute path inside host i (owner root, permissions mode),
// without SSH; the data travels on stdin, never on a command line.
func (h *Harness) WriteFile(ctx context.Context, i int, path string, data []byte, mode os.FileMode) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("harness: WriteFile needs an absolute path, got %q", path)
	}
	_, err := h.ExecInput(ctx, i, data, "sh", "-c", writeFileScript, "sh", path,
		strconv.FormatUint(uint64(mode.Perm()), 8))
	return err
}

func (h *Harness) hostCmd(ctx context.Context, cmd string, i int) error {
	_, err := h.run(ctx, nil, nil, cmd, strconv.Itoa(i))
	return err
}

// run executes harness.sh args... and returns its stdout. Errors name the subcommand (and host
// index) but not further arguments, and carry the last stderrTail bytes of stderr.
func (h *Harness) run(ctx context.Context, stdin []byte, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{h.script}, args...)...)
	cmd.Env = append(append(os.Environ(), "HARNESS_DIR="+h.dir), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: stderrTail}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	// Own process group, killed as a whole on cancellation; the hosts themselves run in their
	// own sessions and survive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		what := args[0]
		if len(args) > 1 {
			what += " " + args[1]
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), fmt.Errorf("harness %s: %w; stderr: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
