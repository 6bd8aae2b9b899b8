// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

const scale = 0.05

func scaled(real float64) time.Duration { return time.Duration(real * scale * float64(time.Second)) }

// bringUp starts a server and records the timeline (readyz, node watch events, subnet.env)
// until the given log line appears.
type recorder struct {
	mu     sync.Mutex
	events []obs
	added  *corev1.Node
}

func (r *recorder) add(o obs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, o)
}

func record(t *testing.T, s *sim, until func() bool, max time.Duration) (*recorder, context.CancelFunc) {
	t.Helper()
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // subnet.env
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := os.Stat(s.root.Path(paths.SubnetEnv)); err == nil {
				rec.add(obs{at: time.Since(s.start).Seconds(), what: "subnet"})
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	readyAt := s.waitReadyz(10 * time.Second)
	rec.add(obs{at: readyAt.Seconds(), what: "readyz"})
	cs := s.clientset()
	// Watch from the start of history so a watch opened a little late under load still sees
	// every node event, including the ADDED at registration.
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			rec.mu.Lock()
			if rec.added == nil {
				rec.added = n.DeepCopy()
			}
			rec.mu.Unlock()
			rec.add(nodeObs(time.Since(s.start).Seconds(), n))
		}
	}()
	eventually(t, max, "bring-up", until)
	time.Sleep(scaled(1))
	return rec, func() { cancel(); w.Stop(); wg.Wait() }
}

func keys[K ~string, V any, M ~map[K]V](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

func loadNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := json.Unmarshal(fixture(t, name), n); err != nil {
		t.Fatal(err)
	}
	return n
}

// compareNodeShape checks what the installer reads: taints, label keys, annotation keys,
// finalizers, PodCIDR/providerID presence and conditions.
func compareNodeShape(t *testing.T, what string, got, want *corev1.Node) {
	t.Helper()
	if !reflect.DeepEqual(got.Spec.Taints, want.Spec.Taints) {
		t.Errorf("%s: taints %v, want %v", what, got.Spec.Taints, want.Spec.Taints)
	}
	if g, w := keys(got.Labels), keys(want.Labels); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: label keys\n got %v\nwant %v", what, g, w)
	}
	if g, w := keys(got.Annotations), keys(want.Annotations); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: annotation keys\n got %v\nwant %v", what, g, w)
	}
	for _, k := range []string{"site", "tier", "node-role.kubernetes.io/control-plane", "node.kubernetes.io/instance-type", "kubernetes.io/hostname"} {
		if got.Labels[k] != want.Labels[k] {
			t.Errorf("%s: label %s=%q, want %q", what, k, got.Labels[k], want.Labels[k])
		}
	}
	if !reflect.DeepEqual(got.Finalizers, want.Finalizers) {
		t.Errorf("%s: finalizers %v, want %v", what, got.Finalizers, want.Finalizers)
	}
	if got.Spec.PodCIDR != want.Spec.PodCIDR || !reflect.DeepEqual(got.Spec.PodCIDRs, want.Spec.PodCIDRs) || got.Spec.ProviderID != want.Spec.ProviderID {
		t.Errorf("%s: podCIDR %q %v providerID %q, want %q %v %q", what, got.Spec.PodCIDR, got.Spec.PodCIDRs, got.Spec.ProviderID,
			want.Spec.PodCIDR, want.Spec.PodCIDRs, want.Spec.ProviderID)
	}
	cond := func(n *corev1.Node) []string {
		var out []string
		for _, c := range n.Status.Conditions {
			out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		return out
	}
	if g, w := cond(got), cond(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: conditions %v, want %v", what, g, w)
	}
	addr := func(n *corev1.Node) []string {
		var out []string
		for _, a := range n.Status.Addresses {
			out = append(out, string(a.Type))
		}
		return out
	}
	if g, w := addr(got), addr(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: address types %v, want %v", what, g, w)
	}
	if g, w := keys(got.Status.Capacity), keys(want.Status.Capacity); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: capacity keys %v, want %v", what, g, w)
	}
	if got.Status.NodeInfo.KubeletVersion != "v1.36.3+k3s1" || got.Status.NodeInfo.ContainerRuntimeVersion != want.Status.NodeInfo.ContainerRuntimeVersion ||
		got.Status.NodeInfo.OperatingSystem != "linux" || got.Status.NodeInfo.OSImage == "" || got.Status.NodeInfo.KernelVersion == "" {
		t.Errorf("%s: nodeInfo %+v", what, got.Status.NodeInfo)
	}
	if got.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 || len(got.Status.RuntimeHandlers) != len(want.Status.RuntimeHandlers) {
		t.Errorf("%s: daemonEndpoints/runtimeHandlers differ", what)
	}
}

