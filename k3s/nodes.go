// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"fmt"
	"strings"
)

// Node-role labels K3s puts on its nodes (k3s-io/k3s pkg/agent/run.go, pkg/etcd): every server
// is a control-plane node (also labelled with the legacy master role), a server running
// embedded etcd an etcd node. K3s's etcd member controller keeps LabelEtcd in line with the
// members: deleting a server's Node removes its member.
const (
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	LabelMaster       = "node-role.kubernetes.io/master"
	LabelEtcd         = "node-role.kubernetes.io/etcd"
	// LabelRancherControlPlane is the role label of Rancher-provisioned (RKE) nodes.
	LabelRancherControlPlane = "node-role.kubernetes.io/controlplane"
)

// AnnotationFlannelKubeSubnetManager is the annotation K3s's embedded flannel sets to "true"
// on its node, in the one patch that registers the node's lease (with backend-type,
// backend-data and public-ip or public-ipv6; flannel-io/flannel pkg/subnet/kube
// kubeSubnetManager.AcquireLease), right before it sets up the VXLAN device and writes the
// node's subnet.env. The kubelet reports Ready before that: K3s writes the CNI config before
// flannel starts, and an agent runs flannel only after the kubelet (k3s-io/k3s
// pkg/agent/run.go); a pod sandbox on the node fails until subnet.env exists
// (docs/k3s.md "Join gates").
const AnnotationFlannelKubeSubnetManager = "flannel.alpha.coreos.com/kube-subnet-manager"

// Taint keys on K3s nodes (docs/k3s.md, docs/failure-modes.md).
const (
	// TaintControlPlane and TaintMaster are the control-plane taint keys; the legacy master key
	// is the one a standalone flannel v0.24.4 forgot to tolerate (F4).
	TaintControlPlane = LabelControlPlane
	TaintMaster       = LabelMaster
	// TaintEtcd is the NoExecute taint of an etcd-only server (docs/day2.md).
	TaintEtcd = LabelEtcd
	// TaintCriticalAddonsOnly is the taint K3s's packaged add-ons tolerate; a server tainted
	// CriticalAddonsOnly=true:NoExecute still runs them.
	TaintCriticalAddonsOnly = "CriticalAddonsOnly"
	// TaintNotReady is the taint of a node whose Ready condition is not True.
	TaintNotReady = "node.kubernetes.io/not-ready"
	// TaintNetworkUnavailable is the taint of a node whose network is not yet configured.
	TaintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// Toleration is a toleration as Kubernetes writes it (operator Exists or Equal; an empty
// effect tolerates every effect).
type Toleration struct {
	Key, Operator, Value, Effect string
}

// HelmJobTolerations are the tolerations K3s's helm-controller gives the install Job of a
// HelmChart (k3s-io/helm-controller v0.17.7, the release K3s v1.36.3 builds in,
// pkg/controllers/chart/chart.go job()): a chart with bootstrap: true tolerates the not-ready,
// network-unavailable and uninitialized=true NoSchedule taints, CriticalAddonsOnly, the etcd
// NoExecute and the control-plane NoSchedule role taints; any other chart tolerates nothing,
// since K3s sets no JobTolerations (seen on the real K3s v1.36.3: TestRealComponents/helmchart).
// A custom taint is never among them (docs/failure-modes.md F3).
func HelmJobTolerations(bootstrap bool) []Toleration {
	if !bootstrap {
		return nil
	}
	return []Toleration{
		{Key: TaintNotReady, Effect: "NoSchedule"},
		{Key: TaintNetworkUnavailable, Effect: "NoSchedule"},
		{Key: TaintUninitialized, Operator: "Equal", Value: "true", Effect: "NoSchedule"},
		{Key: TaintCriticalAddonsOnly, Operator: "Exists"},
		{Key: TaintEtcd, Operator: "Exists", Effect: "NoExecute"},
		{Key: TaintControlPlane, Operator: "Exists", Effect: "NoSchedule"},
	}
}

// Taint effects a node-taint may carry.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// ParseTaint splits K3s's node-taint form key[=value]:Effect (the kubelet's register-with-taints
// syntax). The effect must be NoSchedule, PreferNoSchedule or NoExecute (case-sensitive) and
// the key non-empty; the error says what is wrong and how a taint is written. Callers that
// validate key and value further (inventory.ParseTaint) build on it.
func ParseTaint(s string) (key, value, effect string, err error) {
	const example = "write taints as key[=value]:Effect, e.g. dedicated=edge:NoExecute"
	kv, eff, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || eff == "" {
		return "", "", "", fmt.Errorf("taint %q has no effect; %s", s, example)
	}
	// A key may contain '/' but never ':', so the first ':' ends key[=value] — except that the
	// effect part must not contain another ':'.
	if strings.Contains(eff, ":") {
		return "", "", "", fmt.Errorf("taint %q has more than one ':'; %s", s, example)
	}
	key, value, _ = strings.Cut(kv, "=")
	known := false
	for _, e := range taintEffects {
		known = known || e == eff
	}
	if !known {
		fix := "the effect must be NoSchedule, PreferNoSchedule or NoExecute"
		for _, e := range taintEffects {
			if strings.EqualFold(e, eff) {
				fix = fmt.Sprintf("effects are case-sensitive: write %s", e)
			}
		}
		return "", "", "", fmt.Errorf("taint %q has unknown effect %q; %s", s, eff, fix)
	}
	return key, value, eff, nil
}
