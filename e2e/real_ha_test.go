// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// realHA is the real lane's HA cluster: three servers with embedded etcd and an agent, all
// registering through apiEndpoint (a name the hosts' /etc/hosts points at cp1, as a DNS record
// would), with an empty airgap images archive (Extra.images, checksummed in Extra.checksums);
// Extra.hosts from day2Hosts: cp1, cp2, cp3 on hosts 0-2, a1 on host 3.
const realHA = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: realha
spec:
  k3s:
{{template "k3s-real" .}}
    apiEndpoint:
      address: k3s-api.e2e
    config:
{{template "k3s-real-config" .}}
{{template "ssh-root" .}}
  hosts:
{{.Extra.hosts}}`

// etcdMember is one member of `k3s kubectl get --raw /db/info` (K3s's etcd member list).
type etcdMember struct {
	ID       uint64   `json:"ID"`
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

// etcdMembers reads the etcd member list through host i's K3s (GET /db/info, the list a
// joining server reads), sorted by name.
func (c *testCluster) etcdMembers(i int) []etcdMember {
	c.t.Helper()
	out := c.exec(i, "k3s", "kubectl", "get", "--raw", "/db/info")
	var info struct {
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		c.t.Fatalf("decoding /db/info %q: %v", out, err)
	}
	slices.SortFunc(info.Members, func(a, b etcdMember) int { return strings.Compare(a.Name, b.Name) })
	return info.Members
}

// wantMembers checks that the etcd members are exactly those of the given hosts of realHA
// (host i is server cp<i+1>): K3s names a member <node>-<hex> and it peers on
// https://<address>:2380.
func (c *testCluster) wantMembers(t *testing.T, when string, members []etcdMember, hosts ...int) {
	t.Helper()
	var got, want []string
	for _, m := range members {
		got = append(got, m.Name[:strings.LastIndex(m.Name, "-")]+" "+strings.Join(m.PeerURLs, ","))
	}
	for _, i := range hosts {
		want = append(want, fmt.Sprintf("cp%d https://%s:2380", i+1, c.hosts[i].Address))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: etcd members %v, want %v", when, got, want)
	}
}

// readyOf is a node's Ready status and the heartbeat it came with.
func readyOf(n corev1.Node) (corev1.ConditionStatus, time.Time) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status, cond.LastHeartbeatTime.Time
		}
	}
	return corev1.ConditionUnknown, time.Time{}
}

// TestRealHA (real K3s): the day-two commands and a fixed registration address on one HA
// cluster of three servers with embedded etcd and an agent, judged by what K3s says (the etcd
// member list from /db/info, nodes and leases through `k3s kubectl`, files, systemd):
//   - apply: every node Ready, 3 etcd members; the empty images archive is on every host;
//   - backup --name bar1 twice (a namespace created between them) and --to: the saved name
//     is bar1-cp1-<time>, backup's summary gives the exact restore command;
//   - a namespace created after the backups, then restore --snapshot bar1: the newest bar1 is
//     taken (the namespace between the two backups is back, the one after is gone), and all
//     three servers are Ready etcd members again, under new member IDs;
//   - rotate certificates: new expiry dates on the servers and the agent, nodes Ready;
//   - rotate token: the token files hold the new token, a join with the old one is refused
//     (a real `k3s agent` is "not authorized"), nodes Ready;
//   - apiEndpoint: cp1 (the first server, which the endpoint names) stops: the agent's own
//     load balancer moves to another server, its lease keeps being renewed and it stays Ready
//     while the node controller marks cp1 not Ready; cp1 comes back;
//   - remove-node cp3: two etcd members are left, cp3's host has no K3s.
func TestRealHA(t *testing.T) {
	c := newRealCluster(t, 4)
	images := filepath.Join(c.dir, "k3s-airgap-images-amd64.tar")
	sums := filepath.Join(c.dir, "sha256sum-amd64.txt")
	release, err := os.ReadFile(c.real.Checksums)
	if err != nil {
		t.Fatalf("the lane needs the release's checksums beside K3S_BINARY: %v", err)
	}
	if err := os.WriteFile(images, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// sha256 of nothing: the empty archive, listed as a release lists its images.
	if err := os.WriteFile(sums, append(release, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  k3s-airgap-images-amd64.tar\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := c.day2Hosts("cp1:0:server", "cp2:1:server", "cp3:2:server", "a1:3:agent")
	extra["images"], extra["checksums"] = images, sums
	c.writeInventory(realHA, extra)
	for i := range 4 {
		c.exec(i, "sh", "-c", "echo '"+c.hosts[0].Address+" k3s-api.e2e' >> /etc/hosts")
	}
	took := map[string]time.Duration{}
	timed := func(what string, r run) run {
		took[what] = r.duration
		return r
	}
	defer func() {
		var b strings.Builder
		for _, k := range []string{"apply", "backup", "restore", "rotate certificates", "rotate token", "failover", "remove-node"} {
			fmt.Fprintf(&b, " %s %s;", k, took[k].Round(100*time.Millisecond))
		}
		t.Logf("durations:%s", b.String())
	}()

	r := timed("apply", c.k3strap(15*time.Minute, "apply"))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	nodes := c.realNodes(0)
	for _, n := range []string{"cp1", "cp2", "cp3", "a1"} {
		if st, _ := readyOf(nodes[n]); st != corev1.ConditionTrue {
			t.Errorf("after apply %s is %s (nodes %v)", n, st, keys(nodes))
		}
	}
	c.wantMembers(t, "after apply", c.etcdMembers(0), 0, 1, 2)
	for i, h := range c.hosts {
		if got := c.exec(i, "stat", "-c", "%s %a", "/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar"); got != "0 644" {
			t.Errorf("%s: the empty images archive is %q, want size 0 mode 644", h.Name, got)
		}
		if cfg := c.exec(i, "cat", "/etc/rancher/k3s/config.yaml"); i > 0 && !strings.Contains(cfg, "server: https://k3s-api.e2e:6443") {
			t.Errorf("%s does not register through the endpoint:\n%s", h.Name, cfg)
		}
	}

	// Two backups named bar1, a namespace between them and one after them.
	to := filepath.Join(c.dir, "backups")
	older := c.k3strap(2*time.Minute, "backup", "--name", "bar1")
	defer older.dump(t)
	if older.code != 0 {
		t.Fatalf("first backup exited %d", older.code)
	}
	c.exec(0, "k3s", "kubectl", "create", "namespace", "between-backups")
	// K3s names a snapshot <name>-<node>-<time rounded to the second> (pkg/etcd/snapshot.go:
	// time.Now().Round(time.Second)): a second save of the same name less than a second
	// later may get the same name and replace the first (docs/day2.md).
	time.Sleep(time.Second)
	r = timed("backup", c.k3strap(2*time.Minute, "backup", "--name", "bar1", "--to", to))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("backup exited %d", r.code)
	}
	saved := strings.Fields(c.exec(0, "ls", "-1t", "/var/lib/rancher/k3s/server/db/snapshots"))
	if len(saved) != 2 || !regexp.MustCompile(`^bar1-cp1-\d+$`).MatchString(saved[0]) || !strings.HasPrefix(saved[1], "bar1-cp1-") || saved[0] == saved[1] {
		t.Fatalf("snapshots on cp1 %v, want two bar1-cp1-<time>", saved)
	}
	newest := saved[0]
	if next := strings.Join(r.summary(t).Next, "\n"); !strings.Contains(next, "k3strap restore -f "+c.inv+" --snapshot "+newest) ||
		!strings.Contains(next, "--snapshot "+filepath.Join(to, newest)) {
		t.Errorf("backup's summary does not give the restore commands for %s:\n%s", newest, next)
	}
	if fi, err := os.Stat(filepath.Join(to, newest)); err != nil || fi.Size() == 0 {
		t.Errorf("the copy of %s: %v", newest, err)
	}
	c.exec(0, "k3s", "kubectl", "create", "namespace", "after-backup")
	before := c.etcdMembers(0)

	// Restore by the name given to backup: the newest bar1.
	r = timed("restore", c.k3strap(15*time.Minute, "restore", "--snapshot", "bar1", "--yes"))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("restore --snapshot bar1 exited %d", r.code)
	}
	said := false
	for _, e := range r.ofType(events.Info) {
		if e.Host == "cp1" && strings.Contains(e.Message, "snapshot bar1: "+newest) && strings.Contains(e.Message, "the others: "+saved[1]) {
			said = true
		}
	}
	if !said {
		t.Errorf("restore did not say it took %s, the newest of two bar1 (the other %s)", newest, saved[1])
	}
	ns := c.exec(1, "k3s", "kubectl", "get", "namespaces", "-o", "name")
	if strings.Contains(ns, "after-backup") || !strings.Contains(ns, "between-backups") {
		t.Errorf("after restoring %s the namespaces are %q: want between-backups (in the newest bar1) and not after-backup", newest, ns)
	}
	after := c.etcdMembers(1)
	c.wantMembers(t, "after restore", after, 0, 1, 2)
	for _, m := range after {
		for _, b := range before {
			if m.ID == b.ID {
				t.Errorf("etcd member %s kept its ID %d across the restore: it did not rejoin", m.Name, m.ID)
			}
		}
	}
	c.wantAllReady(t, "after restore", 0, "cp1", "cp2", "cp3", "a1")

	// Certificate rotation: new leaf certificates on every node.
	certs := map[int]string{0: "/var/lib/rancher/k3s/server/tls/client-admin.crt", 1: "/var/lib/rancher/k3s/server/tls/client-admin.crt",
		2: "/var/lib/rancher/k3s/server/tls/client-admin.crt", 3: "/var/lib/rancher/k3s/agent/client-kubelet.crt"}
	notAfter := map[int]time.Time{}
	for i, p := range certs {
		notAfter[i] = certNotAfter(t, c, i, p)
	}
	r = timed("rotate certificates", c.k3strap(15*time.Minute, "rotate", "certificates"))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("rotate certificates exited %d", r.code)
	}
	for i, p := range certs {
		if na := certNotAfter(t, c, i, p); !na.After(notAfter[i]) {
			t.Errorf("%s: %s expires %s, not after %s: not rotated", c.hosts[i].Name, p, na, notAfter[i])
		}
	}
	c.wantAllReady(t, "after certificate rotation", 0, "cp1", "cp2", "cp3", "a1")

	// Token rotation; a join with the old token is refused by the real K3s.
	oldTok := c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")
	r = timed("rotate token", c.k3strap(15*time.Minute, "rotate", "token"))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("rotate token exited %d", r.code)
	}
	newTok := c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")
	pw := newTok[strings.LastIndex(newTok, ":")+1:]
	if newTok == oldTok || strings.Contains(r.stdout+r.stderr, pw) {
		t.Fatalf("the server token did not change, or the new one shows in rotate token's output")
	}
	for i, h := range c.hosts {
		if got := c.exec(i, "cat", "/etc/rancher/k3s/cluster-token"); !strings.HasSuffix(got, pw) {
			t.Errorf("%s's token file does not hold the new token", h.Name)
		}
	}
	c.wantAllReady(t, "after token rotation", 0, "cp1", "cp2", "cp3", "a1")
	probe := c.exec(3, "sh", "-c", `: > /tmp/probe.yaml
