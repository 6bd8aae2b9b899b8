// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/k3strap/k3strap/k3s"
)

// tunnel is a Conn whose DialContext reaches a test server whatever address is asked for (as
// an SSH direct-tcpip channel reaches the server's loopback) and records the addresses.
type tunnel struct {
	kubeconfig []byte
	target     string
	mu         sync.Mutex
	dialled    []string
	read       []string
}

func (t *tunnel) Host() string { return "cp1" }

func (t *tunnel) ReadFile(_ context.Context, path string) ([]byte, error) {
	t.read = append(t.read, path)
	if t.kubeconfig == nil {
		return nil, fmt.Errorf("cp1: %s: %w", path, os.ErrNotExist)
	}
	return append([]byte(nil), t.kubeconfig...), nil
}

func (t *tunnel) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	t.mu.Lock()
	t.dialled = append(t.dialled, addr)
	t.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, t.target)
}

func kubeconfigFor(srv *httptest.Server, server, token string) []byte {
	return kubeconfigWithCA(srv.Certificate().Raw, server, token)
}

// otherCA is a self-signed CA certificate (DER) that signed nothing the test server shows.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k3s-server-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func kubeconfigWithCA(der []byte, server, token string) []byte {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    token: %s
`, base64.StdEncoding.EncodeToString(ca), server, token)
}

// TestConnectThroughTheTunnel: the API is reached at the kubeconfig's own address (K3s's
// loopback) through the connection's dialer, TLS is verified against the kubeconfig's CA, the
// server's credentials are sent, and errors are typed and name the host.
func TestConnectThroughTheTunnel(t *testing.T) {
	var auth []string
	var mu sync.Mutex
	var putType string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		if r.Method == http.MethodPut {
			putType = r.Header.Get("Content-Type")
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/nodes/cp1":
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"cp1","resourceVersion":"7"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"nodes \"x\" not found","details":{"name":"x","kind":"nodes"}}`)
		}
	}))
	defer srv.Close()
	tun := &tunnel{kubeconfig: kubeconfigFor(srv, "https://127.0.0.1:6443", "s3cret-token"), target: srv.Listener.Addr().String()}
	ctx := context.Background()
	a, err := Connect(ctx, func() Conn { return tun })
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.GetNode(ctx, "cp1")
	if err != nil || n.Name != "cp1" || n.ResourceVersion != "7" {
		t.Fatalf("GetNode: %v %v", n, err)
	}
	_, err = a.GetNode(ctx, "x")
	if !apierrors.IsNotFound(err) || !strings.HasPrefix(err.Error(), "cp1: get node x") {
		t.Errorf("missing node: %v, want a NotFound naming cp1", err)
	}
	if len(tun.read) != 1 || tun.read[0] != k3s.PathKubeconfig {
		t.Errorf("read %v, want %s once", tun.read, k3s.PathKubeconfig)
	}
	if len(tun.dialled) == 0 || tun.dialled[0] != "127.0.0.1:6443" {
		t.Errorf("dialled %v, want the server's loopback 127.0.0.1:6443", tun.dialled)
	}
	// Writes are JSON (the simulator, like any API server, reads it; protobuf it does not).
	if err := a.ReplaceNode(ctx, n); err != nil || putType != "application/json" {
		t.Errorf("ReplaceNode: %v, sent as %q, want application/json", err, putType)
	}
	if len(auth) != 3 || auth[0] != "Bearer s3cret-token" {
		t.Errorf("Authorization headers %q, want the kubeconfig's credentials", auth)
	}

	// A kubeconfig whose CA did not sign the server's certificate: refused.
	tun2 := &tunnel{kubeconfig: kubeconfigWithCA(otherCA(t), "https://127.0.0.1:6443", "t"), target: srv.Listener.Addr().String()}
	a2, err := Connect(ctx, func() Conn { return tun2 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.GetNode(ctx, "cp1"); err == nil || !strings.Contains(err.Error(), "certificate") || IsAPIDown(err) {
		t.Errorf("a server the CA did not sign: %v, want a certificate error (not the API being down)", err)
	}

	// No kubeconfig (K3s not installed yet): an error naming the host and the file.
	if _, err := Connect(ctx, func() Conn { return &tunnel{} }); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "cp1: reading the server's kubeconfig "+k3s.PathKubeconfig) {
		t.Errorf("no kubeconfig: %v", err)
	}
	// A broken kubeconfig: the error names the file but never quotes it.
	if _, err := Connect(ctx, func() Conn { return &tunnel{kubeconfig: []byte("users: [token: s3cret-token\n")} }); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("broken kubeconfig: %v, want an error without its content", err)
	}
	if _, err := Connect(ctx, func() Conn { return nil }); err == nil {
		t.Error("no connection: no error")
	}
}

