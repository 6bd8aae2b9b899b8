// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestJoinedServerTakesOver (SIMULATOR behaviour, README "HA"): a joined server keeps a
// replica of the first server's state; once the first server has been gone for the takeover
// grace it serves the API from that replica — objects and resourceVersions continue, its
// node's heartbeats (Lease and Ready) land and are readable — and when the first server is
// back it hands over again.
func TestJoinedServerTakesOver(t *testing.T) {
	t.Parallel()
	cfg := plainConfig + "cluster-init: true\ntoken: s3cret-cluster-token\n"
	firstRoot := newRoot(t, map[string]string{"/etc/rancher/k3s/config.yaml": cfg, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"})
	first := startSim(t, "server", firstRoot, "cp1", nil, nil)
	first.waitReadyz(10 * time.Second)
	joinCfg := plainConfig + fmt.Sprintf("token: s3cret-cluster-token\nserver: %s\nkubelet-arg: [node-status-report-frequency=10s]\n", first.url())
	second := startSim(t, "server", newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": joinCfg, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"}), "cp2", nil, nil)
	second.waitReadyz(10 * time.Second)
	cs := second.clientset()
	ctx := context.Background()
	eventually(t, 15*time.Second, "both nodes Ready with a PodCIDR, cp2's Lease", func() bool {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 2 {
			return false
		}
		for _, n := range l.Items {
			if n.Spec.PodCIDR == "" || readyHeartbeat(&n).IsZero() {
				return false
			}
		}
		_, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "cp2", metav1.GetOptions{})
		return err == nil
	})
	applyConfigMap(t, second, "before")
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvBefore := nodes.ResourceVersion

	// The grace runs from the moment the first server began to stop (its listener may close
	// before stop returns), so the clock starts before the call.
	stopped := time.Now()
	first.stop()
	second.logs.waitFor(t, "serving the API from this server's replica", 10*time.Second)
	took := time.Since(stopped)
	// The grace counts from the last line on the replication stream, which can be up to one
	// keepalive interval before the stop began.
	if took < takeoverGrace-replicationKeepalive {
		t.Errorf("took over %s after the first server stopped, before the %s grace (less one %s keepalive)", took, takeoverGrace, replicationKeepalive)
	}
	var n *corev1.Node
	eventually(t, 10*time.Second, "cp2 heartbeats (Lease and Ready) after cp1 stopped, read through cp2", func() bool {
		var err error
		n, err = cs.CoreV1().Nodes().Get(ctx, "cp2", metav1.GetOptions{})
		if err != nil {
			return false
		}
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "cp2", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(stopped) &&
			readyHeartbeat(n).Unix() > stopped.Unix()
	}, func() string { return fmt.Sprintf("cp2 conditions %v\nlog:\n%s", n.Status.Conditions, second.logs) })
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("the replica lacks an object written before the takeover: %v", err)
	}
	after, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(after.Items) != 2 {
		t.Fatalf("nodes through cp2 after the takeover: %v %v", err, after)
	}
	if a, b := atoi64(after.ResourceVersion), atoi64(rvBefore); a <= b {
		t.Errorf("resourceVersion went from %s to %s: the replica must continue the sequence", rvBefore, after.ResourceVersion)
	}

	// The first server comes back: the joined server hands over and re-syncs from it.
	back := startSim(t, "server", firstRoot, "cp1", []string{"--https-listen-port", fmt.Sprint(first.port)}, nil)
	second.logs.waitFor(t, "answers again; proxying to it", 15*time.Second)
	applyConfigMap(t, second, "after")
	eventually(t, 5*time.Second, "a write through cp2 lands on the first server again", func() bool {
		out, _, code := back.kubectl("", "get", "configmaps", "after", "-o", "name")
		return code == 0 && strings.TrimSpace(out) == "configmap/after"
	})
}

// takeoverGrace is the joined server's takeover grace (internal/app takeoverAfter).
const takeoverGrace = 3 * time.Second

// replicationKeepalive is the interval of the replication stream's keepalives (internal/app).
const replicationKeepalive = time.Second

func applyConfigMap(t *testing.T, s *sim, name string) {
	t.Helper()
	if out, errOut, code := s.kubectl("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+name+"\n  namespace: default\n", "apply", "-f", "-"); code != 0 {
		t.Fatalf("kubectl apply configmap %s: exit %d %s %s", name, code, out, errOut)
	}
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
