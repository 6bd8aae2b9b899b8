// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sched decides where a pod can run the way kube-scheduler's filters and the
// DaemonSet controller do for the cases the installer cares about: taints and tolerations
// (NoSchedule/NoExecute, k8s.io/api Toleration.ToleratesTaint), nodeSelector, required node
// affinity and cordoned nodes. Messages follow Kubernetes 1.36 (fixture
// coredns-describe-f1.txt: "0/1 nodes are available: 1 node(s) had untolerated taint(s).").
package sched

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// Well-known taint keys.
const (
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	TaintNotReady      = "node.kubernetes.io/not-ready"
	TaintUnreachable   = "node.kubernetes.io/unreachable"
	TaintUnschedulable = "node.kubernetes.io/unschedulable"
)

// ParseTaint parses K3s's node-taint / kubelet register-with-taints form key[=value]:Effect.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, eff, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: want key[=value]:Effect", s)
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(eff)}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("invalid taint effect %q in %q", eff, s)
	}
	if t.Key == "" {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: empty key", s)
	}
	return t, nil
}

// Tolerates reports whether any toleration tolerates the taint.
func Tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(logr.Discard(), &taint, false) {
			return true
		}
	}
	return false
}

// UntoleratedTaints returns the node's NoSchedule/NoExecute taints none of tols tolerates.
func UntoleratedTaints(node *corev1.Node, tols []corev1.Toleration) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !Tolerates(tols, t) {
			out = append(out, t)
		}
	}
	return out
}

// UntoleratedNoExecute returns the node's NoExecute taints not tolerated (those evict).
func UntoleratedNoExecute(node *corev1.Node, tols []corev1.Toleration) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range UntoleratedTaints(node, tols) {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// MatchesNode reports whether the pod spec's nodeSelector and required node affinity match
// the node.
func MatchesNode(spec *corev1.PodSpec, node *corev1.Node) bool {
	for k, v := range spec.NodeSelector {
		if node.Labels[k] != v {
			return false
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchExpressions {
		v, has := node.Labels[r.Key]
		if !requirementMatches(r, v, has) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		if r.Key != "metadata.name" || !requirementMatches(r, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(r corev1.NodeSelectorRequirement, v string, has bool) bool {
	in := func() bool {
		for _, x := range r.Values {
			if x == v {
				return true
			}
		}
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && in()
	case corev1.NodeSelectorOpNotIn:
		return !has || !in()
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

// Reason texts of kube-scheduler's filters (Kubernetes 1.36).
const (
	ReasonTaint         = "node(s) had untolerated taint(s)"
	ReasonAffinity      = "node(s) didn't match Pod's node affinity/selector"
	ReasonUnschedulable = "node(s) were unschedulable"
)

// Filter returns the nodes the pod may be placed on and, when none fits, the scheduler's
// message "0/N nodes are available: <count> <reason>, ... ." with reasons sorted as
// kube-scheduler sorts them.
func Filter(spec *corev1.PodSpec, nodes []corev1.Node) (fit []*corev1.Node, message string) {
	counts := map[string]int{}
	for i := range nodes {
		n := &nodes[i]
		switch {
		case n.Spec.Unschedulable && !Tolerates(spec.Tolerations, corev1.Taint{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule}):
			counts[ReasonUnschedulable]++
		case !MatchesNode(spec, n):
			counts[ReasonAffinity]++
		case len(UntoleratedTaints(n, spec.Tolerations)) > 0:
			counts[ReasonTaint]++
		default:
			fit = append(fit, n)
		}
	}
	if len(fit) > 0 {
		return fit, ""
	}
	var reasons []string
	for r, c := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", c, r))
	}
	sort.Strings(reasons)
	msg := fmt.Sprintf("0/%d nodes are available", len(nodes))
	if len(reasons) > 0 {
		msg += ": " + strings.Join(reasons, ", ")
	}
	return nil, msg + "."
}

// DaemonSetTolerations returns the tolerations the DaemonSet controller adds to every
// DaemonSet pod (pkg/controller/daemon/util), plus network-unavailable for host-network pods.
func DaemonSetTolerations(hostNetwork bool) []corev1.Toleration {
	exists := corev1.TolerationOpExists
	t := []corev1.Toleration{
		{Key: TaintNotReady, Operator: exists, Effect: corev1.TaintEffectNoExecute},
		{Key: TaintUnreachable, Operator: exists, Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/disk-pressure", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/memory-pressure", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/pid-pressure", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintUnschedulable, Operator: exists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, corev1.Toleration{Key: "node.kubernetes.io/network-unavailable", Operator: exists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// DefaultTolerations are added to every pod by the DefaultTolerationSeconds admission
// plugin (not-ready and unreachable NoExecute for 300 s), unless already present.
func DefaultTolerations(tols []corev1.Toleration) []corev1.Toleration {
	secs := int64(300)
	out := append([]corev1.Toleration{}, tols...)
	for _, key := range []string{TaintNotReady, TaintUnreachable} {
		has := false
		for _, t := range tols {
			if t.Key == key && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
				has = true
			}
		}
		if !has {
			out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
		}
	}
	return out
}