func defaultRoot(t *testing.T, knobs string) paths.Root {
	return newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml":                 string(fixture(t, "config-default.yaml")),
		"/etc/rancher/k3s/config.yaml.d/10-extra.yaml": string(fixture(t, "config-default.d-10-extra.yaml")),
		"/etc/k3ssim/sim.yaml":                         knobs,
	})
}

// TestDefaultBringUp runs Run A of the fixtures (embedded cloud controller) and compares
// milestones, Node JSON, files and log lines with the real K3s v1.36.3 captures; then it
// exercises kubectl, client-go, replace conflicts, the conflictOnNextReplace knob and a
// restart.
func TestDefaultBringUp(t *testing.T) {
	t.Parallel()
	root := defaultRoot(t, "timeScale: 0.05\n")
	s := startSim(t, "server", root, "vm", nil, nil)
	rec, stopRec := record(t, s, func() bool {
		for _, l := range s.logs.snapshot() {
			if strings.Contains(l.text, "Starting network policy controller full sync goroutine") {
				return true
			}
		}
		return false
	}, 20*time.Second)
	stopRec()

	// Milestone order (timeline-default.txt).
	want := milestones(parseTimeline(t, fixture(t, "timeline-default.txt")))
	got := milestones(rec.events)
	t.Logf("milestones: %v", got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("milestones\n got %v\nwant %v\nlog:\n%s", got, want, s.logs)
	}
	if len(want) != 7 {
		t.Fatalf("fixture parse: %v", want)
	}

	// Node at registration (node-registered-uninitialized.json) and after bring-up
	// (node-default.json).
	regWant := loadNode(t, "node-registered-uninitialized.json")
	compareNodeShape(t, "registered node", rec.added, regWant)
	if rec.added.Annotations["alpha.kubernetes.io/provided-node-ip"] != "127.0.0.1" {
		t.Errorf("provided-node-ip %q", rec.added.Annotations["alpha.kubernetes.io/provided-node-ip"])
	}
	cs := s.clientset()
	final, err := cs.CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defWant := loadNode(t, "node-default.json")
	compareNodeShape(t, "node after bring-up", final, defWant)
	var wantArgs []string
	if err := json.Unmarshal([]byte(defWant.Annotations["k3s.io/node-args"]), &wantArgs); err != nil {
		t.Fatal(err)
	}
	wantArgs = append(wantArgs, "--https-listen-port", fmt.Sprint(s.port), "--bind-address", "127.0.0.1", "--node-ip", "127.0.0.1")
	var gotArgs []string
	_ = json.Unmarshal([]byte(final.Annotations["k3s.io/node-args"]), &gotArgs)
	if !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("node-args\n got %q\nwant %q", gotArgs, wantArgs)
	}

	// subnet.env is byte-identical to the real one.
	if b, err := os.ReadFile(root.Path(paths.SubnetEnv)); err != nil || string(b) != string(fixture(t, "subnet.env")) {
		t.Errorf("subnet.env %q (%v), want %q", b, err, fixture(t, "subnet.env"))
	}

	// Token files (token-format.txt).
	serverDir := root.Path("/var/lib/rancher/k3s/server")
	tok, err := os.ReadFile(filepath.Join(serverDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^K10[0-9a-f]{64}::server:[0-9a-f]{32}\n$`).Match(tok) || len(tok) != 109 {
		t.Errorf("token %q does not have the token-format.txt shape", tok)
	}
	ca, _ := os.ReadFile(filepath.Join(serverDir, "tls", "server-ca.crt"))
	sum := sha256.Sum256(ca)
	if string(tok[3:67]) != hex.EncodeToString(sum[:]) {
		t.Error("token hash is not sha256 of server-ca.crt")
	}
	if st, _ := os.Stat(filepath.Join(serverDir, "token")); st.Mode().Perm() != 0o600 {
		t.Errorf("token mode %v", st.Mode())
	}
	for _, l := range []string{"node-token", "agent-token"} {
		target, err := os.Readlink(filepath.Join(serverDir, l))
		if err != nil || target != filepath.Join(serverDir, "token") {
			t.Errorf("%s -> %q (%v), want a symlink to token", l, target, err)
		}
	}

	// k3s.yaml shape (k3s.yaml.redacted) and mode.
	kc, err := os.ReadFile(s.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	red := regexp.MustCompile(`(?m)(-data): \S+$`).ReplaceAllString(string(kc), "$1: REDACTED")
	red = strings.Replace(red, fmt.Sprintf("127.0.0.1:%d", s.port), "127.0.0.1:6443", 1)
	if red != string(fixture(t, "k3s.yaml.redacted")) {
		t.Errorf("k3s.yaml shape:\n%s\nwant:\n%s", red, fixture(t, "k3s.yaml.redacted"))
	}
	if st, _ := os.Stat(s.kubeconfig()); st.Mode().Perm() != 0o600 {
		t.Errorf("k3s.yaml mode %v", st.Mode())
	}

	// Log lines (log-lines-default.txt), first line the unknown-key warning.
	s.logs.waitFor(t, `"Updating Pod CIDR"`, 5*time.Second)
	logs := s.logs.snapshot()
	if !strings.Contains(logs[0].text, `level=warning msg="Unknown flag --flanel-backend found in config.yaml, skipping\n"`) {
		t.Errorf("first log line %q", logs[0].text)
	}
	checkLogLines(t, fixture(t, "log-lines-default.txt"), logs, fixtureReplacer(s.port), nil)
	if n := s.notifications(); len(n) == 0 || n[0] != "READY=1" {
		t.Errorf("sd_notify %v, want READY=1", n)
	}

	// kubectl via the kubeconfig.
	out, errOut, code := s.kubectl("", "get", "nodes", "-o", "json")
	var list corev1.NodeList
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Kind != "List" || len(list.Items) != 1 || list.Items[0].Name != "vm" {
		t.Errorf("kubectl get nodes -o json: code %d err %q out %.300s", code, errOut, out)
	}
	if out, _, code := s.kubectl("", "get", "--raw", "/readyz"); code != 0 || out != "ok" {
		t.Errorf("get --raw /readyz = %q (%d)", out, code)
	}
	if out, _, _ := s.kubectl("", "get", "--raw", "/readyz?verbose"); !strings.HasSuffix(out, "readyz check passed\n") || !strings.Contains(out, "[+]etcd ok") {
		t.Errorf("readyz?verbose = %q", out)
	}
	if out, _, _ := s.kubectl("", "get", "nodes"); !regexp.MustCompile(`(?m)^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION\nvm\s+Ready\s+control-plane\s+\S+\s+v1.36.3\+k3s1\n$`).MatchString(out) {
		t.Errorf("get nodes table:\n%s", out)
	}
	if _, errOut, code := s.kubectl("", "get", "node", "nope"); code != 1 || errOut != "Error from server (NotFound): nodes \"nope\" not found\n" {
		t.Errorf("missing node: %d %q", code, errOut)
	}
	// CoreDNS does not tolerate dedicated=edge:NoExecute (pods-default.txt).
	out, _, _ = s.kubectl("", "get", "pods", "-A", "-o", "json")
	var pods corev1.PodList
	_ = json.Unmarshal([]byte(out), &pods)
	if len(pods.Items) != 1 || !strings.HasPrefix(pods.Items[0].Name, "coredns-") || pods.Items[0].Status.Phase != corev1.PodPending ||
		len(pods.Items[0].Status.Conditions) == 0 || pods.Items[0].Status.Conditions[0].Message != "0/1 nodes are available: 1 node(s) had untolerated taint(s)." {
		t.Errorf("pods: %.600s", out)
	}

	// client-go with the written kubeconfig (real REST paths).
	nl, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nl.Items) != 1 || nl.Items[0].Name != "vm" {
		t.Errorf("client-go list nodes: %v %v", nl, err)
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("client-go get deployment: %v", err)
	}

	// replace with a stale resourceVersion -> 409 with kubectl's exact message.
	const conflict = "Error from server (Conflict): error when replacing \"STDIN\": Operation cannot be fulfilled on nodes \"vm\": the object has been modified; please apply your changes to the latest version and try again\n"
	stale, _, _ := s.kubectl("", "get", "node", "vm", "-o", "json")
	if _, e, c := s.kubectl("", "label", "nodes", "vm", "touched=yes"); c != 0 {
		t.Fatalf("label: %s", e)
	}
	if out, e, c := s.kubectl(stale, "replace", "-f", "-"); c != 1 || e != conflict {
		t.Errorf("stale replace: code %d stdout %q stderr %q", c, out, e)
	}
	fresh, _, _ := s.kubectl("", "get", "node", "vm", "-o", "json")
	if out, e, c := s.kubectl(fresh, "replace", "-f", "-"); c != 0 || out != "node/vm replaced\n" {
		t.Errorf("fresh replace: %d %q %q", c, out, e)
	}

	// conflictOnNextReplace: the next PUT on the node conflicts although its
	// resourceVersion is current; the knob file counts down.
	writeFile(t, root.Path(paths.KnobsFile), "timeScale: 0.05\nconflictOnNextReplace: 1\n")
	fresh, _, _ = s.kubectl("", "get", "node", "vm", "-o", "json")
	if _, e, c := s.kubectl(fresh, "replace", "-f", "-"); c != 1 || e != conflict {
		t.Errorf("conflictOnNextReplace: %d %q", c, e)
	}
	if b, _ := os.ReadFile(root.Path(paths.KnobsFile)); !strings.Contains(string(b), "conflictOnNextReplace: 0") {
		t.Errorf("knob not decremented: %s", b)
	}
	fresh, _, _ = s.kubectl("", "get", "node", "vm", "-o", "json")
	if _, e, c := s.kubectl(fresh, "replace", "-f", "-"); c != 0 {
		t.Errorf("replace after the knob ran out: %q", e)
	}

	// Restart: CA, token and state survive.
	uid, rv := final.UID, s.kubectlRV(t)
	if code := s.stop(); code != 0 {
		t.Errorf("exit code on stop %d", code)
	}
	s2 := startSim(t, "server", root, "vm", nil, nil)
	s2.waitReadyz(10 * time.Second)
	tok2, _ := os.ReadFile(filepath.Join(serverDir, "token"))
	if string(tok2) != string(tok) {
		t.Error("token changed across a restart")
	}
	n2, err := s2.clientset().CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil || n2.UID != uid {
		t.Errorf("node after restart: %v %v", n2, err)
	}
	// The kubelet re-registers: its writes continue the resourceVersion sequence.
	eventually(t, 10*time.Second, "node updated after restart", func() bool { return s2.kubectlRV(t) > rv })
}

func (s *sim) kubectlRV(t *testing.T) int64 {
	out, _, _ := s.kubectl("", "get", "nodes", "-o", "json")
	var l struct {
		Items []struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"items"`
	}
	_ = json.Unmarshal([]byte(out), &l)
	var rv int64
	if len(l.Items) > 0 {
		fmt.Sscan(l.Items[0].Metadata.ResourceVersion, &rv)
	}
	return rv
}
