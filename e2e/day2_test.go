// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// day2Inv is an inventory whose hosts are .Extra.hosts ("name index role" lines: host index
// into the test's hosts).
const day2Inv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: day2
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
{{template "ssh-root" .}}
  hosts:
{{.Extra.hosts}}`

// day2Hosts renders the hosts block: each entry "name:index:role[:dedicated]".
func (c *testCluster) day2Hosts(entries ...string) map[string]any {
	var b strings.Builder
	for _, e := range entries {
		p := strings.Split(e, ":")
		var idx int
		fmt.Sscan(p[1], &idx)
		fmt.Fprintf(&b, "    - name: %s\n      address: %s\n      role: %s\n", p[0], c.hosts[idx].Address, p[2])
		if len(p) > 3 {
			fmt.Fprintf(&b, "      dedicated: %s\n", p[3])
		}
	}
	return map[string]any{"hosts": b.String()}
}

// nodeList returns "name:Ready:etcd-role:control-plane-role:address " for every node, through
// host i's kubectl.
func (c *testCluster) nodeList(i int) string {
	return c.exec(i, "k3s", "kubectl", "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name}:{.status.conditions[?(@.type=="Ready")].status}:{.metadata.labels.node-role\.kubernetes\.io/etcd}:{.metadata.labels.node-role\.kubernetes\.io/control-plane}:{.status.addresses[0].address} {end}`)
}

