// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/events"
)

// k3sProcess is the supervised K3s of an OpenRC host (the child of supervise-daemon, whose pid
// is in /var/run/UNIT.pid) as "PID STARTTIME": a restart changes it. Empty when none runs.
func (c *testCluster) k3sProcess(i int, unit string) string {
	c.t.Helper()
	return c.exec(i, "sh", "-c", `sup=$(cat /var/run/$1.pid 2>/dev/null) || exit 0
		for p in $(pgrep -P "$sup"); do echo "$p $(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f20)"; done`, "sh", unit)
}

// TestRealOpenRC (real K3s): one server on a Debian host booted by sysvinit with OpenRC as its
// rc and no systemd installed (harness.KindOpenRC), the README's "systemd or OpenRC":
//   - the host is what it claims: PID 1 is sysvinit's init, /sbin/openrc-run exists, no
//     systemctl, sshd started by OpenRC;
//   - `apply` exits 0 with the official install.sh's OpenRC path: /etc/init.d/k3s written, k3s in
//     the default runlevel, the service started (rc-service status), the node Ready;
//   - an immediate re-run is `unchanged` and restarts nothing (the supervised K3s keeps its pid
//     and start time);
//   - `doctor` exits 0 and judges the OpenRC service: it reports no finding that says K3s is not
//     installed or not running; with the service stopped (rc-service k3s stop) it exits non-zero
//     naming cp1;
//   - `reset` (of the stopped service) leaves no binary, init script, runlevel entry, data directory or K3s process.
func TestRealOpenRC(t *testing.T) {
	c := newRealClusterOpts(t, 1, clusterOpts{kind: harness.KindOpenRC})
	got := c.exec(0, "sh", "-c", `cat /proc/1/comm; test -x /sbin/openrc-run && echo openrc-run
		command -v systemctl || echo no-systemctl; rc-service ssh status >/dev/null 2>&1 && echo ssh-started`)
	if got != "init\nopenrc-run\nno-systemctl\nssh-started" {
		t.Fatalf("h%d is not a sysvinit + OpenRC host without systemd with sshd under OpenRC: %q", c.hosts[0].Index, got)
	}
	c.writeInventory(realSingleServer, nil)

	r := c.k3strap(5*time.Minute, "apply", "--kubeconfig-out", c.dir+"/real.kubeconfig")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	t.Logf("apply on OpenRC: %s", r.duration.Round(time.Second))
	state := c.exec(0, "sh", "-c", `test -x /etc/init.d/k3s && echo init-script
		rc-update show default | grep -qw k3s && echo in-default
		rc-service k3s status >/dev/null 2>&1 && echo started`)
	if state != "init-script\nin-default\nstarted" {
		t.Errorf("after apply: %q, want the init script, k3s in the default runlevel and started", state)
	}
	if n, ok := c.realNodes(0)["cp1"]; !ok || !nodeReady(n) {
		t.Fatalf("node cp1 not Ready (present %v)", ok)
	}

	before := c.k3sProcess(0, "k3s")
	if before == "" {
		t.Fatal("no K3s process under supervise-daemon")
	}
	r2 := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", c.dir+"/real.kubeconfig")
	defer r2.dump(t)
	if r2.code != 0 {
		t.Fatalf("re-run exited %d", r2.code)
	}
	for _, h := range r2.summary(t).Hosts {
		if h.Status != events.StatusUnchanged {
			t.Errorf("re-run: %s %s (%s), want unchanged", h.Host, h.Status, h.Message)
		}
	}
	if after := c.k3sProcess(0, "k3s"); after != before {
		t.Errorf("re-run restarted K3s: %q -> %q", before, after)
	}

	d := c.k3strap(3*time.Minute, "doctor")
	defer d.dump(t)
	if d.code != 0 {
		t.Errorf("doctor on the healthy OpenRC host exited %d, findings %v", d.code, keys(d.findings()))
	}
	c.exec(0, "rc-service", "k3s", "stop")
	d2 := c.k3strap(3*time.Minute, "doctor")
	defer d2.dump(t)
	// The service state doctor read from OpenRC is evidence of a finding on cp1 (without the
	// OpenRC facts doctor finds no K3s service on the node and judges nothing of it).
	stopped := false
	for k, f := range d2.findings() {
		t.Logf("doctor with K3s stopped: %s: %s", k, f.Message)
		for _, e := range f.Evidence {
			stopped = stopped || (f.Node == "cp1" && strings.Contains(e.Text, "k3s is inactive/dead"))
		}
	}
	if d2.code == 0 || !stopped {
		t.Errorf("doctor with the OpenRC service stopped exited %d, cp1's service state as evidence: %v; want a non-zero exit with it", d2.code, stopped)
	}

	rs := c.k3strap(5*time.Minute, "reset", "--yes")
	defer rs.dump(t)
	if rs.code != 0 {
		t.Fatalf("reset exited %d", rs.code)
	}
	left := c.exec(0, "sh", "-c", `for p in /usr/local/bin/k3s /etc/init.d/k3s /var/lib/rancher/k3s /etc/rancher/k3s /run/flannel /var/lib/kubelet; do
			[ -e "$p" ] && echo "$p"; done
		rc-update show | awk '$1 == "k3s" || $1 == "k3s-agent"'
		pgrep -l -f '[k]3s (server|agent)|[c]ontainerd-shim' || true`)
	if left != "" {
		t.Errorf("after reset still there:\n%s", left)
	}
}
