// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sched

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, taints ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	for _, t := range taints {
		tt, err := ParseTaint(t)
		if err != nil {
			panic(err)
		}
		n.Spec.Taints = append(n.Spec.Taints, tt)
	}
	return n
}

func TestFilterMessages(t *testing.T) {
	coredns := corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Tolerations: DefaultTolerations([]corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}})}
	// F1 (coredns-describe-f1.txt).
	fit, msg := Filter(&coredns, []corev1.Node{node("vm", TaintUninitialized+"=true:NoSchedule")})
	if len(fit) != 0 || msg != "0/1 nodes are available: 1 node(s) had untolerated taint(s)." {
		t.Fatalf("fit %d msg %q", len(fit), msg)
	}
	cordoned := node("b")
	cordoned.Spec.Unschedulable = true
	other := node("c")
	other.Labels["kubernetes.io/os"] = "windows"
	_, msg = Filter(&coredns, []corev1.Node{node("a", "dedicated=edge:NoExecute"), cordoned, other})
	if msg != "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable." {
		t.Fatalf("msg %q", msg)
	}
	fit, _ = Filter(&coredns, []corev1.Node{node("cp", "node-role.kubernetes.io/control-plane:NoSchedule", "x=y:PreferNoSchedule")})
	if len(fit) != 1 {
		t.Fatal("control-plane taint is tolerated and PreferNoSchedule never filters")
	}
}

func TestDaemonSetTolerationsAndAffinity(t *testing.T) {
	flannel := corev1.PodSpec{HostNetwork: true, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	tols := append(flannel.Tolerations, DaemonSetTolerations(true)...)
	// F4: NoSchedule Exists tolerates the legacy master key, but not a custom NoExecute taint.
	if len(UntoleratedTaints(ptr(node("m", "node-role.kubernetes.io/master:NoSchedule")), tols)) != 0 {
		t.Error("NoSchedule/Exists must tolerate the master taint")
	}
	if len(UntoleratedTaints(ptr(node("e", "dedicated=edge:NoExecute")), tols)) != 1 {
		t.Error("a custom NoExecute taint is not tolerated by NoSchedule/Exists")
	}
	aff := corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k3strap.io/no-ipset", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}}
	excluded := node("x")
	excluded.Labels["k3strap.io/no-ipset"] = "true"
	if MatchesNode(&aff, &excluded) || !MatchesNode(&aff, ptr(node("y"))) {
		t.Error("DoesNotExist affinity")
	}
}

func ptr[T any](v T) *T { return &v }
