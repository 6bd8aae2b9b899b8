// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// Pods on the real K3s: the real-lane inventory uploads the stand-in images archive
// (e2e/cmd/standin-images, README.md there), so the packaged components and test workloads
// run. The netprobe helpers here are for any real-lane test that needs pod traffic.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// netprobePort is the port netprobe serves HTTP on.
const netprobePort = 8080

// netprobeManifest is a netprobe pod named name on node (scheduled there by its hostname
// label, ready once its /healthz answers the kubelet) and, when service is set, a ClusterIP
// Service of that name in front of it (port 8080).
func netprobeManifest(name, node, service string) string {
	m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  labels: {app: netprobe, netprobe: %[1]s}
spec:
  nodeSelector: {kubernetes.io/hostname: %[2]s}
  containers:
    - name: netprobe
      image: %[3]s
      imagePullPolicy: Never
      ports: [{containerPort: %[4]d}]
      env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      readinessProbe: {httpGet: {path: /healthz, port: %[4]d}, periodSeconds: 1}
`, name, node, netprobeImage, netprobePort)
	if service != "" {
		m += fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %s}
spec:
  selector: {netprobe: %s}
  ports: [{port: %d, targetPort: %d}]
`, service, name, netprobePort, netprobePort)
	}
	return m
}

// netprobeImage is the test workload's image reference in the stand-in archive.
const netprobeImage = "k3strap.test/netprobe:v1"

// netprobeIdentity is what netprobe answers on /: the pod that served and the caller's
// address as that pod saw it.
type netprobeIdentity struct {
	Hostname  string   `json:"hostname"`
	Node      string   `json:"node"`
	Addresses []string `json:"addresses"`
	Remote    string   `json:"remote"`
}

// netprobeGet runs `netprobe get URL` in pod (through host i's k3s kubectl exec) and decodes
// the netprobe identity it fetched; err is netprobe's own message when the fetch failed
// (timeout after timeout).
func (c *testCluster) netprobeGet(i int, pod, url string, timeout time.Duration) (netprobeIdentity, error) {
	c.t.Helper()
	var id netprobeIdentity
	out, err := c.execErr(i, timeout+30*time.Second, "k3s", "kubectl", "exec", pod, "--", "/netprobe", "get", "-timeout", timeout.String(), url)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal([]byte(out), &id); err != nil {
		return id, fmt.Errorf("%s answered %q: %v", url, out, err)
	}
	return id, nil
}

