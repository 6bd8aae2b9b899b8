// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// handInstallReal installs the real K3s on host i as an operator following the K3s docs would,
// without k3strap: the binary as /usr/local/bin/k3s, the airgap images archive in
// /var/lib/rancher/k3s/agent/images/ (the stand-in images), config.yaml, then the official install.sh
// with INSTALL_K3S_SKIP_DOWNLOAD=true and the given environment (INSTALL_K3S_EXEC, K3S_URL,
// K3S_TOKEN, ...) and INSTALL_K3S_SKIP_START, after which the unit is started with --no-block:
// the script's own start would wait for K3s's READY (for an agent up to minutes).
func (c *testCluster) handInstallReal(i int, config string, env ...string) {
	c.t.Helper()
	if c.real == nil {
		c.t.Fatal("handInstallReal needs a real-lane cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	idx := c.hosts[i].Index
	bin, err := os.ReadFile(c.real.Binary)
	if err != nil {
		c.t.Fatal(err)
	}
	script, err := os.ReadFile(c.real.InstallSh)
	if err != nil {
		c.t.Fatal(err)
	}
	images, err := os.ReadFile(c.real.Images)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{"/usr/local/bin/k3s", bin, 0o755}, {"/root/install.sh", script, 0o755}, {"/etc/rancher/k3s/config.yaml", []byte(config), 0o600},
		{"/var/lib/rancher/k3s/agent/images/" + filepath.Base(c.real.Images), images, 0o644}} {
		if err := c.h.WriteFile(ctx, idx, f.path, f.data, f.mode); err != nil {
			c.t.Fatalf("%s: writing %s: %v", c.hosts[i].Name, f.path, err)
		}
	}
	cmd := strings.Join(append(append([]string{"INSTALL_K3S_SKIP_DOWNLOAD=true", "INSTALL_K3S_SKIP_START=true"}, env...), "sh /root/install.sh >/dev/null"), " ")
	unit := "k3s"
	if strings.Contains(cmd, "K3S_URL=") {
		unit = "k3s-agent"
	}
	if out, err := c.h.Exec(ctx, idx, "sh", "-c", cmd+" && systemctl start --no-block "+unit); err != nil {
		c.t.Fatalf("%s: official install.sh: %v\n%s", c.hosts[i].Name, err, out)
	}
}

// waitNodeFor waits up to d until host 0's kubectl shows node name (Ready when ready).
func (c *testCluster) waitNodeFor(name string, ready bool, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.h.Exec(ctx, c.hosts[0].Index, "/usr/local/bin/k3s", "kubectl", "get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		cancel()
		if err == nil && (!ready || strings.TrimSpace(string(out)) == "True") {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.t.Fatalf("node %s not there (ready=%v) within %s", name, ready, d)
}

// TestRealDoctorHandInstalled (real K3s): `doctor --ssh` on a cluster installed by hand with the
// official install.sh, not by k3strap — a server with F1 (embedded cloud controller off, the
// kubelet told cloud-provider=external) and an agent that registered with a taint which was then
// removed.
//   - at once (the taint younger than the grace): no error about the taint, but doctor says it
//     is there and since when; an agent that has not yet sent READY to systemd (activating, no
//     restarts) is not a crash loop;
//   - after the grace: F1 as an error, evidence the node's arguments and the K3s journal; the
//     lost registration taint (F5) found from the node's k3s.io/node-args; exit 8;
//   - repaired (embedded cloud controller back, server restarted, the taint put back): healthy,
//     exit 0, and no finding contradicts what the same run read on the hosts (no "no pod
//     network" from the pods' old sandbox events once subnet.env exists).
func TestRealDoctorHandInstalled(t *testing.T) {
	c := newRealCluster(t, 2)
	h1, h2 := c.hosts[0], c.hosts[1]
	serverF1 := "disable:\n  - traefik\ndisable-cloud-controller: true\nkubelet-arg:\n  - fail-cgroupv1=false\n  - cloud-provider=external\n"
	c.handInstallReal(0, serverF1)
	c.waitNodeFor(h1.Name, false, 3*time.Minute)
	token := c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")
	c.handInstallReal(1, "kubelet-arg:\n  - fail-cgroupv1=false\nnode-taint:\n  - gpu=true:NoSchedule\n",
		"K3S_URL=https://"+h1.Address+":6443", "K3S_TOKEN="+token)
	c.waitNodeFor(h2.Name, false, 3*time.Minute)
	c.kubectl("", "taint", "nodes", h2.Name, "gpu-")

	doctor := func(extra ...string) run {
		args := append([]string{"doctor", "--ssh", "root@" + h1.Address, "--ssh-key-path", c.h.KeyPath(),
			"--ssh-known-hosts", filepath.Join(c.dir, "known_hosts"), "-f", ""}, extra...)
		return c.k3strap(3*time.Minute, args...)
	}

	// Inside the grace.
	r0 := doctor("--stall-grace", "10m")
	defer r0.dump(t)
	f0 := r0.findings()
	for key, f := range f0 {
		if f.ID == "crash-loop" {
			t.Errorf("inside the grace: %s: %s", key, f.Message)
		}
		if strings.HasPrefix(f.ID, "F1") && f.Severity == "error" {
			t.Errorf("inside the grace the taint is reported as an error: %s", key)
		}
	}
	young, ok := f0["uninitialized-taint@"+h1.Name]
	if !ok {
		t.Errorf("inside the grace: no finding says the uninitialized taint is on %s (have %v)", h1.Name, keys(f0))
	} else if young.Severity != "info" || !strings.Contains(young.Message, "since") {
		t.Errorf("inside the grace: %s %q, want an info saying since when", young.Severity, young.Message)
	}

	// After the grace. Under F1 the real K3s's flannel still writes subnet.env once the node
	// has its PodCIDR (13 s after start, measured; longer on a loaded machine): until then
	// pods on the node rightly show no pod network, which is not what this step judges (seen
	// once in CI: doctor ran before h1's and h2's flannel had started).
	c.waitFile(0, "/run/flannel/subnet.env")
	c.waitFile(1, "/run/flannel/subnet.env")
	r1 := doctor("--stall-grace", "1s")
	defer r1.dump(t)
	if r1.code != 8 {
		t.Errorf("doctor on F1 exited %d, want 8", r1.code)
	}
	f1 := r1.findings()
	f1e, ok := f1["F1-cloud-controller@"+h1.Name]
	if !ok {
		t.Fatalf("no F1-cloud-controller finding on %s (have %v)", h1.Name, keys(f1))
	}
	// Evidence: the kubelet's cloud-provider as K3s ran it (its command line in the journal) and
	// the disabled cloud controller from the node's arguments.
	var kubelet, ccm bool
	for _, e := range f1e.Evidence {
		kubelet = kubelet || (strings.Contains(e.Text, `cloud-provider="external"`) && strings.Contains(e.Text, "Running kubelet") && strings.Contains(e.Source, "journalctl -u k3s"))
		ccm = ccm || (strings.Contains(e.Text, "disable-cloud-controller: true") && strings.Contains(e.Source, "k3s.io/node-args"))
	}
	if !kubelet || !ccm {
		t.Errorf("F1 evidence lacks the kubelet's command line from the K3s journal (%v) or the node's k3s.io/node-args (%v): %+v", kubelet, ccm, f1e.Evidence)
	}
	if _, ok := f1["F5-lost-taint@"+h2.Name]; !ok {
		t.Errorf("no F5-lost-taint on %s (have %v)", h2.Name, keys(f1))
	}
	for key, f := range f1 {
		if f.ID == "crash-loop" || f.ID == "no-pod-network" {
			t.Errorf("F1 cluster: %s: %s; evidence %+v", key, f.Message, f.Evidence)
		}
	}

	// Repair: embedded cloud controller back, server restarted, the taint put back.
	c.exec(0, "sh", "-c", "printf 'disable:\\n  - traefik\\nkubelet-arg:\\n  - fail-cgroupv1=false\\n' > /etc/rancher/k3s/config.yaml && systemctl restart k3s")
	c.kubectl("", "taint", "nodes", h2.Name, "gpu=true:NoSchedule")
	c.waitTaintGone(h1.Name, 3*time.Minute)
	c.waitTaintGone(h2.Name, 3*time.Minute)
	c.waitFile(1, "/run/flannel/subnet.env")
	r2 := doctor()
	defer r2.dump(t)
	if r2.code != 0 {
		t.Errorf("doctor on the repaired cluster exited %d, want 0; findings %v", r2.code, keys(r2.findings()))
	}
	for _, e := range r2.ofType(events.DoctorFindingType) {
		t.Logf("repaired cluster: %s %s@%s: %s; evidence %+v", e.Doctor.Severity, e.Doctor.ID, e.Doctor.Node, e.Doctor.Message, e.Doctor.Evidence)
	}
}

// waitTaintGone waits until node name carries no uninitialized taint.
func (c *testCluster) waitTaintGone(name string, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.h.Exec(ctx, c.hosts[0].Index, "/usr/local/bin/k3s", "kubectl", "get", "node", name, "-o", "jsonpath={.spec.taints}")
		cancel()
		if err == nil && !strings.Contains(string(out), "uninitialized") {
			return
		}
		time.Sleep(time.Second)
	}
	c.t.Fatalf("%s keeps the uninitialized taint after %s", name, d)
}