// TestTypedErrors: conflicts and not-found answers come back typed through the API's methods.
func TestTypedErrors(t *testing.T) {
	cs := fake.NewClientset(nodeRV("cp1", "5"))
	cs.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node)
		if n.ResourceVersion != "6" {
			return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), n.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	a := New("cp1", cs, nil)
	ctx := context.Background()
	n, err := a.GetNode(ctx, "cp1")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReplaceNode(ctx, n); !apierrors.IsConflict(err) || !strings.HasPrefix(err.Error(), "cp1: update node cp1") {
		t.Errorf("stale replace: %v, want a Conflict naming cp1", err)
	}
	n.ResourceVersion = "6"
	if err := a.ReplaceNode(ctx, n); err != nil {
		t.Errorf("current replace: %v", err)
	}
	n.ResourceVersion = ""
	if err := a.ReplaceNode(ctx, n); err == nil {
		t.Error("a replace without resourceVersion was sent")
	}
	if _, err := a.GetDeployment(ctx, "cattle-system", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing deployment: %v", err)
	}
	if _, err := a.GetDaemonSet(ctx, "kube-system", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing daemonset: %v", err)
	}
	if err := a.DeleteSecret(ctx, "kube-system", "gone.node-password.k3s"); err != nil {
		t.Errorf("deleting a missing secret: %v, want nil", err)
	}
}

func TestIsAPIDown(t *testing.T) {
	for _, c := range []struct {
		err  error
		down bool
	}{
		{&ssh.OpenChannelError{Reason: ssh.ConnectionFailed, Message: "Connection refused"}, true},
		{fmt.Errorf("cp1: list nodes: %w", &ssh.OpenChannelError{Reason: ssh.Prohibited}), false},
		{fmt.Errorf("cp1: x: %w", syscall.ECONNREFUSED), true},
		{apierrors.NewServiceUnavailable("apiserver not ready"), true},
		{apierrors.NewNotFound(corev1.Resource("nodes"), "x"), false},
		{apierrors.NewConflict(corev1.Resource("nodes"), "x", errors.New("modified")), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := IsAPIDown(c.err); got != c.down {
			t.Errorf("IsAPIDown(%v) = %v, want %v", c.err, got, c.down)
		}
	}
}

// TestDeleteNode: a node already gone is no error; the wait ends when the node is gone; a
// node a finalizer holds fails after the timeout with an error that says so.
func TestDeleteNode(t *testing.T) {
	ctx := context.Background()
	a := New("cp1", fake.NewClientset(), nil)
	if err := a.DeleteNode(ctx, "gone", time.Second); err != nil {
		t.Errorf("deleting a missing node: %v", err)
	}
	a = New("cp1", fake.NewClientset(nodeRV("a1", "")), nil)
	if err := a.DeleteNode(ctx, "a1", 5*time.Second); err != nil {
		t.Errorf("deleting a1: %v", err)
	}
	if _, err := a.GetNode(ctx, "a1"); !apierrors.IsNotFound(err) {
		t.Errorf("a1 still there: %v", err)
	}
	cs := fake.NewClientset(nodeRV("s2", ""))
	cs.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted; the finalizer keeps it
	})
	a = New("cp1", cs, nil)
	start := time.Now()
	err := a.DeleteNode(ctx, "s2", 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "node s2 not gone 1.5s") {
		t.Errorf("held node: %v", err)
	}
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("held node: gave up after %s, want the 1.5 s timeout", d)
	}
}

