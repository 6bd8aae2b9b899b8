// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// TestF1 runs Run B of the fixtures (disable-cloud-controller + kubelet-arg
// cloud-provider=external): the uninitialized taint is never removed, PodCIDR and subnet.env
// still come, the network policy controller logs every 2 s (scaled) and K3s shuts down 914 s
// (scaled) after start with exit code 1.
func TestF1(t *testing.T) {
	t.Parallel()
	root := newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": string(fixture(t, "config-f1.yaml")),
		"/etc/k3ssim/sim.yaml":         "timeScale: 0.05\n",
	})
	s := startSim(t, "server", root, "vm", nil, nil)
	// Recorded until the network policy controller waits for the taint and subnet.env, the last
	// milestone, exists: the first is a timer of the simulator, the milestones come from API
	// round trips, which a loaded machine stretches past it.
	rec, stopRec := record(t, s, func() bool {
		if _, err := os.Stat(s.root.Path(paths.SubnetEnv)); err != nil {
			return false
		}
		for _, l := range s.logs.snapshot() {
			if strings.Contains(l.text, "waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint") {
				return true
			}
		}
		return false
	}, 20*time.Second)
	stopRec()
	want := milestones(parseTimeline(t, fixture(t, "timeline-f1.txt")))
	got := milestones(rec.events)
	t.Logf("milestones: %v", got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("milestones\n got %v\nwant %v", got, want)
	}
	if len(want) != 6 {
		t.Fatalf("fixture parse: %v", want)
	}
	cs := s.clientset()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	compareNodeShape(t, "F1 node", n, loadNode(t, "node-f1.json"))
	if _, err := os.Stat(s.root.Path(paths.SubnetEnv)); err != nil {
		t.Errorf("subnet.env must exist in F1 on v1.36.3: %v", err)
	}
	out, _, _ := s.kubectl("", "get", "pods", "-n", "kube-system", "-o", "json")
	var pods corev1.PodList
	_ = json.Unmarshal([]byte(out), &pods)
	if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodPending ||
		pods.Items[0].Status.Conditions[0].Message != "0/1 nodes are available: 1 node(s) had untolerated taint(s)." {
		t.Errorf("CoreDNS must be Pending (coredns-describe-f1.txt): %.500s", out)
	}

	// The shutdown 914 s (scaled) after start, exit code 1.
	code, ok := s.exitCode(time.Duration(914*scale*float64(time.Second)) + 10*time.Second)
	if !ok {
		t.Fatalf("no shutdown; log tail:\n%.2000s", s.logs)
	}
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	logs := s.logs.snapshot()
	var waits []time.Time
	var shutdown time.Time
	for _, l := range logs {
		if strings.Contains(l.text, `msg="Network policy controller waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint"`) {
			waits = append(waits, l.at)
		}
		if strings.Contains(l.text, `level=error msg="Shutdown request received: \"failed to start networking: network policy controller failed to wait for node.cloudprovider.kubernetes.io/uninitialized taint to be removed from Node vm: context deadline exceeded\""`) {
			shutdown = l.at
		}
		if strings.Contains(l.text, "Waiting for untainted node") || strings.Contains(l.text, "Running cloud-controller-manager") ||
			strings.Contains(l.text, "with cloud provider") {
			t.Errorf("line only the embedded cloud controller logs: %s", l.text)
		}
	}
	if shutdown.IsZero() {
		t.Fatal("no shutdown line")
	}
	if d := shutdown.Sub(s.start); d < scaled(914) || d > scaled(914)+3*time.Second {
		t.Errorf("shutdown %v after start, want %v (914 s scaled)", d, scaled(914))
	}
	if len(waits) < 400 {
		t.Fatalf("%d waiting lines, want ~447 (every 2 s from ~20 s to 914 s)", len(waits))
	}
	if d := waits[0].Sub(s.start); d < scaled(19) || d > scaled(22)+500*time.Millisecond { // slack for a loaded machine
		t.Errorf("first waiting line %v after start, want ~20 s scaled", d)
	}
	var gaps []time.Duration
	for i := 1; i < len(waits); i++ {
		gaps = append(gaps, waits[i].Sub(waits[i-1]))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	if med := gaps[len(gaps)/2]; med < scaled(1.9) || med > scaled(2.3) {
		t.Errorf("median interval between waiting lines %v, want 2 s scaled (%v)", med, scaled(2))
	}
	if gaps[0] < scaled(1.5) {
		t.Errorf("waiting lines too close: %v", gaps[0])
	}
	checkLogLines(t, fixture(t, "log-lines-f1.txt"), logs, fixtureReplacer(s.port), nil)
}