func certNotAfter(t *testing.T, c *testCluster, i int, path string) time.Time {
	t.Helper()
	block, _ := pem.Decode([]byte(c.exec(i, "cat", path)))
	if block == nil {
		t.Fatalf("%s on host %d: no PEM", path, i)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.NotAfter
}

// TestDay2: one HA cluster (3 servers, one of them etcd-only, a control-plane-only server, an
// agent and a spare host) goes through backup (copied to
// the workstation), a change, restore (the change is gone, every node Ready), certificate
// rotation (new expiry dates), token rotation (the old token no longer joins), replacing a
// server by a new machine in one apply, removing a server refused while another is down, and
// apply reporting then --prune removing a server that left the inventory.
func TestDay2(t *testing.T) {
	c := newCluster(t, 6)
	c.writeInventory(day2Inv, c.day2Hosts("cp1:0:server", "cp2:1:server:etcd", "cp3:2:server", "cp4:5:server:control-plane", "a1:3:agent"))
	r := c.k3strap(6*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	// Dedicated roles: cp2 is an etcd member without the control plane, cp4 the reverse.
	nodes := c.nodeList(0)
	for _, n := range []string{"cp1:True:true:true:", "cp2:True:true::", "cp3:True:true:true:", "cp4:True::true:", "a1:True:::"} {
		if !strings.Contains(nodes, n) {
			t.Errorf("after apply nodes %q lack %q", nodes, n)
		}
	}
	if cfg := c.exec(1, "cat", "/etc/rancher/k3s/config.yaml"); !strings.Contains(cfg, "disable-apiserver: true") || !strings.Contains(c.exec(5, "cat", "/etc/rancher/k3s/config.yaml"), "disable-etcd: true") {
		t.Errorf("dedicated roles not rendered; cp2:\n%s", cfg)
	}

	// Backup, copied to the workstation.
	to := filepath.Join(c.dir, "backups")
	r = c.k3strap(2*time.Minute, "backup", "--name", "before", "--to", to)
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("backup exited %d", r.code)
	}
	entries, _ := os.ReadDir(to)
	var snap string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "before-cp1-") && !strings.Contains(e.Name(), ".") {
			snap = e.Name()
		}
	}
	if snap == "" {
		t.Fatalf("no snapshot copied to %s: %v", to, entries)
	}
	for _, f := range []string{snap, snap + ".token", snap + ".sha256"} {
		fi, err := os.Stat(filepath.Join(to, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v mode %v, want 0600", f, err, fi.Mode().Perm())
		}
	}
	data, _ := os.ReadFile(filepath.Join(to, snap))
	sum := sha256.Sum256(data)
	if sums, _ := os.ReadFile(filepath.Join(to, snap+".sha256")); !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+snap) {
		t.Errorf("sha256 file %q does not match the copy", sums)
	}
	if tok, _ := os.ReadFile(filepath.Join(to, snap+".token")); strings.Contains(r.stdout+r.stderr, strings.TrimSpace(string(tok))) {
		t.Error("the token appeared in backup's output")
	}
	r = c.k3strap(time.Minute, "backup", "list")
	defer r.dump(t)
	if r.code != 0 || !strings.Contains(r.stdout, snap) {
		t.Errorf("backup list: exit %d, %s not listed", r.code, snap)
	}

	// A change after the snapshot, then restore: the change is gone, every node Ready. The
	// first attempt is interrupted while cp2 rejoins; the re-run — from the copy on this
	// machine, the one on cp1 deleted meanwhile — uploads it and picks up without resetting the
	// first server again.
	c.exec(0, "k3s", "kubectl", "create", "namespace", "after-backup")
	a := c.start(6*time.Minute, "restore", "--snapshot", snap, "--yes")
	a.waitFor(t, 5*time.Minute, "cp2's etcd data moved aside", func(e events.Event) bool {
		return e.Phase == events.PhaseRejoinServers && e.Host == "cp2" && e.Step == "db"
	})
	if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r = a.wait(t); r.code != 130 {
		t.Errorf("interrupted restore exited %d, want 130", r.code)
	}
	c.exec(0, "rm", "/var/lib/rancher/k3s/server/db/snapshots/"+snap)
	r = c.k3strap(6*time.Minute, "restore", "--snapshot", filepath.Join(to, snap), "--yes")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("resumed restore exited %d", r.code)
	}
	if firstIndex(r, isHost("cp1", events.HostStep, "upload")) < 0 {
		t.Error("the local copy was not uploaded")
	}
	if !strings.Contains(r.stdout, "resuming the restore") || firstIndex(r, func(e events.Event) bool {
		return e.Phase == events.PhaseClusterReset && e.Step == "cluster-reset" && e.Status == events.StatusChanged
	}) >= 0 {
		t.Error("the re-run did not resume: the first server was reset again")
	}
	if ns := c.exec(0, "k3s", "kubectl", "get", "namespaces", "-o", "name"); strings.Contains(ns, "after-backup") {
		t.Errorf("after the restore the namespace created after the snapshot is still there: %s", ns)
	}
	nodes = c.nodeList(0)
	for _, n := range []string{"cp1:True:true:true:", "cp2:True:true::", "cp3:True:true:true:", "cp4:True::true:", "a1:True:::"} {
		if !strings.Contains(nodes, n) {
			t.Errorf("after the restore nodes %q lack %q", nodes, n)
		}
	}
	if out := c.exec(1, "sh", "-c", "ls -d /var/lib/rancher/k3s/server/db-k3strap-restore-*"); !strings.Contains(out, "db-k3strap-restore-") {
		t.Errorf("cp2's etcd data was not moved aside: %s", out)
	}

	// Certificate rotation: every node Ready, servers' certificates with new expiry dates.
	before := map[int]time.Time{}
	for _, i := range []int{0, 1, 2, 5} {
		before[i] = certNotAfter(t, c, i, "/var/lib/rancher/k3s/server/tls/client-admin.crt")
	}
	time.Sleep(1100 * time.Millisecond)
	r = c.k3strap(6*time.Minute, "rotate", "certificates")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("rotate certificates exited %d", r.code)
	}
	for _, i := range []int{0, 1, 2, 5} {
		if after := certNotAfter(t, c, i, "/var/lib/rancher/k3s/server/tls/client-admin.crt"); !after.After(before[i]) {
			t.Errorf("host %d: certificate expiry %s not after %s", i, after, before[i])
		}
	}
	if nodes := c.nodeList(0); strings.Count(nodes, ":True:") != 5 {
		t.Errorf("after certificate rotation: %q, want 5 Ready nodes", nodes)
	}

	// Token rotation: every node Ready, the old token no longer joins, the new one never shown.
	// Its dry-run (and restore's) changes nothing.
	oldTok := strings.TrimSpace(c.exec(0, "cat", "/var/lib/rancher/k3s/server/token"))
	for _, args := range [][]string{{"rotate", "token", "--dry-run"}, {"restore", "--snapshot", snap, "--dry-run"}} {
		if r = c.k3strap(time.Minute, args...); r.code != 0 || strings.TrimSpace(c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")) != oldTok {
			t.Errorf("%v: exit %d or the token changed", args, r.code)
		}
	}
	if ns := c.exec(0, "k3s", "kubectl", "get", "namespaces", "-o", "name"); !strings.Contains(ns, "namespace/default") {
		t.Errorf("after the dry-runs: %s", ns)
	}
	r = c.k3strap(6*time.Minute, "rotate", "token")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("rotate token exited %d", r.code)
	}
	newTok := strings.TrimSpace(c.exec(0, "cat", "/var/lib/rancher/k3s/server/token"))
	if newTok == oldTok {
		t.Fatal("the server token did not change")
	}
	pw := newTok[strings.LastIndex(newTok, ":")+1:]
	if strings.Contains(r.stdout+r.stderr, pw) {
		t.Error("the new token appeared in rotate token's output")
	}
	if got := c.exec(3, "cat", "/etc/rancher/k3s/cluster-token"); !strings.Contains(got, pw) {
		t.Error("a1's token file does not hold the new token")
	}
	if nodes := c.nodeList(0); strings.Count(nodes, ":True:") != 5 {
		t.Errorf("after token rotation: %q, want 5 Ready nodes", nodes)
	}
	probe := c.exec(3, "sh", "-c", "touch /tmp/probe.yaml; timeout 20 k3s agent --config /tmp/probe.yaml --server https://"+c.hosts[0].Address+":6443 --token '"+oldTok+"' --data-dir /tmp/probe --node-name probe 2>&1; echo exit=$?")
	if !strings.Contains(probe, "401") || strings.Contains(probe, "exit=0") {
		t.Errorf("joining with the old token was not refused:\n%s", probe)
	}

	// Replacing a server: cp3's machine dies, a new machine (host 4) takes its name.
	c.exec(2, "systemctl", "stop", "k3s")
	c.writeInventory(day2Inv, c.day2Hosts("cp1:0:server", "cp2:1:server:etcd", "cp3:4:server", "cp4:5:server:control-plane", "a1:3:agent"))
	r = c.k3strap(6*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply replacing cp3 exited %d", r.code)
	}
	if nodes := c.nodeList(0); !strings.Contains(nodes, "cp3:True:true:true:"+c.hosts[4].Address) {
		t.Errorf("cp3 not replaced by the new machine: %q", nodes)
	}

	// Removing a server while another is down is refused: no live majority would remain.
	c.exec(1, "systemctl", "stop", "k3s")
	r = c.k3strap(2*time.Minute, "remove-node", "cp3", "--yes")
	defer r.dump(t)
	if r.code != 4 || !strings.Contains(r.stdout, "no live majority") {
		t.Errorf("remove-node with cp2 down: exit %d, want 4 naming the missing majority", r.code)
	}
	if nodes := c.nodeList(0); !strings.Contains(nodes, "cp3:") {
		t.Errorf("cp3 was removed although refused: %q", nodes)
	}
	c.exec(1, "systemctl", "start", "k3s")

	// cp3 leaves the inventory: apply reports it and changes nothing; --prune removes it.
	c.writeInventory(day2Inv, c.day2Hosts("cp1:0:server", "cp2:1:server:etcd", "cp4:5:server:control-plane", "a1:3:agent"))
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 || !strings.Contains(r.stdout, "cp3 is a node of the cluster but not in the inventory") {
		t.Errorf("apply without cp3: exit %d, cp3 not reported", r.code)
	}
	if nodes := c.nodeList(0); !strings.Contains(nodes, "cp3:") {
		t.Errorf("apply without --prune removed cp3: %q", nodes)
	}
	r = c.k3strap(4*time.Minute, "apply", "--prune")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply --prune exited %d", r.code)
	}
	nodes = c.nodeList(0)
	if strings.Contains(nodes, "cp3:") || strings.Count(nodes, ":True:true:") != 2 || strings.Count(nodes, ":True:") != 4 {
		t.Errorf("after --prune: %q, want cp1, cp2 (etcd members), cp4 and a1, all Ready", nodes)
	}
	if out := c.exec(4, "sh", "-c", "ls /usr/local/bin/k3s 2>&1; systemctl is-active k3s || true"); !strings.Contains(out, "No such file") {
		t.Errorf("K3s not uninstalled on cp3's host:\n%s", out)
	}
	c.exec(0, "k3s", "kubectl", "create", "namespace", "after-prune")

	// A single server runs SQLite: backup is refused, saying why (exit 2).
	c.writeInventory(day2Inv, c.day2Hosts("solo:4:server"))
	if r = c.k3strap(4*time.Minute, "apply"); r.code != 0 {
		t.Fatalf("single-server apply exited %d", r.code)
	}
	r = c.k3strap(time.Minute, "backup")
	defer r.dump(t)
	if r.code != 2 || !strings.Contains(r.stdout, "has no embedded etcd") {
		t.Errorf("backup of a single server: exit %d, want 2 saying it has no embedded etcd", r.code)
	}
}