// TestLogs: job/NAME reads the log of the job's newest pod, with the tail asked for.
func TestLogs(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	pod := func(name string, at metav1.Time, job string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", CreationTimestamp: at,
			Labels: map[string]string{batchv1.JobNameLabel: job}}}
	}
	cs := fake.NewClientset(pod("helm-install-rancher-old", old, "helm-install-rancher"),
		pod("helm-install-rancher-new", metav1.Now(), "helm-install-rancher"))
	var tail int64
	cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		tail = *a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions).TailLines
		return true, &runtime.Unknown{Raw: []byte("+ helm install\nError: INSTALLATION FAILED: boom\n")}, nil
	})
	a := New("cp1", cs, nil)
	l, err := a.Logs(context.Background(), "kube-system", "job/helm-install-rancher", 5)
	if err != nil || !strings.HasSuffix(l, "boom") || tail != 5 {
		t.Errorf("Logs %q %v (tail %d)", l, err, tail)
	}
	if _, err := a.Logs(context.Background(), "kube-system", "job/none", 5); !apierrors.IsNotFound(err) {
		t.Errorf("a job without pods: %v, want NotFound", err)
	}
	if _, err := a.Logs(context.Background(), "kube-system", "statefulset/x", 5); err == nil {
		t.Error("statefulset/x: no error")
	}
}

// Resources of the dynamic tests.
var (
	gvrHelmChart  = schema.GroupVersionResource{Group: "helm.cattle.io", Version: "v1", Resource: "helmcharts"}
	gvrJob        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrNamespace  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "helm.cattle.io", Version: "v1", Kind: "HelmChart"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	return m
}

func dynClient(objs ...runtime.Object) *dynfake.FakeDynamicClient {
	return dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvrHelmChart: "HelmChartList", gvrJob: "JobList", gvrDeployment: "DeploymentList",
		gvrConfigMap: "ConfigMapList", gvrNamespace: "NamespaceList",
	}, objs...)
}