// netprobeGetService is netprobeGet for a URL through Service service's ClusterIP or name.
// A Ready pod is not yet a reachable Service: the EndpointSlice controller lists the pod
// after it turns Ready, and each node's kube-proxy programs its rules after that (a Service
// without programmed endpoints is rejected: "connection refused"). So it first waits until
// the Service's EndpointSlice holds a ready endpoint, then retries a refused connection until
// settle has passed; any other error, or a refusal after settle, is returned.
func (c *testCluster) netprobeGetService(i int, pod, service, url string, timeout, settle time.Duration) (netprobeIdentity, error) {
	c.t.Helper()
	deadline := time.Now().Add(settle)
	for {
		out, err := c.execErr(i, 30*time.Second, "k3s", "kubectl", "get", "endpointslices", "-l", "kubernetes.io/service-name="+service,
			"-o", `jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}`)
		if err == nil && strings.TrimSpace(out) != "" {
			break
		}
		if time.Now().After(deadline) {
			return netprobeIdentity{}, fmt.Errorf("service %s has no ready endpoint after %s (%q, %v)", service, settle, out, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		id, err := c.netprobeGet(i, pod, url, timeout)
		if err == nil || !strings.Contains(err.Error(), "connection refused") || time.Now().After(deadline) {
			return id, err
		}
		time.Sleep(time.Second)
	}
}

// netprobeResolve runs `netprobe resolve NAME` in pod: the addresses the pod's resolver
// (its resolv.conf: cluster DNS, search domains) gives name.
func (c *testCluster) netprobeResolve(i int, pod, name string) ([]string, error) {
	c.t.Helper()
	out, err := c.execErr(i, time.Minute, "k3s", "kubectl", "exec", pod, "--", "/netprobe", "resolve", name)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// execErr runs a command inside host i and returns its output, or an error with its stderr.
func (c *testCluster) execErr(i int, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := c.h.Exec(ctx, c.hosts[i].Index, args...)
	return strings.TrimSpace(string(out)), err
}

// waitPods waits until n pods of ns matching selector are Running with every container Ready
// and returns them; it fails the test with the pods' state after timeout.
func (c *testCluster) waitPods(ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		out, err := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "pods", "-n", ns, "-l", selector, "-o", "json")
		var l corev1.PodList
		if err == nil && json.Unmarshal([]byte(out), &l) == nil {
			var ready []corev1.Pod
			var state []string
			for _, p := range l.Items {
				if podReady(p) {
					ready = append(ready, p)
				}
				state = append(state, p.Name+" "+podState(p))
			}
			if len(ready) >= n {
				return ready
			}
			last = strings.Join(state, "; ")
		} else {
			last = fmt.Sprint(err)
		}
		if time.Now().After(deadline) {
			events, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
			c.t.Fatalf("%s pods %s: %d Running and Ready wanted within %s; have: %s\nevents:\n%s", ns, selector, n, timeout, last, lastLines(events, 20))
		}
		time.Sleep(time.Second)
	}
}

func podReady(p corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podState(p corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += " " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			s += " " + cs.State.Terminated.Reason
		case !cs.Ready:
			s += " not ready"
		}
	}
	return s
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// importedRe is the line K3s logs when it has imported an archive from agent/images
// (k3s-io/k3s pkg/agent/containerd: "Imported N images from FILE in DURATION").
var importedRe = regexp.MustCompile(`Imported (\d+) images from (\S+) in ([0-9.]+[a-zµ]+)`)

// waitImported waits for K3s's import line of the stand-in archive in host i's unit journal
// and returns how many images it imported and how long the import took.
func (c *testCluster) waitImported(i int, unit string, timeout time.Duration) (int, time.Duration) {
	c.t.Helper()
	return c.waitImportedFile(i, unit, standinImagesArchive, timeout)
}

// waitImportedFile is waitImported for the images archive named file.
func (c *testCluster) waitImportedFile(i int, unit, file string, timeout time.Duration) (int, time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	want := "/var/lib/rancher/k3s/agent/images/" + file
	for {
		out, _ := c.execErr(i, 30*time.Second, "journalctl", "-u", unit, "--no-pager", "-o", "cat", "--grep", "Import")
		for _, m := range importedRe.FindAllStringSubmatch(out, -1) {
			if m[2] == want {
				n, _ := strconv.Atoi(m[1])
				d, err := time.ParseDuration(m[3])
				if err != nil {
					c.t.Fatalf("%s: bad import duration in %q", c.hosts[i].Name, m[0])
				}
				return n, d
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: no %q line for %s in the %s journal within %s; import lines:\n%s", c.hosts[i].Name, "Imported N images from", want, unit, timeout, out)
		}
		time.Sleep(time.Second)
	}
}

// standinRefs are the references the stand-in archive holds (`standin-images list`).
func standinRefs(t *testing.T, b built) []string {
	t.Helper()
	out, err := exec.Command(b.standinProgram, "list").Output()
	if err != nil {
		t.Fatalf("standin-images list: %v", err)
	}
	return strings.Fields(string(out))
}

// TestRealPods (real K3s): the stand-in images make a real cluster's pods run.
//   - after a 1 server + 1 agent apply, each host's K3s logs the import of the stand-in
//     archive, and its containerd holds every stand-in image, labelled as one;
//   - CoreDNS, local-path-provisioner and metrics-server are Running and Ready (their
//     manifests' probes), each container on its stand-in image;
//   - the APIService v1beta1.metrics.k8s.io is Available and discovery warns of nothing;
//   - two netprobe pods, one per node, in the nodes' own PodCIDRs, reach each other by pod IP
//     (each sees the other's pod IP as the caller: no NAT) over flannel's VXLAN device;
//   - one resolves the other's Service through the stand-in CoreDNS (full name and the short
//     name through the search path) and reaches it; the agent's pod resolves
//     kubernetes.default; a name outside the cluster does not resolve (nothing forwarded);
//   - `k3strap doctor` finds nothing wrong with the pods.
func TestRealPods(t *testing.T) {
	c := newRealCluster(t, 2)
	if st, err := os.Stat(c.bin.standinImages); err == nil {
		t.Logf("stand-in images archive: %d bytes, built in %.1f s", st.Size(), c.bin.standinSeconds)
	}
	c.writeInventory(simVsRealServer, nil) // its real-lane half: 1 server + 1 agent
	r := c.k3strap(5*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d", r.code)
	}
	for host, d := range uploadTimes(r, standinImagesArchive) {
		t.Logf("%s: archive uploaded in %s", host, d.Round(time.Millisecond))
	}
	t.Logf("apply: %s", r.duration.Round(time.Millisecond))

	// The import, as the real containerd saw it.
	refs := standinRefs(t, c.bin)
	for i, unit := range []string{"k3s", "k3s-agent"} {
		n, d := c.waitImported(i, unit, 2*time.Minute)
		t.Logf("%s: K3s imported %d images in %s", c.hosts[i].Name, n, d)
		if n != len(refs) {
			t.Errorf("%s: K3s imported %d images, the archive holds %d", c.hosts[i].Name, n, len(refs))
		}
		var imgs struct {
			Images []struct {
				RepoTags []string `json:"repoTags"`
			} `json:"images"`
		}
		if err := json.Unmarshal([]byte(c.exec(i, "k3s", "crictl", "images", "-o", "json")), &imgs); err != nil {
			t.Fatal(err)
		}
		var tags []string
		for _, im := range imgs.Images {
			tags = append(tags, im.RepoTags...)
		}
		for _, ref := range refs {
			if !slices.Contains(tags, ref) {
				t.Errorf("%s: containerd has no %s (has %v)", c.hosts[i].Name, ref, tags)
				continue
			}
			var info struct {
				Info struct {
					ImageSpec struct {
						Config struct {
							Labels map[string]string `json:"Labels"`
						} `json:"config"`
					} `json:"imageSpec"`
				} `json:"info"`
			}
			if err := json.Unmarshal([]byte(c.exec(i, "k3s", "crictl", "inspecti", "-o", "json", ref)), &info); err != nil {
				t.Fatal(err)
			}
			if l := info.Info.ImageSpec.Config.Labels; l["io.k3strap.test-standin"] != "true" {
				t.Errorf("%s: %s is not labelled as a stand-in: %v", c.hosts[i].Name, ref, l)
			}
		}
	}

	// The packaged components, on their stand-in images.
	for _, comp := range []struct{ selector, image string }{
		{"k8s-app=kube-dns", "docker.io/rancher/mirrored-coredns-coredns:1.14.6"},
		{"app=local-path-provisioner", "docker.io/rancher/local-path-provisioner:v0.0.36"},
		{"k8s-app=metrics-server", "docker.io/rancher/mirrored-metrics-server:v0.9.0"},
	} {
		for _, p := range c.waitPods("kube-system", comp.selector, 1, 3*time.Minute) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Image != comp.image {
					t.Errorf("pod %s container %s runs %s, want %s", p.Name, cs.Name, cs.Image, comp.image)
				}
			}
		}
	}

	// metrics.k8s.io: Available, and discovery without a warning.
	c.waitAPIServiceAvailable("v1beta1.metrics.k8s.io", 2*time.Minute)
	if warn := c.exec(0, "sh", "-c", "k3s kubectl api-resources 2>&1 >/dev/null"); warn != "" {
		t.Errorf("kubectl api-resources warns: %s", warn)
	}
	var nm struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(c.exec(0, "k3s", "kubectl", "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")), &nm); err != nil || nm.Kind != "NodeMetricsList" {
		t.Errorf("metrics.k8s.io nodes: kind %q, %v", nm.Kind, err)
	}

	// Pod to pod across the nodes.
	c.kubectl(netprobeManifest("np-cp1", "cp1", "")+"---\n"+netprobeManifest("np-a1", "a1", "netprobe-a1"), "apply", "-f", "-")
	pods := map[string]corev1.Pod{}
	for _, p := range c.waitPods("default", "app=netprobe", 2, 2*time.Minute) {
		pods[p.Spec.NodeName] = p
	}
	pc, pa := pods["cp1"], pods["a1"]
	if pc.Name != "np-cp1" || pa.Name != "np-a1" {
		t.Fatalf("netprobe pods by node: %v", keys(pods))
	}
	nodes := c.realNodes(0)
	for node, p := range pods {
		cidr, err := netip.ParsePrefix(nodes[node].Spec.PodCIDR)
		if err != nil || !cidr.Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s has IP %s outside node %s's PodCIDR %q", p.Name, p.Status.PodIP, node, nodes[node].Spec.PodCIDR)
		}
	}
	if nodes["cp1"].Spec.PodCIDR == nodes["a1"].Spec.PodCIDR {
		t.Errorf("both nodes have PodCIDR %s", nodes["cp1"].Spec.PodCIDR)
	}
	if vx := c.exec(0, "ip", "-d", "link", "show", "flannel.1"); !strings.Contains(vx, "vxlan") || !strings.Contains(vx, "dstport 8472") {
		t.Errorf("cp1's flannel.1 is not the VXLAN device on UDP 8472:\n%s", vx)
	}
	tx0 := c.flannelTX(0)
	for _, dir := range [][2]corev1.Pod{{pc, pa}, {pa, pc}} {
		from, to := dir[0], dir[1]
		id, err := c.netprobeGet(0, from.Name, fmt.Sprintf("http://%s/", net.JoinHostPort(to.Status.PodIP, strconv.Itoa(netprobePort))), 10*time.Second)
		if err != nil {
			t.Errorf("%s (%s) -> %s (%s) by pod IP: %v", from.Name, from.Spec.NodeName, to.Name, to.Spec.NodeName, err)
			continue
		}
		if id.Hostname != to.Name || id.Node != to.Spec.NodeName {
			t.Errorf("%s -> %s: answered by %s on %s", from.Name, to.Status.PodIP, id.Hostname, id.Node)
		}
		if host, _, _ := net.SplitHostPort(id.Remote); host != from.Status.PodIP {
			t.Errorf("%s -> %s: %s saw the caller as %s, want %s's pod IP %s (no NAT between pods)", from.Name, to.Name, to.Name, id.Remote, from.Name, from.Status.PodIP)
		}
	}
	if tx1 := c.flannelTX(0); tx1 <= tx0 {
		t.Errorf("cp1's flannel.1 sent no packet during the cross-node calls (tx_packets %d -> %d)", tx0, tx1)
	}

	// Through the Service name, resolved by the stand-in CoreDNS.
	svcIP := c.exec(0, "k3s", "kubectl", "get", "service", "netprobe-a1", "-o", "jsonpath={.spec.clusterIP}")
	if addrs, err := c.netprobeResolve(0, pc.Name, "netprobe-a1.default.svc.cluster.local"); err != nil || !slices.Equal(addrs, []string{svcIP}) {
		t.Errorf("np-cp1 resolves netprobe-a1.default.svc.cluster.local to %v (%v), want the ClusterIP %s", addrs, err, svcIP)
	}
	if id, err := c.netprobeGetService(0, pc.Name, "netprobe-a1", fmt.Sprintf("http://netprobe-a1:%d/", netprobePort), 10*time.Second, time.Minute); err != nil || id.Hostname != pa.Name {
		t.Errorf("np-cp1 -> http://netprobe-a1:%d/: answered by %q, %v; want %s", netprobePort, id.Hostname, err, pa.Name)
	}
	kubeIP := c.exec(0, "k3s", "kubectl", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
	if addrs, err := c.netprobeResolve(0, pa.Name, "kubernetes.default.svc.cluster.local"); err != nil || !slices.Equal(addrs, []string{kubeIP}) {
		t.Errorf("np-a1 resolves kubernetes.default.svc.cluster.local to %v (%v), want %s", addrs, err, kubeIP)
	}
	if addrs, err := c.netprobeResolve(0, pc.Name, "example.com"); err == nil {
		t.Errorf("np-cp1 resolves example.com to %v: the stand-in CoreDNS forwards nothing", addrs)
	}

	// doctor on the running cluster: nothing about pods.
	d := c.k3strap(2*time.Minute, "doctor")
	defer d.dump(t)
	for _, e := range d.ofType(events.DoctorFindingType) {
		t.Logf("doctor: [%s %s] %s: %s %s", e.Doctor.Severity, e.Doctor.ID, e.Doctor.Node, e.Doctor.Title, e.Doctor.Message)
	}
	if d.code != 0 {
		t.Errorf("doctor exited %d on a cluster whose pods all run", d.code)
	}
}

