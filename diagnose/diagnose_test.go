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
