// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/k3strap/k3strap/events"
)

// rancherInv is a one-server airgap inventory (the K3s simulator) with a rancher section
// (.Extra.rancher, indented under spec), optional first-server taints (.Extra.taints) and extra
// K3s config lines (.Extra.config).
const rancherInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: e2e
spec:
  k3s:
{{template "k3s-airgap" .}}
    config:
      kubelet-arg: [fail-cgroupv1=false]   # the harness machine boots with cgroup v1
{{- if .Extra.config}}
{{.Extra.config}}
{{- end}}
  ssh:
    keyPath: {{.Key}}
    knownHosts: {{.KnownHosts}}
    connectTimeout: 3s
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
{{- if .Extra.taints}}
      taints: {{.Extra.taints}}
{{- end}}
  rancher:
{{.Extra.rancher}}
`

// setKnobs rewrites the simulator's knobs on host i (time scale kept) and restarts K3s when
// it runs, so that they apply.
func (c *testCluster) setKnobs(i int, knobs string, restart bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.WriteFile(ctx, c.hosts[i].Index, "/etc/k3ssim/sim.yaml", fmt.Appendf(nil, "timeScale: %v\n%s", SimTimeScale, knobs), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if restart {
		c.exec(i, "systemctl", "restart", "k3s")
		deadline := time.Now().Add(time.Minute)
		for c.exec(i, "sh", "-c", "k3s kubectl get --raw /readyz 2>/dev/null || true") != "ok" {
			if time.Now().After(deadline) {
				c.t.Fatal("K3s did not come back within a minute after the restart")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func milestoneNames(r run) []string {
	var out []string
	for _, e := range r.ofType(events.Milestone) {
		if e.Phase == "rancher" {
			out = append(out, e.Milestone.Name)
		}
	}
	return out
}

// runOnTerminal runs k3strap with stdout and stderr on a new pseudo-terminal (what a person
// at a terminal sees) and returns everything written there.
func (c *testCluster) runOnTerminal(timeout time.Duration, args ...string) (int, string) {
	c.t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		c.t.Fatalf("pseudo-terminal: %v", err)
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin.k3strap, append(args, "-f", c.inv)...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = slave, slave
	cmd.Env = append(os.Environ(), "TERM=xterm")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, master); close(copied) }() // ends with EIO once the child exits
	err = cmd.Wait()
	<-copied
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	if ctx.Err() != nil {
		c.t.Fatalf("k3strap on a terminal did not finish within %s:\n%s", timeout, out.String())
	}
	return code, strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// openPTY opens a pseudo-terminal pair (posix_openpt, unlockpt, ptsname through ioctls).
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// TestRancherInstall: rancher.install on a fresh server. The HelmCharts and the bootstrap
// Secret land in the manifests folder with mode 0600, the simulator installs the charts and
// makes cattle-system/rancher available, and the Rancher URL answers (through the simulator's
// ingress stand-in on the server's port 443). The generated bootstrap password is shown once,
// in the final summary on a terminal, and nowhere else: not in plain or JSON output, the
// --log-file, the server's K3s log, nor `render`. A second apply changes nothing.
func TestRancherInstall(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(rancherInv, map[string]any{"rancher": "    timeout: 3m\n    install:\n      version: 2.11.3\n"})
	kc := filepath.Join(c.dir, "e2e.kubeconfig")
	logFile := filepath.Join(c.dir, "apply.log")
	ip := c.hosts[0].Address

	code, term := c.runOnTerminal(6*time.Minute, "apply", "--output", "plain", "--kubeconfig-out", kc, "--log-file", logFile)
	if code != 0 {
		t.Fatalf("apply on a terminal exited %d:\n%s", code, term)
	}
	pwFile := kc + ".rancher-bootstrap-password"
	st, err := os.Stat(pwFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("password file %s: %v %v", pwFile, st, err)
	}
	b, _ := os.ReadFile(pwFile)
	pw := strings.TrimSpace(string(b))
	if len(pw) < 12 {
		t.Fatalf("bootstrap password %q too short", pw)
	}
	if n := strings.Count(term, pw); n != 1 {
		t.Fatalf("the terminal shows the password %d times, want once:\n%s", n, term)
	}
	if summary := strings.Index(term, "apply OK"); summary < 0 || strings.Index(term, pw) < summary {
		t.Errorf("the password is not in the final summary:\n%s", term)
	}
	if testing.Verbose() {
		t.Logf("terminal output (password masked):\n%s", strings.ReplaceAll(term, pw, "<password>"))
	}
	if !strings.Contains(term, "rancher: https://"+ip+".sslip.io") {
		t.Errorf("the summary does not show the Rancher URL:\n%s", term)
	}
	logged, _ := os.ReadFile(logFile)
	if strings.Contains(string(logged), pw) {
		t.Error("the --log-file holds the bootstrap password")
	}
	if !strings.Contains(string(logged), "rancher bootstrap password: in "+pwFile) {
		t.Errorf("the --log-file does not say where the password is:\n%s", logged)
	}

	// What landed on the server: 0600 manifests K3s applied; charts, deployment, URL.
	files := "/var/lib/rancher/k3s/server/manifests/k3strap-"
	if got := c.exec(0, "stat", "-c", "%a %n", files+"rancher-bootstrap.yaml", files+"cert-manager.yaml", files+"rancher.yaml"); strings.Count(got, "600 ") != 3 {
		t.Errorf("manifest modes:\n%s", got)
	}
	if got := c.exec(0, "k3s", "kubectl", "get", "helmcharts", "-n", "kube-system", "-o", "name"); !strings.Contains(got, "helmchart.helm.cattle.io/rancher") || !strings.Contains(got, "helmchart.helm.cattle.io/cert-manager") {
		t.Errorf("HelmCharts the simulator reports:\n%s", got)
	}
	if got := c.exec(0, "k3s", "kubectl", "get", "deployment", "rancher", "-n", "cattle-system", "-o", "jsonpath={.status.availableReplicas}"); got != "1" {
		t.Errorf("cattle-system/rancher available replicas %q, want 1 (one server)", got)
	}
	if got := c.exec(0, "k3s", "kubectl", "get", "helmchart", "rancher", "-n", "kube-system", "-o", "jsonpath={.spec.valuesContent}"); strings.Contains(got, pw) || !strings.Contains(got, "hostname: "+ip+".sslip.io") {
		t.Errorf("rancher HelmChart values:\n%s", got)
	}
	if strings.Contains(c.exec(0, "sh", "-c", "journalctl -u k3s --no-pager -o cat | tail -n 3000"), pw) {
		t.Error("K3s's log holds the bootstrap password")
	}

	// Second apply, JSON: nothing uploaded, milestones again, the file named but not new.
	r := c.k3strap(3*time.Minute, "apply", "--kubeconfig-out", kc)
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("second apply exited %d", r.code)
	}
	if strings.Contains(r.stdout+r.stderr, pw) {
		t.Error("the JSON output holds the bootstrap password")
	}
	if ups := r.ofType(events.UploadProgress); len(ups) > 0 {
		t.Errorf("second apply uploaded %s", ups[0].Upload.File)
	}
	want := []string{"cert-manager-installed", "rancher-installed", "rancher-available", "rancher-url-answers"}
	if got := milestoneNames(r); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rancher milestones %v, want %v", got, want)
	}
	s := r.summary(t)
	if s.RancherURL != "https://"+ip+".sslip.io" || s.RancherPasswordFile != pwFile || s.RancherPasswordNew {
		t.Errorf("summary rancherURL %q file %q new %v", s.RancherURL, s.RancherPasswordFile, s.RancherPasswordNew)
	}

	// render never shows a password, not even one the inventory sets.
	c.writeInventory(rancherInv, map[string]any{"rancher": "    install:\n      version: 2.11.3\n      bootstrapPassword: inventory-given-Pa55word\n"})
	rr := c.k3strap(time.Minute, "render", "--output", "plain")
	if rr.code != 0 || strings.Contains(rr.stdout+rr.stderr, "inventory-given-Pa55word") || strings.Contains(rr.stdout, pw) {
		t.Errorf("render exited %d or shows a password:\n%s", rr.code, rr.stdout)
	}
	if !strings.Contains(rr.stdout, files+"rancher.yaml") {
		t.Errorf("render does not list the rancher HelmChart:\n%s", rr.stdout)
	}
}

// TestRancherInstallFailures: a timeout names the last milestone reached and what was
// awaited; a failed chart install reports the install job's log tail.
func TestRancherInstallFailures(t *testing.T) {
	c := newCluster(t, 1)
	c.setKnobs(0, "deploymentDelay: 3000s\n", false) // install jobs never finish in time
	c.writeInventory(rancherInv, map[string]any{"rancher": "    timeout: 20s\n    install:\n      version: 2.11.3\n"})
	r := c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 4 {
		t.Fatalf("apply exited %d, want 4", r.code)
	}
	var fail *events.ErrorInfo
	for _, e := range r.ofType(events.Error) {
		if e.Phase == "rancher" {
			fail = e.Error
		}
	}
	if fail == nil || !strings.Contains(fail.Message, "not ready within 20s") || !strings.Contains(fail.Message, "last milestone reached: none yet") ||
		!strings.Contains(fail.Message, "helm install of cert-manager") {
		t.Fatalf("timeout error %+v\nK3s log:\n%s", fail, c.exec(0, "sh", "-c", "journalctl -u k3s -o cat --no-pager | grep -v 'level=info' | tail -40; systemctl show -p NRestarts k3s"))
	}
	if ev := strings.Join(fail.Evidence, "\n"); !strings.Contains(ev, "of job helm-install-cert-manager is Running") {
		t.Errorf("timeout evidence does not show the install job's pod:\n%s", ev)
	}

	c.setKnobs(0, "failHelmCharts: [rancher]\n", true)
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 4 {
		t.Fatalf("apply exited %d, want 4", r.code)
	}
	fail = nil
	for _, e := range r.ofType(events.Error) {
		if e.Phase == "rancher" {
			fail = e.Error
		}
	}
	if fail == nil || !strings.Contains(fail.Message, "helm install of rancher failed") {
		t.Fatalf("chart failure %+v; errors: %+v", fail, r.ofType(events.Error))
	}
	ev := strings.Join(fail.Evidence, "\n")
	if !strings.Contains(ev, "BackoffLimitExceeded") || !strings.Contains(ev, "log: Error: INSTALLATION FAILED") {
		t.Errorf("evidence lacks the job state and log tail:\n%s", ev)
	}
	if got := milestoneNames(r); len(got) == 0 || got[0] != "cert-manager-installed" {
		t.Errorf("milestones %v: cert-manager should be installed before rancher failed", got)
	}
}

// TestRancherPreflightTaintedFirstNode: registering a cluster whose first server carries a
// custom taint, without declaring the agents' tolerations, fails preflight naming
// RancherAgentTolerations (error) and RancherVersion (warning, an old Rancher); nothing is
// installed.
func TestRancherPreflightTaintedFirstNode(t *testing.T) {
	c := newCluster(t, 1)
	c.writeInventory(rancherInv, map[string]any{
		"taints":  "[dedicated=edge:NoExecute]",
		"config":  "      disable: [coredns, local-storage, metrics-server, traefik]",
		"rancher": "    register:\n      importURL: https://127.0.0.1:9/v3/import/tok_c-1.yaml\n      rancherVersion: v2.10.3\n",
	})
	r := c.k3strap(2*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 3 {
		t.Fatalf("apply exited %d, want 3 (preflight)", r.code)
	}
	got := map[string]string{}
	for _, e := range r.ofType(events.Finding) {
		if e.Host == "cp1" {
			got[e.Finding.Check] = e.Finding.Severity
		}
	}
	if got["RancherAgentTolerations"] != "error" || got["RancherVersion"] != "warning" {
		t.Fatalf("findings %v: want RancherAgentTolerations error and RancherVersion warning", got)
	}
	if out := c.exec(0, "sh", "-c", "ls /usr/local/bin/k3s 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Error("preflight failure changed the host")
	}
}

// rancherStandIn is a local HTTPS test server of ours on loopback that STANDS IN FOR RANCHER
// (no Rancher runs here): the v3 API calls k3strap makes (server-version, clusters,
// clusterregistrationtokens) and the import manifests, rendered like Rancher's: a
// cattle-cluster-agent Deployment with Rancher's default tolerations plus the cluster's
// clusterAgentDeploymentCustomization.appendTolerations.
type rancherStandIn struct {
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	clusters map[string]*standInCluster // by id
}

type standInCluster struct {
	ID, Name, RegToken string
	Customization      map[string]any // clusterAgent..., fleetAgent... as posted
}

func newRancherStandIn(t *testing.T, apiToken string) *rancherStandIn {
	s := &rancherStandIn{token: apiToken, clusters: map[string]*standInCluster{
		"c-import": {ID: "c-import", Name: "made-in-ui", RegToken: "importSECRETtok"},
	}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = ln
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *rancherStandIn) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/v3/import/") {
		for _, c := range s.clusters {
			if r.URL.Path == "/v3/import/"+c.RegToken+"_"+c.ID+".yaml" {
				_, _ = w.Write(s.importManifest(c))
				return
			}
		}
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"error","code":"Unauthorized","message":"must authenticate"}`))
		return
	}
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	view := func(c *standInCluster) map[string]any {
		m := map[string]any{"id": c.ID, "name": c.Name, "type": "cluster"}
		for k, v := range c.Customization {
			m[k] = v
		}
		return m
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v3/settings/server-version":
		reply(map[string]any{"id": "server-version", "value": "v2.11.3"})
	case r.Method == http.MethodGet && r.URL.Path == "/v3/clusters":
		data := []any{}
		for _, c := range s.clusters {
			if c.Name == r.URL.Query().Get("name") {
				data = append(data, view(c))
			}
		}
		reply(map[string]any{"data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v3/clusters":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		c := &standInCluster{ID: fmt.Sprintf("c-%05d", len(s.clusters)), Name: fmt.Sprint(body["name"]), Customization: map[string]any{}}
		for _, k := range []string{"clusterAgentDeploymentCustomization", "fleetAgentDeploymentCustomization"} {
			c.Customization[k] = body[k]
		}
		s.clusters[c.ID] = c
		w.WriteHeader(http.StatusCreated)
		reply(view(c))
	case r.Method == http.MethodGet && r.URL.Path == "/v3/clusterregistrationtokens":
		data := []any{}
		if c := s.clusters[r.URL.Query().Get("clusterId")]; c != nil && c.RegToken != "" {
			data = append(data, map[string]any{"clusterId": c.ID, "manifestUrl": s.srv.URL + "/v3/import/" + c.RegToken + "_" + c.ID + ".yaml"})
		}
		reply(map[string]any{"data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v3/clusterregistrationtokens":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if c := s.clusters[fmt.Sprint(body["clusterId"])]; c != nil {
			c.RegToken = "regSECRET" + c.ID
		}
		w.WriteHeader(http.StatusCreated)
		reply(map[string]any{"type": "clusterRegistrationToken"})
	default:
		http.NotFound(w, r)
	}
}

// importManifest renders the subset of Rancher's import manifest k3strap and the simulator
// act on.
func (s *rancherStandIn) importManifest(c *standInCluster) []byte {
	tols := []any{
		map[string]any{"effect": "NoSchedule", "key": "node-role.kubernetes.io/controlplane", "value": "true"},
		map[string]any{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
		map[string]any{"effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists"},
	}
	if cad, ok := c.Customization["clusterAgentDeploymentCustomization"].(map[string]any); ok {
		if extra, ok := cad["appendTolerations"].([]any); ok {
			tols = append(tols, extra...)
		}
	}
	tj, _ := json.Marshal(tols)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	return fmt.Appendf(nil, `apiVersion: v1
kind: Namespace
metadata:
  name: cattle-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cattle
  namespace: cattle-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cattle-admin
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cattle-admin-binding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cattle-admin
subjects:
- kind: ServiceAccount
  name: cattle
  namespace: cattle-system
---
apiVersion: v1
kind: Secret
metadata:
  name: cattle-credentials-%[1]s
  namespace: cattle-system
type: Opaque
data:
  url: %[2]s
  token: %[3]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cattle-cluster-agent
  namespace: cattle-system
spec:
  selector:
    matchLabels:
      app: cattle-cluster-agent
  template:
    metadata:
      labels:
        app: cattle-cluster-agent
    spec:
      serviceAccountName: cattle
      tolerations: %[4]s
      containers:
      - name: cluster-register
        image: rancher/rancher-agent:v2.11.3
        env:
        - name: CATTLE_SERVER
          value: %[5]q
        - name: CATTLE_CLUSTER
          value: "true"
---
apiVersion: v1
kind: Service
metadata:
  name: cattle-cluster-agent
  namespace: cattle-system
spec:
  ports:
  - port: 80
    targetPort: 80
    protocol: TCP
    name: http
  selector:
    app: cattle-cluster-agent
`, c.ID, b64(s.srv.URL), b64("agent-"+c.RegToken), tj, s.srv.URL)
}

// TestRancherRegister: the cluster registers with a Rancher — here our local HTTPS stand-in on
// loopback (rancherStandIn; no real Rancher runs) — whose certificate is self-signed
// (insecure: true). The first server carries a custom taint. With an import URL whose manifest
// lacks the toleration, apply refuses before applying anything (F3 evidence). In API mode
// k3strap creates the cluster with clusterAgentDeploymentCustomization and
// fleetAgentDeploymentCustomization appendTolerations for the taint, applies the import
// manifest with `k3s kubectl apply` on the first server, and cattle-cluster-agent becomes
// available on the tainted node. The registration and API tokens never show in the output.
func TestRancherRegister(t *testing.T) {
	const apiToken = "token-e2e:APISECRETvalue"
	rs := newRancherStandIn(t, apiToken)
	c := newCluster(t, 1)
	base := map[string]any{
		"taints": "[dedicated=edge:NoExecute]",
		"config": "      disable: [coredns, local-storage, metrics-server, traefik]",
	}
	with := func(rancher string) map[string]any {
		m := map[string]any{"rancher": rancher}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	tol := "{key: dedicated, operator: Equal, value: edge, effect: NoExecute}"

	// Import URL of a cluster made in Rancher's UI without the tolerations; the inventory
	// claims them (so preflight passes), the manifest shows the truth.
	c.writeInventory(rancherInv, with(fmt.Sprintf("    timeout: 2m\n    register:\n      importURL: %s/v3/import/importSECRETtok_c-import.yaml\n      insecure: true\n      rancherVersion: v2.11.3\n      clusterAgentTolerations: [%s]\n      fleetAgentTolerations: [%s]\n", rs.srv.URL, tol, tol)))
	r := c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 4 {
		t.Fatalf("apply with a manifest lacking the toleration exited %d, want 4", r.code)
	}
	var fail *events.ErrorInfo
	for _, e := range r.ofType(events.Error) {
		if e.Phase == "rancher" {
			fail = e.Error
		}
	}
	if fail == nil || !strings.Contains(fail.Message, "does not tolerate") || !strings.Contains(fail.Message, "dedicated=edge:NoExecute") || !strings.Contains(fail.Fix, "appendTolerations") {
		t.Fatalf("error %+v", fail)
	}
	if out := c.exec(0, "sh", "-c", "k3s kubectl get ns cattle-system 2>&1 || true"); !strings.Contains(out, "NotFound") {
		t.Errorf("the import manifest was applied anyway: %s", out)
	}
	if strings.Contains(r.stdout+r.stderr, "importSECRETtok") {
		t.Error("the import URL's token appears in the output")
	}

	// API mode.
	t.Setenv("RANCHER_E2E_TOKEN", apiToken)
	c.writeInventory(rancherInv, with(fmt.Sprintf("    timeout: 2m\n    register:\n      url: %s\n      apiTokenEnv: RANCHER_E2E_TOKEN\n      clusterName: edge-lab\n      insecure: true\n", rs.srv.URL)))
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("API-mode apply exited %d", r.code)
	}
	want := []string{"rancher-cluster-ready", "import-manifest-applied", "cattle-cluster-agent-available"}
	if got := milestoneNames(r); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("milestones %v, want %v", got, want)
	}
	rs.mu.Lock()
	var made *standInCluster
	for _, cl := range rs.clusters {
		if cl.Name == "edge-lab" {
			made = cl
		}
	}
	rs.mu.Unlock()
	if made == nil {
		t.Fatal("no cluster edge-lab created in the stand-in")
	}
	for _, k := range []string{"clusterAgentDeploymentCustomization", "fleetAgentDeploymentCustomization"} {
		j, _ := json.Marshal(made.Customization[k])
		var got struct {
			AppendTolerations []map[string]string `json:"appendTolerations"`
		}
		_ = json.Unmarshal(j, &got)
		want := map[string]string{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoExecute"}
		if len(got.AppendTolerations) != 1 || fmt.Sprint(got.AppendTolerations[0]) != fmt.Sprint(want) {
			t.Errorf("%s = %s, want appendTolerations [%v]", k, j, want)
		}
	}
	if got := c.exec(0, "k3s", "kubectl", "get", "deployment", "cattle-cluster-agent", "-n", "cattle-system", "-o", "jsonpath={.status.availableReplicas}"); got != "1" {
		t.Errorf("cattle-cluster-agent available replicas %q", got)
	}
	if s := r.summary(t); s.RancherURL != rs.srv.URL+"/dashboard/c/"+made.ID {
		t.Errorf("summary rancherURL %q", s.RancherURL)
	}
	if out := r.stdout + r.stderr; strings.Contains(out, "APISECRETvalue") || strings.Contains(out, "regSECRET") {
		t.Error("a token appears in the output")
	}

	// The import URL of that cluster (it now carries the tolerations): registering again is
	// a no-op apply and the agent stays available.
	c.writeInventory(rancherInv, with(fmt.Sprintf("    timeout: 2m\n    register:\n      importURL: %s/v3/import/regSECRET%s_%s.yaml\n      insecure: true\n      rancherVersion: v2.11.3\n      clusterAgentTolerations: [%s]\n      fleetAgentTolerations: [%s]\n", rs.srv.URL, made.ID, made.ID, tol, tol)))
	r = c.k3strap(4*time.Minute, "apply")
	defer r.dump(t)
	if r.code != 0 {
		t.Fatalf("import-URL apply exited %d", r.code)
	}
	if s := r.summary(t); s.RancherURL != rs.srv.URL {
		t.Errorf("summary rancherURL %q, want the Rancher origin", s.RancherURL)
	}
	if strings.Contains(r.stdout+r.stderr, "regSECRET") {
		t.Error("the import URL's token appears in the output")
	}
}