// waitAPIServiceAvailable waits until the APIService's Available condition is True.
func (c *testCluster) waitAPIServiceAvailable(name string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "apiservice", name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		if err == nil && strings.HasPrefix(out, "True") {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("APIService %s not Available within %s: %s %v", name, timeout, out, err)
		}
		time.Sleep(time.Second)
	}
}

// flannelTX is the packet count host i's flannel VXLAN device has sent.
func (c *testCluster) flannelTX(i int) int64 {
	c.t.Helper()
	n, err := strconv.ParseInt(c.exec(i, "cat", "/sys/class/net/flannel.1/statistics/tx_packets"), 10, 64)
	if err != nil {
		c.t.Fatalf("%s: flannel.1 tx_packets: %v", c.hosts[i].Name, err)
	}
	return n
}

// uploadTimes is, per host, the time from the first to the last upload event of file.
func uploadTimes(r run, file string) map[string]time.Duration {
	first, out := map[string]time.Time{}, map[string]time.Duration{}
	for _, e := range r.ofType(events.UploadProgress) {
		if e.Upload == nil || !strings.HasSuffix(e.Upload.File, "/"+file) {
			continue
		}
		if _, ok := first[e.Host]; !ok {
			first[e.Host] = e.Time
		}
		if e.Upload.Done {
			out[e.Host] = e.Time.Sub(first[e.Host])
		}
	}
	return out
}
