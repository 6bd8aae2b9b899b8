// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

const plainConfig = "disable:\n  - traefik\n  - servicelb\n  - metrics-server\n  - local-storage\n"

func serverToken(t *testing.T, s *sim) string {
	t.Helper()
	b, err := os.ReadFile(s.root.Path("/var/lib/rancher/k3s/server/token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestAgentJoin: an agent with the right token registers through the server, gets the
// next /24 and its own subnet.env, and is initialised by the embedded cloud controller;
// a wrong password or a token of another cluster is refused (exit 1).
func TestAgentJoin(t *testing.T) {
	t.Parallel()
	srv := startSim(t, "server", newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": plainConfig, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"}), "srv", nil, nil)
	srv.waitReadyz(10 * time.Second)
	token := serverToken(t, srv)
	cs := srv.clientset()
	// Join once the first server is up (as the installer does), so it holds the first /24.
	eventually(t, 10*time.Second, "server PodCIDR", func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "srv", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR == "10.42.0.0/24"
	})
	agentRoot := newRoot(t, map[string]string{"/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"})
	// K3S_URL / K3S_TOKEN as the install script's env file passes them.
	agent := startSim(t, "agent", agentRoot, "edge1", nil, map[string]string{"K3S_URL": srv.url(), "K3S_TOKEN": token})
	var n *corev1.Node
	eventually(t, 15*time.Second, "agent node initialised", func() bool {
		var err error
		n, err = cs.CoreV1().Nodes().Get(context.Background(), "edge1", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR != "" && n.Spec.ProviderID == "k3s://edge1" && len(n.Spec.Taints) == 0
	}, func() string {
		return fmt.Sprintf("taints %v conditions %v\nagent log:\n%.300s", n.Spec.Taints, n.Status.Conditions, agent.logs)
	})
	if n.Spec.PodCIDR != "10.42.1.0/24" {
		t.Errorf("agent PodCIDR %s, want the second /24", n.Spec.PodCIDR)
	}
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
		t.Error("an agent must not get the control-plane label")
	}
	eventually(t, 5*time.Second, "agent subnet.env", func() bool {
		b, err := os.ReadFile(agentRoot.Path(paths.SubnetEnv))
		return err == nil && strings.Contains(string(b), "FLANNEL_SUBNET=10.42.1.1/24\n")
	})
	if n := agent.notifications(); len(n) == 0 || n[0] != "READY=1" {
		t.Errorf("agent sd_notify %v", n)
	}
	if !strings.Contains(agent.logs.String(), "Running kubelet --cloud-provider=external") {
		t.Errorf("agent kubelet line missing:\n%s", agent.logs)
	}
	// CoreDNS now runs (no node has a taint it does not tolerate).
	eventually(t, 10*time.Second, "coredns available", func() bool {
		d, err := cs.AppsV1().Deployments("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1 && hasCond(d, appsv1.DeploymentAvailable)
	})

	// Wrong password.
	hash := token[:strings.Index(token, "::")]
	bad := startSim(t, "agent", newRoot(t, nil), "edge2", []string{"--server", srv.url(), "--token", hash + "::server:wrongpassword"}, nil)
	if code, ok := bad.exitCode(10 * time.Second); !ok || code != 1 {
		t.Fatalf("wrong password: exit %d (ended %v)", code, ok)
	}
	if l := bad.logs.String(); !strings.Contains(l, "level=fatal") || !strings.Contains(l, "401 Unauthorized") || strings.Contains(l, "wrongpassword") {
		t.Errorf("wrong password log:\n%s", l)
	}
	// Token of another cluster (CA hash mismatch).
	other := "K10" + strings.Repeat("0", 64) + "::server:" + token[strings.LastIndex(token, ":")+1:]
	bad2 := startSim(t, "agent", newRoot(t, nil), "edge3", []string{"--server", srv.url(), "--token", other}, nil)
	if code, ok := bad2.exitCode(10 * time.Second); !ok || code != 1 {
		t.Fatalf("CA hash mismatch: exit %d (ended %v)", code, ok)
	}
	if l := bad2.logs.String(); !strings.Contains(l, "token CA hash does not match the Cluster CA certificate hash") {
		t.Errorf("CA hash mismatch log:\n%s", l)
	}
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), "edge2", metav1.GetOptions{}); err == nil {
		t.Error("a refused agent must not register")
	}
}

func hasCond(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestJoiningServers: a second server joins a cluster-init server (etcd member, API proxied
// to the first server); a server with a different cluster-cidr is refused.
func TestJoiningServers(t *testing.T) {
	t.Parallel()
	cfg := plainConfig + "cluster-init: true\ntoken: s3cret-cluster-token\n"
	first := startSim(t, "server", newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": cfg, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"}), "cp1", nil, nil)
	first.waitReadyz(10 * time.Second)
	joinCfg := plainConfig + fmt.Sprintf("token: s3cret-cluster-token\nserver: %s\n", first.url())
	second := startSim(t, "server", newRoot(t, map[string]string{
		"/etc/rancher/k3s/config.yaml": joinCfg, "/etc/k3ssim/sim.yaml": "timeScale: 0.05\n"}), "cp2", nil, nil)
	second.waitReadyz(10 * time.Second)
	cs := second.clientset() // through the second server's own kubeconfig and proxy
	eventually(t, 15*time.Second, "both servers registered as etcd members", func() bool {
		l, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 2 {
			return false
		}
		for _, n := range l.Items {
			if n.Labels["node-role.kubernetes.io/etcd"] != "true" || n.Labels["node-role.kubernetes.io/control-plane"] != "true" ||
				n.Annotations["etcd.k3s.cattle.io/node-name"] == "" {
				return false
			}
		}
		return true
	})
	t1, _ := os.ReadFile(first.root.Path("/var/lib/rancher/k3s/server/token"))
	t2, _ := os.ReadFile(second.root.Path("/var/lib/rancher/k3s/server/token"))
	if string(t1) != string(t2) || !strings.HasSuffix(string(t1), "::server:s3cret-cluster-token\n") {
		t.Errorf("tokens differ: %q %q", t1, t2)
	}
	out, _, code := second.kubectl("", "get", "nodes", "-o", "json")
	var nl corev1.NodeList
	if code != 0 || json.Unmarshal([]byte(out), &nl) != nil || len(nl.Items) != 2 {
		t.Errorf("kubectl through the joined server: %d %.200s", code, out)
	}

	badCfg := joinCfg + "cluster-cidr: 10.52.0.0/16\n"
	bad := startSim(t, "server", newRoot(t, map[string]string{"/etc/rancher/k3s/config.yaml": badCfg}), "cp3", nil, nil)
	if code, ok := bad.exitCode(10 * time.Second); !ok || code != 1 {
		t.Fatalf("mismatching server: exit %d (ended %v)", code, ok)
	}
	l := bad.logs.String()
	if !strings.Contains(l, "level=fatal") || !strings.Contains(l, "critical configuration value mismatch between servers") || !strings.Contains(l, "cluster-cidr") {
		t.Errorf("critical mismatch log:\n%s", l)
	}
}
