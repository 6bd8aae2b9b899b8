// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMain runs an applet when the test binary is started as one (TestPause).
func TestMain(m *testing.M) {
	if a := os.Getenv("STANDIN_TEST_APPLET"); a != "" {
		os.Exit(applets[a](os.Args[1:]))
	}
	os.Exit(m.Run())
}

func getJSON(t *testing.T, c *http.Client, u string, wantCode int, v any) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s: %d %s, want %d", u, resp.StatusCode, b, wantCode)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", u, err, b)
		}
	}
}

// TestMetricsDiscovery: what the API aggregator reads to call v1beta1.metrics.k8s.io
// Available, decoded with the Kubernetes types.
func TestMetricsDiscovery(t *testing.T) {
	srv := httptest.NewTLSServer(metricsHandler())
	defer srv.Close()
	c := srv.Client()
	var rl metav1.APIResourceList
	getJSON(t, c, srv.URL+"/apis/metrics.k8s.io/v1beta1", http.StatusOK, &rl)
	if rl.GroupVersion != "metrics.k8s.io/v1beta1" || len(rl.APIResources) != 2 ||
		rl.APIResources[0].Name != "nodes" || rl.APIResources[0].Namespaced || rl.APIResources[1].Kind != "PodMetrics" || !rl.APIResources[1].Namespaced {
		t.Errorf("resource list %+v", rl)
	}
	var gl metav1.APIGroupList
	getJSON(t, c, srv.URL+"/apis", http.StatusOK, &gl)
	if len(gl.Groups) != 1 || gl.Groups[0].PreferredVersion.GroupVersion != "metrics.k8s.io/v1beta1" {
		t.Errorf("group list %+v", gl)
	}
	for _, p := range []string{"/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods", "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods"} {
		var l struct {
			Kind  string `json:"kind"`
			Items []any  `json:"items"`
		}
		getJSON(t, c, srv.URL+p, http.StatusOK, &l)
		if !strings.HasSuffix(l.Kind, "MetricsList") || l.Items == nil || len(l.Items) != 0 {
			t.Errorf("%s: %+v", p, l)
		}
	}
	var st metav1.Status
	getJSON(t, c, srv.URL+"/apis/metrics.k8s.io/v1beta1/nodes/cp1", http.StatusNotFound, &st)
	if st.Reason != metav1.StatusReasonNotFound {
		t.Errorf("node metrics of cp1: %+v", st)
	}
	for _, p := range []string{"/readyz", "/livez"} {
		resp, err := c.Get(srv.URL + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %v", p, resp, err)
		}
	}
}

func TestSelfSignedCertWrittenToCertDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := selfSignedCert(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"apiserver.crt", "apiserver.key"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestNetprobe(t *testing.T) {
	target := httptest.NewServer(netprobeHandler())
	defer target.Close()
	probe := httptest.NewServer(netprobeHandler())
	defer probe.Close()
	c := probe.Client()

	var id probeIdentity
	getJSON(t, c, probe.URL+"/", http.StatusOK, &id)
	if id.Hostname == "" || !strings.HasPrefix(id.Remote, "127.0.0.1:") || !strings.Contains(id.Standin, "test stand-in") {
		t.Errorf("identity %+v", id)
	}

	// /fetch: the probe calls the target, whose answer names the probe as the caller.
	var f probeFetch
	getJSON(t, c, probe.URL+"/fetch?url="+url.QueryEscape(target.URL+"/"), http.StatusOK, &f)
	var seen probeIdentity
	if err := json.Unmarshal([]byte(f.Body), &seen); err != nil || f.Status != 200 || !strings.HasPrefix(seen.Remote, "127.0.0.1:") {
		t.Errorf("fetch %+v (%v)", f, err)
	}
	getJSON(t, c, probe.URL+"/fetch?url="+url.QueryEscape(target.URL+"/nope"), http.StatusOK, &f)
	if f.Status != 404 || f.Error != "" {
		t.Errorf("fetch of a 404: %+v", f)
	}
	// a port nobody listens on: the probe ran, the target failed
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	getJSON(t, c, probe.URL+"/fetch?timeout=2s&url="+url.QueryEscape("http://"+dead+"/"), http.StatusBadGateway, &f)
	if f.Error == "" {
		t.Errorf("fetch of a closed port: %+v", f)
	}
	var r probeResolve
	getJSON(t, c, probe.URL+"/resolve?name=localhost", http.StatusOK, &r)
	if len(r.Addresses) == 0 {
		t.Errorf("resolve localhost: %+v", r)
	}
	getJSON(t, c, probe.URL+"/resolve?name=no-such-host.invalid&timeout=2s", http.StatusBadGateway, &r)
	if r.Error == "" {
		t.Errorf("resolve of an invalid name: %+v", r)
	}
	resp, err := c.Get(probe.URL + "/fetch")
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("fetch without url: %v %v", resp, err)
	}
}

// TestNetprobeCLI: `netprobe get` exits 0 with the body on 2xx and 1 otherwise, as tests
// running it through kubectl exec rely on.
func TestNetprobeCLI(t *testing.T) {
	target := httptest.NewServer(netprobeHandler())
	defer target.Close()
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"get", target.URL + "/healthz"}, 0, "ok"},
		{[]string{"get", target.URL + "/nope"}, 1, "404"},
		{[]string{"get", "-timeout", "1s", "http://127.0.0.1:1/"}, 1, "refused"},
		{[]string{"resolve", "localhost"}, 0, "127.0.0.1"},
		{[]string{"get"}, 2, "usage"},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), "STANDIN_TEST_APPLET=netprobe")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != c.code || !strings.Contains(string(out), c.out) {
			t.Errorf("netprobe %v: exit %d %q, want %d with %q", c.args, code, out, c.code, c.out)
		}
	}
}

func TestLocalPathConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, fmt.Sprint(len(s))+".json")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// K3s v1.36.3's local-path-config config.json
	ok := write(`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/var/lib/rancher/k3s/storage"]}]}`)
	if err := checkLocalPathConfig(ok); err != nil {
		t.Errorf("K3s's config: %v", err)
	}
	for _, bad := range []string{write(`{"nodePathMap":[]}`), write(`{"nodePathMap":[{"node":"x"}]}`), write(`not json`), filepath.Join(dir, "missing.json"), ""} {
		if err := checkLocalPathConfig(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestPause: the pause stand-in stays up until SIGTERM, then exits 0.
func TestPause(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "STANDIN_TEST_APPLET=pause")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited by itself: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("pause ignored SIGTERM")
	}
}

// TestReapCollectsExitedChildren: what pause does for orphans when it is a pod's PID 1.
func TestReapCollectsExitedChildren(t *testing.T) {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Skip("no /bin/true:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	reap()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Errorf("child %d not reaped: %v", pid, err)
	}
}
