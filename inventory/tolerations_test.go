// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAppendTolerations(t *testing.T) {
	base := []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
	got := AppendTolerations(base,
		corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists},
		corev1.Toleration{Key: "b", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute},
		corev1.Toleration{Key: "b", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute})
	if len(got) != 2 || got[1].Key != "b" || len(base) != 1 {
		t.Fatalf("got %v (base %v)", got, base)
	}
	inv := AppendTolerations([]Toleration{{Key: "a", Operator: "Exists"}}, Toleration{Key: "a", Operator: "Exists"}, Toleration{Key: "c", Operator: "Exists", Effect: "NoSchedule"})
	if len(inv) != 2 || inv[1].Key != "c" {
		t.Fatalf("inventory tolerations %v", inv)
	}
}