func uobj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// TestList: several resource types (with their groups) in one call, each object with its
// kind, namespace, name and JSON; a resource the API does not serve is a NoMatch error.
func TestList(t *testing.T) {
	dyn := dynClient(
		uobj("helm.cattle.io/v1", "HelmChart", "kube-system", "rancher", map[string]any{"spec": map[string]any{"chart": "rancher"}}),
		uobj("batch/v1", "Job", "kube-system", "helm-install-rancher", map[string]any{"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}}}}),
		uobj("apps/v1", "Deployment", "cattle-system", "rancher", map[string]any{"spec": map[string]any{"replicas": int64(2)},
			"status": map[string]any{"availableReplicas": int64(2), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}}),
	)
	a := NewWithMapper("cp1", fake.NewClientset(), dyn, testMapper())
	ctx := context.Background()
	objs, err := a.List(ctx, "helmcharts.helm.cattle.io,jobs.batch,deployments", "", "")
	if err != nil || len(objs) != 3 {
		t.Fatalf("List: %v %v", objs, err)
	}
	jo := Find(objs, "Job", "kube-system", "helm-install-rancher")
	var job batchv1.Job
	if jo == nil || jo.Decode(&job) != nil {
		t.Fatalf("job not found in %v", objs)
	}
	if st, why := JobStatus(&job); st != JobFailed || !strings.Contains(why, "BackoffLimitExceeded") {
		t.Errorf("JobStatus %v %q", st, why)
	}
	var d appsv1.Deployment
	if o := Find(objs, "Deployment", "cattle-system", "rancher"); o == nil || o.Decode(&d) != nil || !DeploymentAvailable(&d) {
		t.Errorf("deployment rancher not found or not available: %v", o)
	}
	d.Status.AvailableReplicas = 1
	if DeploymentAvailable(&d) {
		t.Error("1 of 2 replicas counts as available")
	}
	if Find(objs, "HelmChart", "kube-system", "rancher") == nil || Find(objs, "Job", "kube-system", "other") != nil {
		t.Error("Find")
	}
	if only, err := a.List(ctx, "deployments.apps", "kube-system", ""); err != nil || len(only) != 0 {
		t.Errorf("namespace kube-system: %v %v, want none", only, err)
	}
	if _, err := a.List(ctx, "plans.upgrade.cattle.io", "", ""); !meta.IsNoMatchError(err) {
		t.Errorf("an unserved resource: %v, want NoMatch", err)
	}
	raw, err := a.ListJSON(ctx, "helmcharts.helm.cattle.io")
	if err != nil || !strings.Contains(string(raw), `"kind":"List"`) || !strings.Contains(string(raw), `"chart":"rancher"`) {
		t.Errorf("ListJSON %s %v", raw, err)
	}
}

const applyManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: system-upgrade
---
# a comment-only document is skipped
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: default-controller-env
  namespace: system-upgrade
data:
  SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE: rancher/kubectl:v1.36.3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: no-namespace
data: {a: b}
`

// TestApply: objects are created in order (a namespaced one without a namespace in
// "default"), an existing one is read and merged with the resourceVersion read — a 409 on the
// way is read again and retried —, fields others set stay, a kind the API does not know is a
// NoMatch error, and garbage names its document.
func TestApply(t *testing.T) {
	dyn := dynClient()
	a := NewWithMapper("cp1", fake.NewClientset(), dyn, testMapper())
	ctx := context.Background()
	out, err := a.Apply(ctx, []byte(applyManifest))
	if err != nil {
		t.Fatal(err)
	}
	if want := "namespaces/system-upgrade created\nconfigmaps/default-controller-env created\nconfigmaps/no-namespace created"; out != want {
		t.Errorf("first apply:\n%s\nwant:\n%s", out, want)
	}
	if _, err := dyn.Resource(gvrConfigMap).Namespace("default").Get(ctx, "no-namespace", metav1.GetOptions{}); err != nil {
		t.Errorf("no-namespace not in default: %v", err)
	}
	// Someone else adds a label; the next apply changes data: both stay.
	cm, _ := dyn.Resource(gvrConfigMap).Namespace("system-upgrade").Get(ctx, "default-controller-env", metav1.GetOptions{})
	cm.SetLabels(map[string]string{"other.io/owner": "x"})
	cm.SetResourceVersion("41")
	if _, err := dyn.Resource(gvrConfigMap).Namespace("system-upgrade").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	var patchedRV []string
	dyn.PrependReactor("patch", "configmaps", func(act k8stesting.Action) (bool, runtime.Object, error) {
		p := act.(k8stesting.PatchAction)
		var m unstructured.Unstructured
		if err := m.UnmarshalJSON(p.GetPatch()); err != nil {
			t.Errorf("patch body: %v", err)
		}
		patchedRV = append(patchedRV, m.GetResourceVersion())
		if p.GetName() == "default-controller-env" && conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), p.GetName(), errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	out, err = a.Apply(ctx, []byte(strings.Replace(applyManifest, "v1.36.3", "v1.36.4", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "configmaps/default-controller-env configured") || conflicts != 1 {
		t.Errorf("second apply (%d conflicts):\n%s", conflicts, out)
	}
	if len(patchedRV) < 2 || patchedRV[0] != "41" || patchedRV[1] != "41" {
		t.Errorf("patches carried resourceVersions %v, want the one read (41), again after the conflict", patchedRV)
	}
	cm, _ = dyn.Resource(gvrConfigMap).Namespace("system-upgrade").Get(ctx, "default-controller-env", metav1.GetOptions{})
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE"); v != "rancher/kubectl:v1.36.4" || cm.GetLabels()["other.io/owner"] != "x" {
		t.Errorf("after the second apply: data %q labels %v", v, cm.GetLabels())
	}

	if _, err := a.Apply(ctx, []byte("apiVersion: upgrade.cattle.io/v1\nkind: Plan\nmetadata: {name: k3s-server, namespace: system-upgrade}\n")); !meta.IsNoMatchError(err) {
		t.Errorf("a kind without its CRD: %v, want NoMatch", err)
	}
	if _, err := a.Apply(ctx, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n{not: [yaml\n")); err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Errorf("garbage: %v, want an error naming document 2", err)
	}
}

// TestDecodeList: a kind List is expanded into its items.
func TestDecodeList(t *testing.T) {
	objs, err := Decode([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}]}`))
	if err != nil || len(objs) != 2 || objs[1].GetName() != "b" {
		t.Errorf("Decode List: %v %v", objs, err)
	}
}

