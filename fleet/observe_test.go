// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestObserve: distinct kubelet versions sorted, every node counted, Ready only when its Ready
// condition is True.
func TestObserve(t *testing.T) {
	node := func(version string, ready corev1.ConditionStatus) corev1.Node {
		var n corev1.Node
		n.Status.NodeInfo.KubeletVersion = version
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: ready}}
		return n
	}
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.FixedZone("x", 3600))
	o := Observe([]corev1.Node{node("v1.36.4+k3s1", corev1.ConditionTrue), node("v1.36.3+k3s1", corev1.ConditionFalse),
		node("v1.36.3+k3s1", corev1.ConditionTrue), node("", corev1.ConditionUnknown)}, at)
	if !slices.Equal(o.Versions, []string{"v1.36.3+k3s1", "v1.36.4+k3s1"}) || o.Nodes != 4 || o.Ready != 2 || !o.At.Equal(at) || o.At.Location() != time.UTC {
		t.Errorf("Observe = %+v", o)
	}
}
