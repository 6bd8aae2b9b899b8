// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/events"
)

// `k3strap doctor` against clusters installed WITHOUT k3strap: the simulator binary
// and the install script put on the hosts by hand (harness exec, no SSH), as an operator
// following the K3s docs would.

// handInstall installs K3s on host i by hand: the simulator as /usr/local/bin/k3s, config.yaml,
// the install script with INSTALL_K3S_SKIP_DOWNLOAD, then starts the unit without waiting.
func (c *testCluster) handInstall(i int, exec, config string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	idx := c.hosts[i].Index
	bin, err := os.ReadFile(filepath.Join(c.bin.artifacts, "k3s"))
	if err != nil {
		c.t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot(), "templates", "install", "k3s-install.sh"))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{"/usr/local/bin/k3s", bin, 0o755}, {"/root/install.sh", script, 0o755}, {"/etc/rancher/k3s/config.yaml", []byte(config), 0o600}} {
		if err := c.h.WriteFile(ctx, idx, f.path, f.data, f.mode); err != nil {
			c.t.Fatalf("%s: writing %s: %v", c.hosts[i].Name, f.path, err)
		}
	}
	unit := "k3s"
	if exec == "agent" {
		unit = "k3s-agent"
	}
	if out, err := c.h.Exec(ctx, idx, "sh", "-c", "INSTALL_K3S_SKIP_DOWNLOAD=true INSTALL_K3S_SKIP_START=true INSTALL_K3S_EXEC="+exec+
		" sh /root/install.sh >/dev/null && systemctl start --no-block "+unit); err != nil {
		c.t.Fatalf("%s: install script: %v\n%s", c.hosts[i].Name, err, out)
	}
}

