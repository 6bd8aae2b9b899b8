// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// dropbearPath is where the machine's Dropbear is (Debian package dropbear-bin, installed by
// `harness.sh deps`).
const dropbearPath = "/usr/sbin/dropbear"

// TestApplyWithoutSFTP: on a host without an SFTP subsystem — OpenSSH with the `Subsystem sftp`
// line removed (hardening), as root and as a sudo user (staged in /var/tmp, moved into place
// with sudo), and Dropbear instead of OpenSSH (the host's sftp-server removed, as on an edge
// image without openssh-sftp-server) — preflight reports the session method,
// `apply` converges with every file streamed over sessions (the binary on the host is the
// artifact, byte for byte), and a second apply changes nothing and uploads nothing.
func TestApplyWithoutSFTP(t *testing.T) {
	t.Run("openssh-hardened", func(t *testing.T) {
		c := newCluster(t, 1)
		if got := c.exec(0, "grep", "-c", "^Subsystem[[:space:]]*sftp", "/etc/ssh/sshd_config"); got != "1" {
			t.Fatalf("the base's sshd_config has %q Subsystem sftp lines, want 1", got)
		}
		c.exec(0, "sh", "-c", `sed -i '/^Subsystem[[:space:]]*sftp/d' /etc/ssh/sshd_config && systemctl restart ssh`)
		if got := c.exec(0, "sh", "-c", "sshd -T | grep -ci '^subsystem' || true"); got != "0" {
			t.Fatalf("sshd still has %s subsystems", got)
		}
		convergesOverSessions(t, c, nil)
	})
	t.Run("openssh-hardened-sudo-user", func(t *testing.T) {
		c := newCluster(t, 1)
		c.exec(0, "sh", "-c", `sed -i '/^Subsystem[[:space:]]*sftp/d' /etc/ssh/sshd_config && systemctl restart ssh`)
		convergesOverSessions(t, c, map[string]any{"user": "deploy"})
		if got := c.exec(0, "stat", "-c", "%U %a", "/etc/rancher/k3s/config.yaml", "/usr/local/bin/k3s"); got != "root 600\nroot 755" {
			t.Errorf("owner/mode of config.yaml and k3s: %q", got)
		}
	})
	t.Run("dropbear", func(t *testing.T) {
		if _, err := os.Stat(dropbearPath); err != nil {
			t.Skipf("Dropbear is not installed on this machine (%v): run `harness.sh deps` (Debian package dropbear-bin)", err)
		}
		c := newCluster(t, 1)
		startDropbear(t, c, 0)
		convergesOverSessions(t, c, nil)
		// Still Dropbear answering, not an OpenSSH that came back.
		if got := c.exec(0, "sh", "-c", "systemctl is-active ssh.service ssh.socket || true"); strings.Contains(got, "\nactive") || strings.HasPrefix(got, "active") {
			t.Fatalf("OpenSSH is running again: %q", got)
		}
	})
}

