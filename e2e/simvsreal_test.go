// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// simVsRealTable is the heading of the table in e2e/k3ssim/README.md that TestSimVsReal keeps
// true.
const simVsRealTable = "## Simulator vs real K3s"

// simVsRealServer is one server and one agent with the official install.sh in both lanes, so
// that only the binary differs: the simulator's build (Extra.artifacts unset) or the real one
// (TestRealPods uses its real half too).
const simVsRealServer = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: cmp
spec:
  k3s:
{{- if .Real.Binary}}
{{template "k3s-real" .}}
{{- else}}
{{template "k3s-airgap" .}}
    airgapInstallScript: {{.Extra.installSh}}
{{- end}}
    config:
{{template "k3s-real-config" .}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
`

// TestSimVsReal runs the same 1 server + 1 agent apply on the simulator (at its real time scale, so
// that the milestones keep their real spacing) and on the real K3s, both through the official
// install.sh, and compares what k3strap and a user can observe — the milestones in the order
// k3strap reported them, the unit, the files K3s writes and their modes, the token's shape,
// the Node's providerID, label and annotation keys — with the table in e2e/k3ssim/README.md:
// every row must hold for both lanes, and every observation must have its row. A difference
// the simulator keeps is written in the table's last column with the reason.
func TestSimVsReal(t *testing.T) {
	r := requireRealK3s(t)
	table := readSimVsRealTable(t)

	sim := newCluster(t, 2)
	for i := range sim.hosts {
		sim.exec(i, "sh", "-c", "echo 'timeScale: 1' > /etc/k3ssim/sim.yaml")
	}
	sim.writeInventory(simVsRealServer, map[string]any{"installSh": r.InstallSh})
	simObs := observeServer(t, sim, "simulator")

	real := newRealCluster(t, 2)
	real.writeInventory(simVsRealServer, nil)
	realObs := observeServer(t, real, "real")

	for key, obs := range map[string]map[string]string{"real": realObs, "simulator": simObs} {
		for k, v := range obs {
			row, ok := table[k]
			if !ok {
				t.Errorf("observation %q has no row in %s (%s: %q)", k, simVsRealTable, key, v)
				continue
			}
			want := row.real
			if key == "simulator" {
				want = row.sim
				if want == "same" {
					want = row.real
				}
			}
			if v != want {
				t.Errorf("%s: %s is %q, the table says %q", key, k, v, want)
			}
		}
	}
	for k := range table {
		if _, ok := realObs[k]; !ok {
			t.Errorf("the table's row %q was not observed", k)
		}
	}
}

type simVsRealRow struct{ real, sim string }

// readSimVsRealTable reads the table under simVsRealTable: | observation | real | simulator |
// why |, cells in backquotes.
func readSimVsRealTable(t *testing.T) map[string]simVsRealRow {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "e2e", "k3ssim", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]simVsRealRow{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == simVsRealTable
		case in && strings.HasPrefix(l, "| `"):
			cells := strings.Split(strings.Trim(l, "|"), "|")
			if len(cells) < 3 {
				t.Fatalf("bad row %q", l)
			}
			cell := func(i int) string { return strings.Trim(strings.TrimSpace(cells[i]), "`") }
			rows[cell(0)] = simVsRealRow{real: cell(1), sim: cell(2)}
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no table under %q in e2e/k3ssim/README.md", simVsRealTable)
	}
	return rows
}

