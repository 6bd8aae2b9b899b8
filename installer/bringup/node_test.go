// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// What a joining node lacks, judged on the real node (Ready, labels site=lab and tier=edge,
// taint dedicated=edge:NoExecute, kubelet v1.36.3+k3s1).
func TestNodeLacks(t *testing.T) {
	since := time.Date(2026, 11, 21, 23, 35, 0, 0, time.UTC)
	real := readNode(t, "node-default.json")
	hb := real.DeepCopy()
	for i := range hb.Status.Conditions {
		if hb.Status.Conditions[i].Type == corev1.NodeReady {
			hb.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(since.Add(-time.Minute))
		}
	}
	notReady := real.DeepCopy()
	notReady.Status.Conditions = nil
	version := real.Status.NodeInfo.KubeletVersion
	agent := &inventory.Host{Name: "vm", Role: inventory.RoleAgent, Labels: map[string]string{"site": "lab"},
		Taints: []inventory.Taint{{Key: "dedicated", Value: "edge", Effect: "NoExecute"}}}
	other := &inventory.Host{Name: "vm", Labels: map[string]string{"zone": "a"}}
	tainted := &inventory.Host{Name: "vm", Taints: []inventory.Taint{{Key: "gpu", Value: "yes", Effect: "NoSchedule"}}}
	tests := []struct {
		name     string
		n        *corev1.Node
		h        *inventory.Host
		etcd     bool
		version  string
		declared bool
		since    time.Time
		want     string
	}{
		{"done", real, agent, false, version, true, since, ""},
		{"not Ready", notReady, agent, false, "", false, time.Time{}, "not Ready"},
		{"Ready from before the restart", hb, agent, false, "", false, since, "Ready only from before the restart (no heartbeat since)"},
		{"Ready from before, no restart", hb, agent, false, "", false, time.Time{}, ""},
		{"old version", real, agent, false, "v1.37.0+k3s1", false, time.Time{}, "still on " + version + ", not v1.37.0+k3s1"},
		{"label missing", real, other, false, "", true, time.Time{}, "label zone=a missing"},
		{"label not required of an existing node", real, other, false, "", false, time.Time{}, ""},
		{"taint missing", real, tainted, false, "", true, time.Time{}, "taint gpu=yes:NoSchedule missing"},
		{"not an etcd member", real, agent, true, "", false, time.Time{}, "not an etcd member yet"},
	}
	for _, tt := range tests {
		nw := &NodeWait{Host: tt.h, Taints: tt.h.Taints, WantEtcd: tt.etcd, Version: tt.version, Declared: tt.declared, Since: tt.since}
		if got := nw.Lacks(tt.n); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	etcd := real.DeepCopy()
	etcd.Labels[k3s.LabelEtcd] = "true"
	if got := (&NodeWait{Host: agent, Taints: agent.Taints, WantEtcd: true}).Lacks(etcd); got != "" {
		t.Errorf("etcd member: %q", got)
	}

	// Flannel's lease: the real node carries it; the same node before flannel registered it
	// (Ready already, the annotations not yet) lacks it.
	leased := &NodeWait{Host: agent, Taints: agent.Taints, Declared: true, WantFlannel: true}
	if got := leased.Lacks(real); got != "" {
		t.Errorf("flannel's lease on the real node: %q", got)
	}
	unleased := real.DeepCopy()
	for k := range unleased.Annotations {
		if strings.HasPrefix(k, "flannel.alpha.coreos.com/") {
			delete(unleased.Annotations, k)
		}
	}
	want := "flannel has not registered the node yet (no flannel.alpha.coreos.com/kube-subnet-manager annotation: its pod network is not up)"
	if got := leased.Lacks(unleased); got != want {
		t.Errorf("before flannel's lease: %q, want %q", got, want)
	}
	leased.WantFlannel = false
	if got := leased.Lacks(unleased); got != "" {
		t.Errorf("flannel's lease not wanted: %q", got)
	}
}

// The wait for a node: up when done (registered is enough when excluded from the CNI);
// waiting with what it lacks (a failed list keeps the last known); ended by a lost host or the
// deadline with an error naming the node and what it lacked.
func TestNodeWait(t *testing.T) {
	t0 := runAStart
	real := readNode(t, "node-default.json")
	notReady := real.DeepCopy()
	notReady.Status.Conditions = nil
	lost := errors.New("vm has been unreachable since 23:40:00: keepalives unanswered")
	newWait := func() *NodeWait {
		return &NodeWait{Host: &inventory.Host{Name: "vm"}, Service: "k3s-agent", Deadline: Deadline{Start: t0, Timeout: 5 * time.Minute}}
	}

	nw := newWait()
	if v := nw.Observe(nil, true, nil, t0.Add(time.Second)); v.Kind != Waiting || v.Why != "not registered yet" {
		t.Errorf("not registered: %+v", v)
	}
	if v := nw.Observe(notReady, true, nil, t0.Add(2*time.Second)); v.Kind != Waiting || v.Why != "not Ready" {
		t.Errorf("not Ready: %+v", v)
	}
	if v := nw.Observe(nil, false, nil, t0.Add(3*time.Second)); v.Kind != Waiting || v.Why != "not Ready" {
		t.Errorf("failed list: %+v", v)
	}
	v := nw.Observe(nil, false, nil, t0.Add(5*time.Minute+time.Second))
	if v.Kind != TimedOut || v.Err == nil || v.Err.Error() != "node vm not ready after 5m0s: not Ready (see `journalctl -u k3s-agent` on the host)" {
		t.Errorf("deadline: %+v", v)
	}
	if v := nw.Observe(real, true, nil, t0.Add(6*time.Minute)); v.Kind != Up || v.Message != "node Ready" {
		t.Errorf("Ready after the deadline's look: %+v", v)
	}

	nw = newWait()
	v = nw.Observe(nil, false, lost, t0.Add(time.Second))
	if v.Kind != Lost || !errors.Is(v.Err, lost) || !strings.HasSuffix(v.Err.Error(), "(its node: not registered yet)") || !strings.HasPrefix(v.Err.Error(), "node vm not ready: vm has been unreachable since") {
		t.Errorf("lost: %+v", v)
	}

	nw = newWait()
	nw.Excluded = true
	if v := nw.Observe(notReady, true, nil, t0); v.Kind != Up || v.Message != "node registered (excluded from the CNI: Ready not required)" {
		t.Errorf("excluded: %+v", v)
	}
	nw = newWait()
	nw.Version = real.Status.NodeInfo.KubeletVersion
	if v := nw.Observe(real, true, nil, t0); v.Kind != Up || v.Message != "node Ready on "+nw.Version {
		t.Errorf("version: %+v", v)
	}
}