timeout 20 k3s agent --config /tmp/probe.yaml --server "https://$1:6443" --token "$2" --data-dir /tmp/probe --lb-server-port 36444 --node-name probe 2>&1 | grep -m1 -e 'not authorized' -e 'Running kubelet' -e 'level=fatal'
echo "exit=$?"`, "sh", c.hosts[0].Address, oldTok)
	if !strings.Contains(probe, "failed to retrieve configuration from server: not authorized") {
		t.Errorf("a join with the old token was not refused as unauthorized:\n%s", probe)
	}
	if nodes := c.realNodes(0); nodes["probe"].Name != "" {
		t.Error("the probe with the old token registered a node")
	}

	c.failover(t, took)

	// remove-node cp3: two etcd members left, nothing of K3s on cp3's host.
	r = timed("remove-node", c.k3strap(10*time.Minute, "remove-node", "cp3", "--yes"))
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("remove-node cp3 exited %d", r.code)
	}
	c.wantMembers(t, "after remove-node cp3", c.etcdMembers(0), 0, 1)
	if nodes := c.realNodes(1); nodes["cp3"].Name != "" || len(nodes) != 3 {
		t.Errorf("after remove-node cp3 the nodes are %v", keys(nodes))
	}
	if left := c.exec(2, "sh", "-c", `for p in /usr/local/bin/k3s /var/lib/rancher/k3s /etc/systemd/system/k3s.service; do [ -e "$p" ] && echo "$p"; done; true`); left != "" {
		t.Errorf("cp3's host still has:\n%s", left)
	}
}

// wantAllReady fails the test unless every named node is Ready through host i's kubectl.
func (c *testCluster) wantAllReady(t *testing.T, when string, i int, names ...string) {
	t.Helper()
	nodes := c.realNodes(i)
	for _, n := range names {
		if st, _ := readyOf(nodes[n]); st != corev1.ConditionTrue {
			t.Errorf("%s: node %s is %q (nodes: %v)", when, n, st, keys(nodes))
		}
	}
}

// activeRE is the agent load balancer's log line for the server it now sends everything to
// (k3s-io/k3s pkg/agent/loadbalancer: "Server ADDRESS@STATE->ACTIVE from ...").
var activeRE = regexp.MustCompile(`Server (\S+)@\S+->ACTIVE`)

// failover stops cp1, which apiEndpoint names, and checks that the agent keeps working
// through another server: its load balancer learnt every server, moves off cp1, its lease is
// renewed after the stop (read through cp2), and it is Ready once the node controller has
// marked cp1 not Ready; then cp1 starts again and is a Ready etcd member.
func (c *testCluster) failover(t *testing.T, took map[string]time.Duration) {
	t.Helper()
	start := time.Now()
	lb := c.exec(3, "cat", "/var/lib/rancher/k3s/agent/etc/k3s-agent-load-balancer.json")
	for i := range 3 {
		if !strings.Contains(lb, `"`+c.hosts[i].Address+`:6443"`) {
			t.Errorf("the agent's load balancer does not list %s:\n%s", c.hosts[i].Name, lb)
		}
	}
	var activeBefore string
	if m := activeRE.FindAllStringSubmatch(c.exec(3, "journalctl", "-u", "k3s-agent", "--no-pager", "-o", "cat"), -1); len(m) > 0 {
		activeBefore = m[len(m)-1][1]
	}
	stopped := c.stopHost(t, 0, 1)
	var last string
	ok := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && !ok; time.Sleep(2 * time.Second) {
		ectx, ecancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := c.h.Exec(ectx, c.hosts[1].Index, "sh", "-c", "k3s kubectl get nodes -o json && echo '---' && k3s kubectl get lease -n kube-node-lease a1 -o jsonpath='{.spec.renewTime}'")
		ecancel()
		nodesJSON, renew, found := strings.Cut(string(out), "\n---\n")
		var l corev1.NodeList
		if err != nil || !found || json.Unmarshal([]byte(nodesJSON), &l) != nil {
			last = fmt.Sprintf("reading through cp2: %v: %.300s", err, out)
			continue
		}
		st := map[string]corev1.ConditionStatus{}
		for _, n := range l.Items {
			st[n.Name], _ = readyOf(n)
		}
		rt, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(renew))
		last = fmt.Sprintf("cp1 %s, a1 %s, a1's lease renewed %s (cp1 stopped at %s)", st["cp1"], st["a1"], renew, time.Unix(stopped, 0).UTC().Format(time.RFC3339))
		ok = err == nil && st["cp1"] != corev1.ConditionTrue && st["a1"] == corev1.ConditionTrue && rt.Unix() > stopped
	}
	if !ok {
		t.Fatalf("a1 did not stay Ready through another server while cp1 was down; last: %s\na1's k3s-agent log:\n%s", last,
			c.exec(3, "sh", "-c", "journalctl -u k3s-agent --no-pager -o cat | grep -v '^[IW][0-9]' | tail -n 30"))
	}
	t.Logf("cp1 stopped; %s after: %s (the load balancer's active server before the stop: %s)", time.Since(start).Round(time.Second), last, activeBefore)
	if act := c.exec(3, "systemctl", "is-active", "k3s-agent"); act != "active" {
		t.Errorf("k3s-agent on a1 is %s while cp1 is down", act)
	}
	if activeBefore == c.hosts[0].Address+":6443" {
		m := activeRE.FindAllStringSubmatch(c.exec(3, "journalctl", "-u", "k3s-agent", "--no-pager", "-o", "cat", "--since", "@"+strconv.FormatInt(stopped-5, 10)), -1)
		if len(m) == 0 || m[len(m)-1][1] == activeBefore {
			t.Errorf("the agent's load balancer did not move off cp1 (%v)", m)
		}
	}
	took["failover"] = time.Since(start)

	// cp1 back: Ready from a heartbeat after its start, and an etcd member with the others.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.h.Start(ctx, c.hosts[0].Index); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(2 * time.Second) {
		ectx, ecancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := c.h.Exec(ectx, c.hosts[1].Index, "k3s", "kubectl", "get", "node", "cp1", "-o", "json")
		ecancel()
		var n corev1.Node
		if err == nil && json.Unmarshal(out, &n) == nil {
			if st, hb := readyOf(n); st == corev1.ConditionTrue && hb.Unix() > stopped {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cp1 not Ready again within 4 minutes of its start: %.300s", out)
		}
	}
	c.wantMembers(t, "cp1 back", c.etcdMembers(0), 0, 1, 2)
}

// stopHost powers host i off (gracefully, as a machine is shut down) and returns the time it
// was down by, in Unix seconds as host number clock tells it: a heartbeat read through that
// host with a later time came without host i.
func (c *testCluster) stopHost(t *testing.T, i, clock int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.h.Stop(ctx, c.hosts[i].Index); err != nil {
		t.Fatal(err)
	}
	at, err := strconv.ParseInt(c.exec(clock, "date", "+%s"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