// observeServer applies c's inventory and returns what can be observed of its server cp1.
func observeServer(t *testing.T, c *testCluster, lane string) map[string]string {
	t.Helper()
	r := c.k3strap(5*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("%s: apply exited %d", lane, r.code)
	}
	var order []string
	for _, e := range r.ofType(events.Milestone) {
		order = append(order, e.Milestone.Name)
	}
	t.Logf("%s: milestones in the order reported: %v", lane, order)
	slices.Sort(order)
	obs := map[string]string{"milestones reached": strings.Join(order, " "), "milestone order": milestoneOrder(r)}
	sh := func(script string) string { return c.exec(0, "sh", "-c", script) }
	agent := func(script string) string { return c.exec(1, "sh", "-c", script) }
	// apply returns once the agent's node is Ready; its flannel writes subnet.env around then
	// (the real one just before, the simulator's 1.4 s after the PodCIDR): compare the file,
	// not its timing.
	c.waitFile(1, "/run/flannel/subnet.env")
	obs["agent unit after apply"] = agent("s=$(systemctl is-active k3s-agent); case $s in active|activating) echo running;; *) echo $s;; esac")
	obs["agent unit type"] = agent("systemctl show -p Type --value k3s-agent")
	obs["agent subnet.env network"] = agent("sed -n 's/^FLANNEL_NETWORK=//p' /run/flannel/subnet.env")
	obs["agent podCIDR"] = podCIDRShape(c.exec(0, "k3s", "kubectl", "get", "node", "a1", "-o", "jsonpath={.spec.podCIDR}"))
	obs["agent providerID"] = c.exec(0, "k3s", "kubectl", "get", "node", "a1", "-o", "jsonpath={.spec.providerID}")
	obs["agent server files"] = agent("ls /var/lib/rancher/k3s/server 2>&1 | head -1")
	obs["unit after apply"] = sh("systemctl is-active k3s; true")
	obs["unit type"] = sh("systemctl show -p Type --value k3s")
	obs["token mode"] = sh("stat -c %a /var/lib/rancher/k3s/server/token")
	obs["token shape"] = tokenShape(sh("cat /var/lib/rancher/k3s/server/token"))
	obs["node-token"] = sh("readlink /var/lib/rancher/k3s/server/node-token || echo not-a-link")
	obs["agent-token"] = sh("readlink /var/lib/rancher/k3s/server/agent-token || echo not-a-link")
	obs["k3s.yaml mode"] = sh("stat -c %a /etc/rancher/k3s/k3s.yaml")
	obs["k3s.yaml server"] = sh("sed -n 's/^ *server: //p' /etc/rancher/k3s/k3s.yaml")
	obs["subnet.env keys"] = sh("cut -d= -f1 /run/flannel/subnet.env | sort | tr '\\n' ' ' | sed 's/ $//'")
	obs["subnet.env network"] = sh("sed -n 's/^FLANNEL_NETWORK=//p' /run/flannel/subnet.env")
	obs["server CA files"] = sh("cd /var/lib/rancher/k3s/server/tls && ls server-ca.crt server-ca.key client-ca.crt client-ca.key 2>&1 | tr '\\n' ' ' | sed 's/ $//'")
	obs["providerID"] = c.exec(0, "k3s", "kubectl", "get", "node", "cp1", "-o", "jsonpath={.spec.providerID}")
	obs["podCIDR"] = podCIDRShape(c.exec(0, "k3s", "kubectl", "get", "node", "cp1", "-o", "jsonpath={.spec.podCIDR}"))
	obs["taints after bring-up"] = c.exec(0, "k3s", "kubectl", "get", "node", "cp1", "-o", "jsonpath={.spec.taints}")
	node := c.realNodes(0)["cp1"]
	var ls, as []string
	for k := range node.Labels {
		if strings.Contains(k, "k3s") || strings.HasPrefix(k, "node-role.kubernetes.io/") || strings.HasPrefix(k, "node.kubernetes.io/") {
			ls = append(ls, k+"="+node.Labels[k])
		}
	}
	for k := range node.Annotations {
		if strings.HasPrefix(k, "k3s.io/") || strings.HasPrefix(k, "flannel.alpha.coreos.com/") {
			as = append(as, k)
		}
	}
	slices.Sort(ls)
	slices.Sort(as)
	obs["node labels"] = strings.Join(ls, " ")
	obs["node annotations"] = strings.Join(as, " ")
	t.Logf("%s: %d observations", lane, len(obs))
	for k, v := range obs {
		t.Logf("%s: %s = %q", lane, k, v)
	}
	return obs
}

// causalPairs are milestone pairs whose order K3s itself fixes (docs/k3s.md "Bring-up
// timeline"); the taint's removal and the PodCIDR (two controllers) come in either order.
var causalPairs = [][2]string{{"api-ready", "service-active"}, {"api-ready", "node-registered"}, {"node-registered", "node-ready"},
	{"node-registered", "uninitialized-taint-gone"}, {"node-registered", "podcidr-set"}, {"podcidr-set", "subnet-env"}}

// milestoneOrder says for each causal pair whether k3strap reported it in that order ("a<b") or
// not ("a>b").
func milestoneOrder(r run) string {
	at := map[string]int{}
	for i, e := range r.ofType(events.Milestone) {
		at[e.Milestone.Name] = i
	}
	var out []string
	for _, p := range causalPairs {
		rel := "<"
		if a, ok := at[p[0]]; !ok || a > at[p[1]] {
			rel = ">"
		}
		out = append(out, p[0]+rel+p[1])
	}
	return strings.Join(out, " ")
}

var podCIDRRE = regexp.MustCompile(`^10\.42\.\d+\.0/24$`)

// podCIDRShape says whether cidr is a /24 of the default cluster CIDR: which one a node gets
// depends on the order the nodes registered in (agents may register before the first server's
// own node).
func podCIDRShape(cidr string) string {
	if podCIDRRE.MatchString(cidr) {
		return "a /24 of 10.42.0.0/16"
	}
	return cidr
}

var tokenRE = regexp.MustCompile(`^K10([0-9a-f]{64})::server:([0-9a-f]+)$`)

// tokenShape describes a K3s server token without its secret parts.
func tokenShape(tok string) string {
	m := tokenRE.FindStringSubmatch(strings.TrimSpace(tok))
	if m == nil {
		return fmt.Sprintf("unrecognised (%d characters)", len(strings.TrimSpace(tok)))
	}
	return fmt.Sprintf("K10<%d hex>::server:<%d hex>", len(m[1]), len(m[2]))
}
