// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// The host-network checks (docs/failure-modes.md "Host networks") on the throw-away hosts,
// with real rules: nftables tables in a host's own network namespace, a lowered MTU on a
// host's cable, a second interface with the default route. Nothing is installed here: the
// path check and preflight run before any install, so the simulator's K3s is never started.

// netInv is one server (cp1) and agents a1.. on the harness hosts; Extra.hostConfig maps a
// host name to lines of its k3s.config, Extra.config adds cluster-wide config lines.
const netInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: net
spec:
  k3s:
{{- if .Real.Binary}}
{{template "k3s-real" .}}
    config:
{{template "k3s-real-config" .}}
{{- else}}
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]
{{- end}}
{{- if .Extra.config}}
{{.Extra.config}}
{{- end}}
{{template "ssh-root" .}}
  hosts:
{{- range $i, $h := .Hosts}}
{{- $name := printf "a%d" $i}}{{if eq $i 0}}{{$name = "cp1"}}{{end}}
    - name: {{$name}}
      address: {{$h.Address}}
      role: {{if eq $i 0}}server{{else}}agent{{end}}
{{- if $.Extra.hostConfig}}{{with index $.Extra.hostConfig $name}}
      k3s:
        config:
{{.}}
{{- end}}{{end}}
{{- end}}
`

// findingsOf returns the preflight findings of check id.
func (r run) findingsOf(id string) []events.Event {
	var out []events.Event
	for _, e := range r.ofType(events.Finding) {
		if e.Finding.Check == id {
			out = append(out, e)
		}
	}
	return out
}

// findingText is a finding with its evidence, fix and commands, for matching.
func findingText(e events.Event) string {
	f := e.Finding
	s := []string{e.Host + ": " + f.Message, "fix: " + f.Fix}
	for _, ev := range f.Evidence {
		s = append(s, "evidence: "+ev.Text+" ["+ev.Source+"]")
	}
	for _, c := range f.Commands {
		s = append(s, "$ "+c)
	}
	return strings.Join(s, "\n")
}

// pathsPhase returns how long the paths step took (its started and finished events).
func (r run) pathsPhase(t testing.TB) time.Duration {
	t.Helper()
	d := phaseTime(r.stdout, events.PhasePaths)
	if d == 0 {
		t.Fatalf("no paths step in the run")
	}
	return d
}

// probesGone checks that no probe is left on any host: no process of it, no test listener.
func (c *testCluster) probesGone(t *testing.T) {
	t.Helper()
	for i := range c.hosts {
		out := c.exec(i, "sh", "-c", "ps -eo args | grep -c '[K]3SP' || true; ss -Hlntu | awk '{print $5}' | grep -cE ':(6443|10250|8472)$' || true")
		if strings.Fields(out)[0] != "0" || strings.Fields(out)[1] != "0" {
			t.Errorf("%s: a probe or a test listener is left: %q", c.hosts[i].Name, out)
		}
	}
}

// blockTable is an nftables table dropping one port in a host's input.
func blockTable(proto string, port int) string {
	return fmt.Sprintf("table inet k3strap_test_block {\n  chain input { type filter hook input priority -5; policy accept;\n    %s dport %d counter drop\n  }\n}\n", proto, port)
}

// TestNodePathsBlocked: a real nftables rule in cp1's namespace dropping TCP 6443 and one in
// a2's dropping UDP 8472 make preflight fail naming the source, the target, the port and its
// purpose, with the rule and the command that removes it; --ignore-preflight-errors=NodePaths
// lets it through; without the rules it passes. No probe or listener is left behind.
func TestNodePathsBlocked(t *testing.T) {
	c := newCluster(t, 3)
	c.writeInventory(netInv, nil)

	r := c.k3strap(2*time.Minute, "preflight")
	if r.code != 0 || len(r.findingsOf("NodePaths")) > 0 || len(r.findingsOf("PathMTU")) > 0 {
		t.Errorf("open paths: exit %d, findings %v", r.code, r.findingsOf("NodePaths"))
		r.dump(t)
		t.FailNow()
	}
	t.Logf("path check, 3 hosts, all open: %s", r.pathsPhase(t).Round(time.Millisecond))
	c.probesGone(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.Nft(ctx, c.hosts[0].Index, blockTable("tcp", 6443), "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if err := c.h.Nft(ctx, c.hosts[2].Index, blockTable("udp", 8472), "-f", "-"); err != nil {
		t.Fatal(err)
	}
	r = c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("blocked: exit %d, want 3 (preflight failed)", r.code)
	}
	t.Logf("path check, 3 hosts, two ports dropped: %s", r.pathsPhase(t).Round(time.Millisecond))
	np := r.findingsOf("NodePaths")
	if len(np) != 2 {
		t.Fatalf("%d NodePaths findings, want 2", len(np))
	}
	handle := regexp.MustCompile(`handle (\d+)`)
	for _, want := range []struct {
		target, port, purpose, sources, rule string
	}{
		{"cp1", "TCP 6443", "K3s supervisor and Kubernetes API", "a1 and a2", "tcp dport 6443 counter packets"},
		{"a2", "UDP 8472", "flannel VXLAN", "cp1 and a1", "udp dport 8472 counter packets"},
	} {
		var f *events.Event
		for i := range np {
			if np[i].Host == want.target {
				f = &np[i]
			}
		}
		if f == nil {
			t.Errorf("no NodePaths finding for %s", want.target)
			continue
		}
		text := findingText(*f)
		for _, s := range []string{want.sources + " cannot reach " + want.target + " on " + want.port, want.purpose, want.rule, "nftables table inet k3strap_test_block chain input"} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: finding lacks %q:\n%s", want.target, s, text)
			}
		}
		m := handle.FindStringSubmatch(text)
		if m == nil || !slices.Contains(f.Finding.Commands, "nft delete rule inet k3strap_test_block input handle "+m[1]) {
			t.Errorf("%s: commands %q", want.target, f.Finding.Commands)
		}
		if f.Finding.Severity != "error" {
			t.Errorf("%s: severity %s", want.target, f.Finding.Severity)
		}
	}
	// The matrix, row by row: a1 cannot reach cp1 on 6443 nor a2 on 8472.
	var a1Row string
	for _, e := range r.ofType(events.HostStep) {
		if e.Phase == events.PhasePaths && e.Host == "a1" && strings.HasPrefix(e.Message, "cannot reach") {
			a1Row = e.Message
		}
	}
	if !strings.Contains(a1Row, "cp1 tcp/6443") || !strings.Contains(a1Row, "a2 udp/8472") {
		t.Errorf("a1's row of the matrix: %q", a1Row)
	}
	c.probesGone(t)

	// The rule on cp1 also keeps pods from the API server (the kubernetes Service's endpoint
	// is cp1:6443): the host's firewall, from the pods' side.
	hf := r.findingsOf("HostFirewall")
	if len(hf) != 1 || hf[0].Host != "cp1" || !strings.Contains(hf[0].Finding.Message, "pods to cp1's K3s supervisor and Kubernetes API (TCP 6443)") {
		t.Errorf("HostFirewall findings: %v", hf)
	}

	ign := c.k3strap(2*time.Minute, "preflight", "--ignore-preflight-errors=NodePaths,HostFirewall")
	if ign.code != 0 || len(ign.findingsOf("NodePaths")) != 2 || ign.findingsOf("NodePaths")[0].Finding.Severity != "ignored" {
		t.Errorf("ignored: exit %d", ign.code)
		ign.dump(t)
	}

	for _, i := range []int{0, 2} {
		if err := c.h.Nft(ctx, c.hosts[i].Index, "", "delete", "table", "inet", "k3strap_test_block"); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.k3strap(2*time.Minute, "preflight"); r.code != 0 || len(r.findingsOf("NodePaths")) > 0 {
		t.Errorf("rules removed: exit %d", r.code)
		r.dump(t)
	}
}

// TestPathMTULowered: a1's cable carries at most 1400-byte packets (its eth0 MTU: larger
// frames from the others are dropped, no ICMP); preflight measures it with don't-fragment
// datagrams and says which MTU fits.
func TestPathMTULowered(t *testing.T) {
	c := newCluster(t, 3)
	c.writeInventory(netInv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.MTU(ctx, c.hosts[1].Index, 1400); err != nil {
		t.Fatal(err)
	}
	r := c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3", r.code)
	}
	t.Logf("path check with an MTU ladder: %s", r.pathsPhase(t).Round(time.Millisecond))
	mtu := r.findingsOf("PathMTU")
	var hosts []string
	atMost := regexp.MustCompile(`at most (\d+) do`)
	for _, f := range mtu {
		hosts = append(hosts, f.Host)
		text := findingText(f)
		// A veth takes frames up to 4 bytes over its MTU (room for a VLAN tag), so the
		// largest packet that gets to a1 is 1400 to 1404 bytes.
		m := atMost.FindStringSubmatch(text)
		largest := 0
		if m != nil {
			largest, _ = strconv.Atoi(m[1])
		}
		if largest < 1400 || largest > 1404 {
			t.Errorf("%s: largest packet %d, want 1400..1404:\n%s", f.Host, largest, text)
			continue
		}
		for _, s := range []string{"do not get from " + f.Host + " to a1", fmt.Sprintf("The flannel MTU that fits is %d", largest-50), fmt.Sprintf("ip link set dev eth0 mtu %d", largest)} {
			if !strings.Contains(text, s) {
				t.Errorf("%s: finding lacks %q:\n%s", f.Host, s, text)
			}
		}
	}
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"a2", "cp1"}) {
		t.Errorf("PathMTU findings for %v, want cp1 and a2 (the paths into a1)", hosts)
	}
	if np := r.findingsOf("NodePaths"); len(np) > 0 {
		t.Errorf("small packets get through, yet NodePaths: %s", findingText(np[0]))
	}
}

// standIn copies a stand-in from e2e/testdata/standins onto host i.
func (c *testCluster) standIn(i int, name, dst string, mode os.FileMode) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "e2e", "testdata", "standins", name))
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.WriteFile(ctx, c.hosts[i].Index, dst, b, mode); err != nil {
		c.t.Fatal(err)
	}
}

// runFixes runs a finding's commands on host i, as its user would (all but reboot).
func (c *testCluster) runFixes(i int, f events.Event) {
	c.t.Helper()
	for _, cmd := range f.Finding.Commands {
		if cmd == "reboot" {
			continue
		}
		c.exec(i, "sh", "-c", cmd)
	}
}

func hostIndex(c *testCluster, name string) int {
	if name == "cp1" {
		return 0
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(name, "a"))
	return i
}

// TestHostNetworkStandIns: firewalld on cp1, ufw and a second iptables backend on a1,
// NetworkManager with nm-cloud-setup and a loopback-only resolv.conf on a2 — firewalld, ufw,
// NetworkManager and nm-cloud-setup as labelled stand-ins for their state commands (the
// daemons cannot run in the hosts), installing the real nftables and iptables rules the
// daemons would. Preflight names each problem with the command that fixes it; running those
// commands (the stand-ins carry them out) and setting resolv-conf makes it pass.
func TestHostNetworkStandIns(t *testing.T) {
	c := newCluster(t, 3)
	c.writeInventory(netInv, nil)
	// cp1: firewalld, ssh only
	c.standIn(0, "firewall-cmd.standin.sh", "/usr/local/bin/firewall-cmd", 0o755)
	c.exec(0, "firewall-cmd", "--reload")
	// a1: ufw (deny incoming and routed, ssh allowed), and one rule in iptables-legacy
	c.standIn(1, "ufw.standin.sh", "/usr/sbin/ufw", 0o755)
	c.exec(1, "ufw", "enable")
	c.exec(1, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "9100", "-j", "ACCEPT")
	// a2: NetworkManager running, nm-cloud-setup enabled, a loopback resolver
	c.standIn(2, "networkmanager-standin.service", "/etc/systemd/system/NetworkManager.service", 0o644)
	c.standIn(2, "nm-cloud-setup-standin.service", "/etc/systemd/system/nm-cloud-setup.service", 0o644)
	c.standIn(2, "nm-cloud-setup-standin.timer", "/etc/systemd/system/nm-cloud-setup.timer", 0o644)
	c.standIn(2, "nmcli.standin.sh", "/usr/bin/nmcli", 0o755)
	c.exec(2, "sh", "-c", "mkdir -p /etc/NetworkManager/conf.d && printf '[main]\\nplugins=keyfile\\n' > /etc/NetworkManager/NetworkManager.conf && "+
		"systemctl daemon-reload && systemctl enable --now NetworkManager.service && systemctl enable nm-cloud-setup.service nm-cloud-setup.timer && "+
		"printf 'nameserver 127.0.0.53\\noptions edns0\\n' > /etc/resolv.conf")

	r := c.k3strap(2*time.Minute, "preflight")
	if r.code != 3 {
		t.Errorf("exit %d, want 3", r.code)
		r.dump(t)
		t.FailNow()
	}
	want := map[string][]string{
		// firewalld rejects every K3s port on cp1 and the pods' traffic
		"NodePaths cp1":    {"firewall-cmd --permanent --zone=public --add-port=6443/tcp", "firewall-cmd --reload", "reject with icmpx admin-prohibited"},
		"HostFirewall cp1": {"firewall-cmd --permanent --zone=trusted --add-source=10.42.0.0/16", "firewall-cmd --permanent --zone=trusted --add-source=10.43.0.0/16"},
		// ufw's default deny on a1
		"NodePaths a1":        {"ufw allow proto udp from", "to any port 8472", "policy drop of iptables-nft table filter chain INPUT"},
		"HostFirewall a1":     {"ufw allow from 10.42.0.0/16 to any"},
		"IptablesBackends a1": {"1 iptables-legacy rules", "legacy -A INPUT -p tcp -m tcp --dport 9100 -j ACCEPT", "iptables-legacy-save | iptables-nft-restore --noflush"},
		"NMCloudSetup a2":     {"nm-cloud-setup.service is enabled", "systemctl disable nm-cloud-setup.service nm-cloud-setup.timer"},
		"NetworkManager a2":   {"NetworkManager.service is active", "no [keyfile] unmanaged-devices", "unmanaged-devices=interface-name:cni0;interface-name:flannel*"},
		"ResolvConf a2":       {"nameserver 127.0.0.53 is not a global unicast address", "airgapped", "resolv-conf"},
	}
	got := map[string]string{}
	for _, e := range r.ofType(events.Finding) {
		k := e.Finding.Check + " " + e.Host
		got[k] += findingText(e) + "\n"
	}
	for k, subs := range want {
		for _, s := range subs {
			if !strings.Contains(got[k], s) {
				t.Errorf("%s lacks %q:\n%s", k, s, got[k])
			}
		}
	}
	if t.Failed() {
		r.dump(t)
		t.FailNow()
	}

	// The fixes: what the findings say, run on the hosts.
	for _, e := range r.ofType(events.Finding) {
		switch e.Finding.Check {
		case "NodePaths", "HostFirewall", "IptablesBackends", "NMCloudSetup", "NetworkManager":
			c.runFixes(hostIndex(c, e.Host), e)
		}
	}
	c.exec(2, "sh", "-c", "mkdir -p /etc/rancher/k3s && printf 'nameserver %s.1\\n' "+c.h.PublicNet()+" > /etc/rancher/k3s/resolv.conf")
	c.writeInventory(netInv, map[string]any{"hostConfig": map[string]string{"a2": "          resolv-conf: /etc/rancher/k3s/resolv.conf"}})
	r = c.k3strap(2*time.Minute, "preflight")
	defer r.dump(t)
	if r.code != 0 {
		for _, e := range r.ofType(events.Finding) {
			t.Logf("left: [%s %s] %s", e.Finding.Check, e.Host, e.Finding.Message)
		}
		t.Fatalf("after the fixes: exit %d", r.code)
	}
	for _, e := range r.ofType(events.Finding) {
		switch e.Finding.Check {
		case "NodePaths", "HostFirewall", "IptablesBackends", "NMCloudSetup", "NetworkManager", "ResolvConf":
			t.Errorf("still: [%s %s] %s", e.Finding.Check, e.Host, e.Finding.Message)
		}
	}
}
