// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodProblems(t *testing.T) {
	pods := []corev1.Pod{
		{Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) had untolerated taint(s)."}}}},
	}
	pods[1].Namespace, pods[1].Name = "cattle-system", "rancher-abc"
	got := PodProblems(pods)
	if len(got) != 1 || !strings.Contains(got[0], "cattle-system/rancher-abc Pending: Unschedulable 0/1 nodes") {
		t.Errorf("%v", got)
	}
}
