// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/internal/testfixtures"
)

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := json.Unmarshal(testfixtures.Read(t, name), &n); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &n
}

func lines(t *testing.T, name string) []string {
	return strings.Split(strings.TrimSpace(string(testfixtures.Read(t, name))), "\n")
}

func TestNodeArgsFromRealNode(t *testing.T) {
	args := NodeArgs(node(t, "node-f1.json"))
	if got := args["disable-cloud-controller"]; len(got) != 1 || got[0] != "true" {
		t.Fatalf("disable-cloud-controller = %v", got)
	}
	if got := strings.Join(args["kubelet-arg"], ","); got != "cloud-provider=external,fail-cgroupv1=false" {
		t.Fatalf("kubelet-arg = %q", got)
	}
	if got := strings.Join(args["disable"], ","); got != "traefik,servicelb,metrics-server,local-storage" {
		t.Fatalf("disable = %q", got)
	}
}

func TestF1DiagnosedFromRealCapture(t *testing.T) {
	n := node(t, "node-f1.json")
	pod := corev1.Pod{}
	pod.Namespace, pod.Name = "kube-system", "coredns-54996dc9b4-wzsrv"
	pod.Status.Phase = corev1.PodPending
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	ev := Evidence{NodeName: "vm", Node: n, Pods: []corev1.Pod{pod}, Journal: lines(t, "log-lines-f1.txt"), TaintAge: 90 * time.Second, SubnetEnvPresent: true}
	d := UninitializedStall(ev)
	if d.ID != "F1-cloud-controller" {
		t.Fatalf("ID = %s, want F1-cloud-controller (%s)", d.ID, d.Message)
	}
	all := strings.Join(d.Evidence, "\n")
	for _, want := range []string{"kube-system/coredns-54996dc9b4-wzsrv", "cloud-provider=\"external\"", "disabled", "Network policy controller waiting for removal"} {
		if !strings.Contains(all, want) {
			t.Errorf("evidence lacks %q:\n%s", want, all)
		}
	}
	if !strings.Contains(strings.Join(d.Fixes, "\n"), "cloudController") {
		t.Errorf("fixes do not mention cloudController: %v", d.Fixes)
	}
}

func TestEmbeddedControllerStallIsNotF1(t *testing.T) {
	// The default run's node at registration: the embedded cloud controller is on (journal
	// shows it running), so a lingering taint is not F1.
	n := node(t, "node-registered-uninitialized.json")
	j := append(lines(t, "log-lines-default.txt"), `time="2026-11-21T23:35:30Z" level=info msg="Waiting for CRD addons.k3s.cattle.io to become available"`)
	d := UninitializedStall(Evidence{NodeName: "vm", Node: n, Journal: j, TaintAge: 70 * time.Second})
	if d.ID != "manifest-deployer-stall" {
		t.Fatalf("ID = %s, want manifest-deployer-stall", d.ID)
	}
	d = UninitializedStall(Evidence{NodeName: "vm", Node: n, Journal: lines(t, "log-lines-default.txt"), TaintAge: 70 * time.Second})
	if d.ID != "uninitialized-stall-unknown" {
		t.Fatalf("ID = %s, want uninitialized-stall-unknown", d.ID)
	}
}

func TestExternalDeclaredButMissing(t *testing.T) {
	n := node(t, "node-f1.json")
	d := UninitializedStall(Evidence{NodeName: "vm", Node: n, ExternalCloudController: true, TaintAge: time.Minute})
	if d.ID != "external-cloud-controller-missing" {
		t.Fatalf("ID = %s", d.ID)
	}
}