// startDropbear replaces host i's OpenSSH by the machine's Dropbear on port 22: the binary and
// the libraries it links (but the C library, the host's own) are copied into /opt/dropbear,
// sshd is stopped, and Dropbear runs as a transient unit with keys generated on demand (the
// test's known_hosts is fresh: trust on first use). The host's sftp-server is removed, so
// Dropbear accepts the sftp subsystem and ends the channel at once (exit 127).
func startDropbear(t *testing.T, c *testCluster, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.h.WriteFile(ctx, c.hosts[i].Index, dst, b, 0o755); err != nil {
			t.Fatalf("copying %s into host %d: %v", src, i, err)
		}
	}
	put(dropbearPath, "/opt/dropbear/dropbear")
	out, err := exec.CommandContext(ctx, "ldd", dropbearPath).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", dropbearPath, err)
	}
	libs := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "=>" || strings.HasPrefix(f[0], "libc.so") {
			continue
		}
		put(f[2], "/opt/dropbear/lib/"+filepath.Base(f[2]))
		libs++
	}
	if libs == 0 {
		t.Fatalf("ldd %s names no library: %s", dropbearPath, out)
	}
	// Dropbear serves SFTP only through /usr/lib/sftp-server (package openssh-sftp-server,
	// in the base as OpenSSH's dependency): an edge image with Dropbear has none.
	c.exec(i, "rm", "-f", "/usr/lib/sftp-server", "/usr/lib/openssh/sftp-server")
	if bin, _ := os.ReadFile(dropbearPath); !bytes.Contains(bin, []byte("/usr/lib/sftp-server")) {
		t.Fatalf("%s does not name /usr/lib/sftp-server as its SFTP server", dropbearPath)
	}
	c.exec(i, "bash", "-c", `set -e
systemctl stop ssh.socket ssh.service 2>/dev/null || systemctl stop ssh.service
mkdir -p /etc/dropbear
systemd-run --unit=k3strap-e2e-dropbear --setenv=LD_LIBRARY_PATH=/opt/dropbear/lib /opt/dropbear/dropbear -F -E -R -p 22
for n in $(seq 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null; then exit 0; fi
  sleep 0.1
done
journalctl -u k3strap-e2e-dropbear --no-pager | tail -5 >&2
exit 1`)
}

// convergesOverSessions runs apply twice (inventory singleServer with extra) on the one-host
// cluster c whose host offers no SFTP: the method reported is "session", the binary lands byte for byte, and the
// second apply is unchanged without uploads.
func convergesOverSessions(t *testing.T, c *testCluster, extra map[string]any) {
	t.Helper()
	c.writeInventory(singleServer, extra)
	method := func(r run) string {
		for _, e := range r.ofType(events.Info) {
			if e.Host == "cp1" && strings.HasPrefix(e.Message, "file transfer: ") {
				return strings.TrimPrefix(e.Message, "file transfer: ")
			}
		}
		return ""
	}
	r := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k.yaml")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	if m := method(r); !strings.HasPrefix(m, "session") {
		t.Fatalf("file transfer method %q, want session", m)
	}
	if len(r.ofType(events.UploadProgress)) == 0 {
		t.Fatal("apply reported no upload")
	}
	b, err := os.ReadFile(filepath.Join(c.bin.artifacts, "k3s"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := c.exec(0, "sh", "-c", "sha256sum /usr/local/bin/k3s | cut -c1-64"); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("k3s on the host has sha256 %s, the artifact %x", got, sum)
	}
	if got := c.exec(0, "stat", "-c", "%a", "/etc/rancher/k3s/config.yaml"); got != "600" {
		t.Errorf("config.yaml mode %s", got)
	}
	if left := c.exec(0, "sh", "-c", "find / -xdev -name '*.k3strap-*' 2>/dev/null | head -5"); left != "" {
		t.Errorf("left on the host: %s", left)
	}
	r2 := c.k3strap(2*time.Minute, "apply", "--kubeconfig-out", c.dir+"/k.yaml")
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("second apply exited %d", r2.code)
	}
	if m := method(r2); !strings.HasPrefix(m, "session") {
		t.Fatalf("second apply: file transfer method %q, want session", m)
	}
	if ups := r2.ofType(events.UploadProgress); len(ups) > 0 {
		t.Errorf("second apply uploaded %s", ups[0].Upload.File)
	}
	for _, h := range r2.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("host %s: %s (%s), want unchanged", h.Host, h.Status, h.Message)
		}
	}
}

