// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRancherIngressStandIn: a rancher HelmChart dropped in the manifests folder is installed
// (Deployment cattle-system/rancher with the replicas of its values, Service and Ingress for its
// hostname); the ingress stand-in answers /ping for that host once the Deployment is available,
// 404 for other hosts. A Deployment applied from an import manifest (cattle-cluster-agent)
// becomes available like any other.
func TestRancherIngressStandIn(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	root := newRoot(t, map[string]string{
		"/etc/k3ssim/sim.yaml": fmt.Sprintf("timeScale: 0.05\ndeploymentDelay: 2s\ningressPort: %d\n", port),
		"/var/lib/rancher/k3s/server/manifests/k3strap-rancher.yaml": `apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata:
  name: rancher
  namespace: kube-system
spec:
  chart: rancher
  repo: https://releases.rancher.com/server-charts/stable
  version: "2.11.3"
  targetNamespace: cattle-system
  createNamespace: true
  valuesSecrets:
    - name: k3strap-rancher-bootstrap
      keys: [values.yaml]
  valuesContent: |-
    hostname: rancher.sim.test
    replicas: 2
`,
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	s.waitReadyz(10 * time.Second)
	cs := s.clientset()
	ctx := context.Background()

	get := func(host, path string) (int, string, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
			}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + host + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b)), nil
	}
	eventually(t, 20*time.Second, "https://rancher.sim.test/ping answers pong", func() bool {
		code, body, err := get("rancher.sim.test", "/ping")
		return err == nil && code == 200 && body == "pong"
	}, func() string {
		out, _, _ := s.kubectl("", "get", "helmcharts,jobs,deployments,ingresses", "-A")
		return out
	})
	d, err := cs.AppsV1().Deployments("cattle-system").Get(ctx, "rancher", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 2 || d.Status.AvailableReplicas != 2 {
		t.Fatalf("deployment cattle-system/rancher: %v %+v", err, d)
	}
	ing, err := cs.NetworkingV1().Ingresses("cattle-system").Get(ctx, "rancher", metav1.GetOptions{})
	if err != nil || ing.Spec.Rules[0].Host != "rancher.sim.test" {
		t.Fatalf("ingress: %v %+v", err, ing)
	}
	if code, body, err := get("other.sim.test", "/ping"); err != nil || code != 404 || body != "404 page not found" {
		t.Errorf("unknown host: %d %q %v", code, body, err)
	}
	// Without the Deployment: no available server.
	if out, e, c := s.kubectl("", "delete", "deployment", "rancher", "-n", "cattle-system"); c != 0 {
		t.Fatalf("delete: %q %q", out, e)
	}
	eventually(t, 10*time.Second, "503 without the deployment", func() bool {
		code, body, err := get("rancher.sim.test", "/ping")
		return err == nil && code == 503 && body == "no available server"
	})
}