// refusing is a Conn whose SSH server refuses direct-tcpip channels (forwarding disabled).
type refusing struct{ tunnel }

func (r *refusing) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, &ssh.OpenChannelError{Reason: ssh.Prohibited, Message: "administratively prohibited"}
}

// TestForwardingRefused: a host whose SSH server refuses TCP forwarding gets an error saying
// what to allow, not a bare "administratively prohibited".
func TestForwardingRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	r := &refusing{tunnel{kubeconfig: kubeconfigFor(srv, "https://127.0.0.1:6443", "t")}}
	a, err := Connect(context.Background(), func() Conn { return r })
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.ListNodes(context.Background())
	if err == nil || !strings.Contains(err.Error(), "AllowTcpForwarding") || !strings.HasPrefix(err.Error(), "cp1: list nodes") {
		t.Errorf("forwarding refused: %v", err)
	}
	if IsAPIDown(err) {
		t.Error("a refused channel counts as the API being down: it would be retried for nothing")
	}
}

// fileConn is a Conn serving files and answering the API itself (remote.APITransportWrapper),
// as a transcript replay does; a dial is a test failure.
type fileConn struct {
	t     *testing.T
	files map[string][]byte
	mu    sync.Mutex
	read  []string
	asked []string
}

func (c *fileConn) Host() string { return "w1" }

func (c *fileConn) ReadFile(_ context.Context, path string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = append(c.read, path)
	b, ok := c.files[path]
	if !ok {
		return nil, fmt.Errorf("w1: %s: %w", path, os.ErrNotExist)
	}
	return append([]byte(nil), b...), nil
}

func (c *fileConn) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	c.t.Errorf("dialled %s although the host answers the API itself", addr)
	return nil, errors.New("no network")
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *fileConn) WrapAPITransport(http.RoundTripper) http.RoundTripper {
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.asked = append(c.asked, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"w1"}}`))}, nil
	})
}

// TestConnectAsTheNode: ConnectAs reads a kubeconfig that names its CA, certificate and key
// as files (the kubelet's), reads those over the connection too, and a host answering the API
// itself gets every request without a dial.
func TestConnectAsTheNode(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "system:node:w1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	const dir = "/var/lib/rancher/k3s/agent/"
	files := map[string][]byte{
		k3s.PathKubeletKubeconfig: []byte(`apiVersion: v1
kind: Config
clusters:
- cluster: {certificate-authority: ` + dir + `server-ca.crt, server: "https://127.0.0.1:6444"}
  name: local
contexts:
- context: {cluster: local, user: user}
  name: local
current-context: local
users:
- name: user
  user: {client-certificate: ` + dir + `client-kubelet.crt, client-key: ` + dir + `client-kubelet.key}
`),
		dir + "server-ca.crt":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		dir + "client-kubelet.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		dir + "client-kubelet.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
	c := &fileConn{t: t, files: files}
	ctx := context.Background()
	a, err := ConnectAs(ctx, func() Conn { return c }, k3s.PathKubeletKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.GetNode(ctx, "w1")
	if err != nil || n.Name != "w1" {
		t.Fatalf("GetNode: %v %v", n, err)
	}
	if len(c.read) != 4 || len(c.asked) != 1 || c.asked[0] != "GET /api/v1/nodes/w1" {
		t.Errorf("read %q, asked %q", c.read, c.asked)
	}
	// A certificate file missing: the error names it and the host.
	delete(files, dir+"client-kubelet.key")
	if _, err := ConnectAs(ctx, func() Conn { return &fileConn{t: t, files: files} }, k3s.PathKubeletKubeconfig); err == nil ||
		!errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "w1: the kubeconfig "+k3s.PathKubeletKubeconfig+": reading "+dir+"client-kubelet.key") {
		t.Errorf("a missing key file: %v", err)
	}
}