// waitNode waits until `k3s kubectl get node NAME` works on host 0 (and Ready when ready).
func (c *testCluster) waitNode(name string, ready bool) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.h.Exec(ctx, c.hosts[0].Index, "/usr/local/bin/k3s", "kubectl", "get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		cancel()
		if err == nil && (!ready || strings.TrimSpace(string(out)) == "True") {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.t.Fatalf("node %s not there (ready=%v) within 90 s", name, ready)
}

// waitFile waits until path exists and is not empty on host i.
func (c *testCluster) waitFile(i int, path string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.h.Exec(ctx, c.hosts[i].Index, "test", "-s", path)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	c.t.Fatalf("%s: no %s within 60 s", c.hosts[i].Name, path)
}

// kubectl runs `k3s kubectl args...` on host 0 with stdin.
func (c *testCluster) kubectl(stdin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var in []byte
	if stdin != "" {
		in = []byte(stdin)
	}
	out, err := c.h.ExecInput(ctx, c.hosts[0].Index, in, append([]string{"/usr/local/bin/k3s", "kubectl"}, args...)...)
	if err != nil {
		c.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// shortCert returns a PEM certificate that expires in d.
func shortCert(t *testing.T, cn string, d time.Duration) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(d)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// findings returns the run's doctor findings as "ID@node".
func (r run) findings() map[string]events.DoctorFinding {
	out := map[string]events.DoctorFinding{}
	for _, e := range r.ofType(events.DoctorFindingType) {
		out[e.Doctor.ID+"@"+e.Doctor.Node] = *e.Doctor
	}
	return out
}

const doctorInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: doctor
spec:
  k3s:
{{template "k3s-airgap" .}}
{{template "ssh-root" .}}
  hosts:
    - name: {{(index .Hosts 0).Name}}
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: {{(index .Hosts 1).Name}}
      address: {{(index .Hosts 1).Address}}
      role: agent
      taints: ["gpu=true:NoSchedule"]
      labels: {tier: edge}
    - name: {{(index .Hosts 2).Name}}
      address: {{(index .Hosts 2).Address}}
      role: agent
`

// TestDoctorBrokenCluster: one hand-installed cluster broken in seven ways; doctor -f names
// each finding with its node, the bundle holds no secret, and doctor --ssh (no inventory)
// finds the agent from the cluster and --fix --yes puts its lost taint back.
func TestDoctorBrokenCluster(t *testing.T) {
	c := newCluster(t, 3)
	h1, h2, h3 := c.hosts[0], c.hosts[1], c.hosts[2]
	// h1: F1 (embedded cloud controller off, kubelet external), a taint CoreDNS does not
	// tolerate (F3) and the legacy master taint (F4).
	c.handInstall(0, "server", `disable-cloud-controller: true
kubelet-arg: [fail-cgroupv1=false, cloud-provider=external]
node-taint: ["dedicated=edge:NoSchedule", "node-role.kubernetes.io/master=true:NoSchedule"]
`)
	c.waitNode(h1.Name, true)
	token := c.exec(0, "cat", "/var/lib/rancher/k3s/server/token")
	// h2: an agent registered with a taint and a label that are removed afterwards (F5), and
	// whose subnet.env goes missing.
	c.handInstall(1, "agent", fmt.Sprintf("server: https://%s:6443\ntoken: %s\nkubelet-arg: [fail-cgroupv1=false]\nnode-taint: [gpu=true:NoSchedule]\nnode-label: [tier=edge]\n", h1.Address, token))
	// h3: an agent with a wrong token: K3s exits at once, systemd restarts it (crash loop).
	c.handInstall(2, "agent", fmt.Sprintf("server: https://%s:6443\ntoken: wrong-password-for-test\nkubelet-arg: [fail-cgroupv1=false]\n", h1.Address))
	c.waitNode(h2.Name, true)
	c.waitFile(1, "/run/flannel/subnet.env")
	c.writeInventory(doctorInv, nil)
	// Before the taint is removed no node takes CoreDNS: F3 (h1 sorts first of the nodes whose
	// taints block it).
	r0 := c.k3strap(2*time.Minute, "doctor", "--stall-grace", "1s")
	defer r0.dump(t)
	if _, ok := r0.findings()["F3-pending-on-taint@"+h1.Name]; !ok {
		t.Errorf("no finding F3-pending-on-taint@%s", h1.Name)
	}
	c.kubectl("", "taint", "nodes", h2.Name, "gpu-")
	c.kubectl("", "label", "nodes", h2.Name, "tier-")
	c.exec(1, "rm", "-f", "/run/flannel/subnet.env")
	// F4: a flannel DaemonSet that tolerates only the control-plane taint.
	const secret = "s3cr3t-doctor-pw"
	c.kubectl(`apiVersion: v1
kind: Namespace
metadata: {name: kube-flannel}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-flannel-ds, namespace: kube-flannel}
spec:
  selector: {matchLabels: {app: flannel}}
  template:
    metadata: {labels: {app: flannel}}
    spec:
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      containers: [{name: kube-flannel, image: docker.io/flannel/flannel:v0.24.0}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: agent-with-secret, namespace: default}
spec:
  selector: {matchLabels: {app: s}}
  template:
    metadata: {labels: {app: s}}
    spec:
      containers:
      - name: c
        image: busybox
        env: [{name: CATTLE_BOOTSTRAP_PASSWORD, value: `+secret+`}]
---
apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata: {name: secretchart, namespace: kube-system}
spec:
  chart: example
  valuesContent: |-
    bootstrapPassword: `+secret+`
`, "apply", "-f", "-")
	// A certificate 30 days from expiry.
	if err := c.h.WriteFile(context.Background(), h1.Index, "/var/lib/rancher/k3s/server/tls/serving-kube-apiserver.crt", shortCert(t, "kube-apiserver", 30*24*time.Hour), 0o644); err != nil {
		t.Fatal(err)
	}
	// h3 has crashed at least once by now (RestartSec=5s).
	time.Sleep(6 * time.Second)

	bundle := filepath.Join(c.dir, "support.tar.gz")
	r := c.k3strap(2*time.Minute, "doctor", "--stall-grace", "1s", "--bundle", bundle)
	defer r.dump(t)
	if r.code != 8 {
		t.Errorf("doctor exit %d, want 8 (errors)", r.code)
	}
	got := r.findings()
	var ids []string
	for k := range got {
		ids = append(ids, k)
	}
	t.Logf("findings: %v", ids)
	for _, want := range []string{
		"F1-cloud-controller@" + h1.Name,
		"F4-cni-toleration@" + h1.Name,
		"cert-expiring@" + h1.Name,
		"F5-drift@" + h2.Name,
		"no-pod-network@" + h2.Name,
		"crash-loop@" + h3.Name,
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no finding %s", want)
		}
	}
	if f, ok := got["crash-loop@"+h3.Name]; ok && (len(f.Evidence) == 0 || !strings.Contains(f.Evidence[0].Text, "401")) {
		t.Errorf("crash-loop does not lead with the fatal line: %+v", f.Evidence)
	}
	for _, h := range r.summary(t).Hosts {
		if h.SSHCommands > 3 {
			t.Errorf("%s: %d SSH commands, want at most 3 (connect check, evidence, cluster view)", h.Host, h.SSHCommands)
		}
	}
	// The bundle: what doctor read, without the token or the passwords.
	files := untar(t, bundle)
	for _, want := range []string{"k3strap-doctor/findings.json", "k3strap-doctor/cluster/nodes.json", "k3strap-doctor/cluster/pods.json",
		"k3strap-doctor/nodes/" + h1.Name + "/journal.txt", "k3strap-doctor/nodes/" + h2.Name + "/config/etc/rancher/k3s/config.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s", want)
		}
	}
	pw := strings.SplitN(token, "::server:", 2)
	for name, data := range files {
		for _, s := range []string{token, pw[len(pw)-1], secret, "wrong-password-for-test", "PRIVATE KEY"} {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("bundle file %s holds a secret (%.12s…)", name, s)
			}
		}
	}

	// No inventory: --ssh to the server finds h2 and h3 from the cluster (h3 has no node)
	// and --fix --yes puts h2's lost taint and label back.
	r2 := c.k3strap(2*time.Minute, "doctor", "--ssh", "root@"+h1.Address, "--ssh-key-path", c.h.KeyPath(),
		"--ssh-known-hosts", filepath.Join(c.dir, "known_hosts"), "--stall-grace", "1s", "--fix", "--yes", "-f", "")
	defer r2.dump(t)
	got2 := r2.findings()
	for _, want := range []string{"F5-lost-taint@" + h2.Name, "F5-lost-label@" + h2.Name, "no-pod-network@" + h2.Name, "F1-cloud-controller@" + h1.Name} {
		if _, ok := got2[want]; !ok {
			t.Errorf("--ssh: no finding %s", want)
		}
	}
	if taints := c.kubectl("", "get", "node", h2.Name, "-o", "jsonpath={.spec.taints}"); !strings.Contains(taints, "gpu") {
		t.Errorf("--fix did not put the gpu taint back on %s: %s", h2.Name, taints)
	}
	if labels := c.kubectl("", "get", "node", h2.Name, "-o", "jsonpath={.metadata.labels.tier}"); labels != "edge" {
		t.Errorf("--fix did not put the tier label back on %s: %q", h2.Name, labels)
	}
}

func untar(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %04o, want 0600", st.Mode().Perm())
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

// TestDoctorHealthyCluster: a hand-installed server with the default settings reports no
// error (exit 0, or 7 for warnings such as a nearly full disk of the test machine).
func TestDoctorHealthyCluster(t *testing.T) {
	c := newCluster(t, 1)
	c.handInstall(0, "server", "kubelet-arg: [fail-cgroupv1=false]\n")
	c.waitNode(c.hosts[0].Name, true)
	// Until subnet.env exists the node has no pod network yet.
	c.waitFile(0, "/run/flannel/subnet.env")
	r := c.k3strap(time.Minute, "doctor", "--ssh", "root@"+c.hosts[0].Address, "--ssh-key-path", c.h.KeyPath(),
		"--ssh-known-hosts", filepath.Join(c.dir, "known_hosts"))
	defer r.dump(t)
	if r.code != 0 && r.code != 7 {
		t.Errorf("doctor on a healthy cluster: exit %d, want 0 (or 7 for warnings)", r.code)
	}
	for k, f := range r.findings() {
		if f.Severity == "error" {
			t.Errorf("healthy cluster: error finding %s: %s", k, f.Title)
		}
	}
}