func TestSubnetEnvFixture(t *testing.T) {
	s, err := ParseSubnetEnv(string(testfixtures.Read(t, "subnet.env")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Network != "10.42.0.0/16" || s.Subnet != "10.42.0.1/24" || s.MTU != 1450 || !s.IPMasq {
		t.Fatalf("parsed %+v", s)
	}
	if _, err := ParseSubnetEnv("FLANNEL_NETWORK=10.42.0.0/16 FLANNEL_MTU=1450"); err == nil || !strings.Contains(err.Error(), "FLANNEL_SUBNET") {
		t.Fatalf("missing subnet not reported: %v", err)
	}
	if _, err := ParseSubnetEnv("FLANNEL_NETWORK=a FLANNEL_SUBNET=b FLANNEL_MTU=x"); err == nil {
		t.Fatal("bad MTU accepted")
	}
}

func TestMergeConfigFilesFixture(t *testing.T) {
	m := MergeConfigFiles([]string{string(testfixtures.Read(t, "config-default.yaml")), string(testfixtures.Read(t, "config-default.d-10-extra.yaml"))})
	if got := strings.Join(m["node-label"], ","); got != "site=lab,tier=edge" {
		t.Fatalf("node-label = %q (node-label+ must append)", got)
	}
	if got := m["flanel-backend"]; len(got) != 1 {
		t.Fatalf("unknown key kept as evidence: %v", got)
	}
}

func TestServiceFailingCriticalMismatch(t *testing.T) {
	j := []string{`time="x" level=info msg="Starting k3s"`, `time="x" level=fatal msg="starting kubernetes: preparing server: failed to validate server configuration: critical configuration value mismatch between servers"`}
	d := ServiceFailing(Evidence{Journal: j, ServiceState: "activating"}, "k3s")
	if d.ID != "critical-config-mismatch" {
		t.Fatalf("ID = %s", d.ID)
	}
}

func TestTimeoutNoPodCIDR(t *testing.T) {
	n := node(t, "node-registered-uninitialized.json")
	ev := Evidence{NodeName: "vm", Node: n, ConfigArgs: map[string][]string{"kube-controller-manager-arg": {"allocate-node-cidrs=false"}}}
	n.Annotations = nil // force config files as the source of arguments
	d := Timeout(ev, "node-registered at 9.3 s", 10*time.Minute)
	if d.ID != "no-podcidr" {
		t.Fatalf("ID = %s", d.ID)
	}
}

// journal reads a journal fixture without its '#' comment lines.
func journal(t *testing.T, name string) []string {
	var out []string
	for _, l := range lines(t, name) {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// TestServiceFailingLeadsWithFatalLine: with the journal of a real K3s v1.36.3 crash loop, the
// diagnosis leads with the kubelet's "Failed to start ContainerManager" (the line before
// "Main process exited"), not with the 503 and nf_conntrack_max lines every start prints.
func TestServiceFailingLeadsWithFatalLine(t *testing.T) {
	full := journal(t, "journal-crashloop-readonly-sysctl.txt")
	var first []string // the first crash only
	for _, l := range full {
		first = append(first, l)
		if strings.Contains(l, "Failed with result") {
			break
		}
	}
	// journalctl -o cat (what the installer gathers) drops the "date host unit[pid]: " prefix.
	var cat []string
	for _, l := range first {
		if _, rest, ok := strings.Cut(l, "]: "); ok {
			l = rest
		}
		cat = append(cat, l)
	}
	for name, j := range map[string][]string{"journald prefix": first, "-o cat": cat} {
		t.Run(name, func(t *testing.T) {
			d := ServiceFailing(Evidence{Journal: j, ServiceState: "activating"}, "k3s")
			if d.ID != "service-failing" || len(d.Evidence) < 2 {
				t.Fatalf("%s: %q", d.ID, d.Evidence)
			}
			if !strings.Contains(d.Evidence[0], `"Failed to start ContainerManager"`) || !strings.Contains(d.Evidence[0], "panic_on_oops: read-only file system") {
				t.Errorf("evidence does not lead with the fatal line:\n%s", strings.Join(d.Evidence, "\n"))
			}
			if !strings.Contains(d.Message, "Failed to start ContainerManager") {
				t.Errorf("message: %s", d.Message)
			}
			rest := strings.Join(d.Evidence[1:], "\n")
			for _, ctx := range []string{"503 response", "nf_conntrack_max"} {
				if !strings.Contains(rest, ctx) {
					t.Errorf("context lacks %q:\n%s", ctx, rest)
				}
			}
			for _, e := range d.Evidence[1:] {
				if !strings.HasPrefix(e, "context: ") {
					t.Errorf("not marked as context: %s", e)
				}
			}
		})
	}

	// Both crashes of the fixture: each one's fatal line leads, in order, before any context.
	d := ServiceFailing(Evidence{Journal: full}, "k3s")
	if len(d.Evidence) < 3 || !strings.Contains(d.Evidence[0], "Failed to start ContainerManager") ||
		!strings.Contains(d.Evidence[1], "Shutdown request received") || !strings.HasPrefix(d.Evidence[2], "context: ") {
		t.Errorf("evidence:\n%s", strings.Join(d.Evidence, "\n"))
	}
	if !strings.Contains(d.Message, "iptables is not available") {
		t.Errorf("message names the latest fatal line: %s", d.Message)
	}
}

func TestFatalLinesRepeatsDropped(t *testing.T) {
	j := []string{
		`time="2026-01-01T00:00:01Z" level=error msg="Sending HTTP/1.1 503 response"`,
		`time="2026-01-01T00:00:02Z" level=fatal msg="starting kubernetes: port 6443 in use"`,
		`k3s.service: Main process exited, code=exited, status=1/FAILURE`,
		`time="2026-01-01T00:00:07Z" level=fatal msg="starting kubernetes: port 6443 in use"`,
		`k3s.service: Main process exited, code=exited, status=1/FAILURE`,
	}
	got := FatalLines(j)
	if len(got) != 1 || !strings.Contains(got[0], "00:00:07") {
		t.Fatalf("FatalLines = %q", got)
	}
	if m := journalMessage(got[0]); m != "starting kubernetes: port 6443 in use" {
		t.Errorf("journalMessage = %q", m)
	}
}