// TestSessionUploadCutResumes: on a host without SFTP (OpenSSH without the Subsystem line), the
// K3s binary streamed over a session is cut at ~58 % (the link unplugged): the run fails on the
// dead link, and after healing the re-run resumes from the bytes the host holds — it reports
// the resume and sends less than 60 % of the file again — and leaves no partial file.
func TestSessionUploadCutResumes(t *testing.T) {
	c := newCluster(t, 1)
	c.exec(0, "sh", "-c", `sed -i '/^Subsystem[[:space:]]*sftp/d' /etc/ssh/sshd_config && systemctl restart ssh`)
	c.writeInventory(singleServer, nil)
	limitLink(t, c, 0, 0, 3000)
	a := c.start(5*time.Minute, "apply", "--verbose", "--ssh-keepalive="+linkKeepalive.String(), "--kubeconfig-out", c.dir+"/k")
	at := uploadAt(t, a, "cp1", pathK3s, 0.58)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Cut(ctx, c.hosts[0].Index); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut cp1 at %d of %d bytes", at.Upload.Bytes, at.Upload.Total)
	r := a.wait(t)
	defer r.dump(t)
	if r.code == 0 {
		t.Fatal("apply succeeded through a cut link")
	}
	if err := c.h.Heal(ctx, c.hosts[0].Index); err != nil {
		t.Fatal(err)
	}
	if err := c.h.Rate(ctx, c.hosts[0].Index, 0); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(4*time.Minute, "apply", "--verbose", "--kubeconfig-out", c.dir+"/k")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("re-run after healing exited %d", r.code)
	}
	session, resumed := false, false
	var sent int64
	for _, e := range r.events {
		if e.Host != "cp1" {
			continue
		}
		session = session || e.Type == events.Info && strings.HasPrefix(e.Message, "file transfer: session")
		if e.Type == events.Info && strings.Contains(e.Message, "resumed the upload of "+pathK3s) {
			resumed = true
			t.Log(e.Message)
		}
		if m := sentRE.FindStringSubmatch(e.Message); m != nil && m[1] == pathK3s {
			sent, _ = strconv.ParseInt(m[2], 10, 64)
		}
	}
	t.Logf("re-run sent %d of %d bytes of %s (%.0f%%)", sent, at.Upload.Total, pathK3s, 100*float64(sent)/float64(at.Upload.Total))
	if !session {
		t.Error("the re-run did not report the session method")
	}
	if !resumed || sent <= 0 || float64(sent) >= 0.6*float64(at.Upload.Total) {
		t.Errorf("the re-run did not resume the upload (resumed %v, sent %d of %d)", resumed, sent, at.Upload.Total)
	}
	if left := partials(c, 0); left != "" {
		t.Errorf("partial files left on cp1:\n%s", left)
	}
}

// TestPathCheckOverDropbear: the path check between two Dropbear hosts. Dropbear ends the connection on an exec command line over 9,000 bytes; the probe's launcher and
// program travel on the command's input. Each host gets the sweeps' four short commands —
// start, hand over, read, read and stop — every path tests open, and no run directory is left.
func TestPathCheckOverDropbear(t *testing.T) {
	if _, err := os.Stat(dropbearPath); err != nil {
		t.Skipf("Dropbear is not installed on this machine (%v): run `harness.sh deps` (Debian package dropbear-bin)", err)
	}
	c := newCluster(t, 2)
	startDropbear(t, c, 0)
	startDropbear(t, c, 1)
	c.writeInventory(clusterInv, clusterExtra(1, 1, nil))
	r := c.k3strap(2*time.Minute, "preflight", "--verbose")
	defer r.dump(t)
	finished := ""
	for _, e := range r.ofType(events.PhaseFinished) {
		if e.Phase == events.PhasePaths {
			finished = string(e.Status) + ": " + e.Message
		}
	}
	if !strings.HasPrefix(finished, string(events.StatusOK)+": ") || !strings.Contains(finished, "paths ok") {
		t.Fatalf("path check over Dropbear: %q, want every path ok", finished)
	}
	probes := map[string]int{}
	for _, e := range r.ofType(events.Debug) {
		if strings.Contains(e.Message, "<path check (") {
			probes[e.Host]++
		}
	}
	if probes["cp1"] != 4 || probes["a1"] != 4 {
		t.Errorf("--verbose showed %v path check commands, want 4 per host (start, hand over, read, read and stop)", probes)
	}
	for i := range 2 {
		if left := c.exec(i, "sh", "-c", "ls -d /run/k3strap-probe.* 2>/dev/null; true"); strings.TrimSpace(left) != "" {
			t.Errorf("host %d: run directories left: %s", i, left)
		}
	}
	if r.code != 0 {
		t.Errorf("preflight exited %d", r.code)
	}
}
