// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cni renders the pod network manifests k3strap places in the first server's
// manifests folder, where K3s's deploy controller applies them (docs/failure-modes.md F2, F3, F4
// and §3): the standalone flannel DaemonSet, and for Calico the tigera operator (a HelmChart
// by version, a local chart archive, or the user's local tigera-operator.yaml) plus the
// operator's Installation. K3s's embedded flannel and cni.type none need no manifest.
//
// Every CNI DaemonSet tolerates each taint declared in the inventory (spec.hosts[].taints and
// node-taint in the K3s config) on top of its own defaults, and with kernelPolicy exclude its
// node affinity skips nodes labelled k3strap.io/cni-excluded=true. Render functions are pure:
// callers pass the content of local files, so golden tests pin the output.
package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// ExcludedLabel is the node label k3strap sets (value "true") on hosts that kernelPolicy
// exclude keeps out of the CNI (docs/failure-modes.md F2); the CNI DaemonSet's node affinity requires its
// absence.
const ExcludedLabel = "k3strap.io/cni-excluded"

// Manifest file names (the installer prefixes them with "k3strap-").
const (
	FileFlannel            = "kube-flannel.yaml"
	FileCalicoOperator     = "calico-operator.yaml"
	FileCalicoInstallation = "calico-installation.yaml"
)

// Versions and sources used when the inventory does not name one.
const (
	// DefaultFlannelVersion is the flannel image tag of cni.type flannel-standalone
	// (v0.25.0+ restored the legacy master toleration, flannel-io/flannel#1925; k3strap
	// renders both keys anyway).
	DefaultFlannelVersion = "v0.26.1"
	// FlannelCNIPluginImage is the flannel CNI plugin image of DefaultFlannelVersion's manifest.
	FlannelCNIPluginImage = "docker.io/flannel/flannel-cni-plugin:v1.5.1-flannel2"
	// DefaultCalicoVersion is the tigera-operator chart version (= Calico release) used when
	// spec.cni.calico.version is empty.
	DefaultCalicoVersion = "v3.29.1"
	// CalicoChartRepo is the Helm repository of the tigera-operator chart.
	CalicoChartRepo = "https://docs.tigera.io/calico/charts"
	// DefaultCalicoEncapsulation is Calico's own default IP pool encapsulation.
	DefaultCalicoEncapsulation = "VXLANCrossSubnet"
)

// Calico encapsulations accepted in spec.cni.backend (docs/cni.md), canonical spelling.
var calicoEncapsulations = []string{"VXLAN", "VXLANCrossSubnet", "IPIP", "IPIPCrossSubnet", "None", "WireGuard"}

// Manifest is one file for <data-dir>/server/manifests on the first server.
type Manifest struct {
	// Name is the file name without k3strap's prefix, e.g. "calico-installation.yaml".
	Name string
	// Content is the file.
	Content []byte
}

// ReadFile reads a local file named in the inventory; the path is already resolved against
// the inventory's directory.
type ReadFile func(path string) ([]byte, error)

// Workload names a Kubernetes workload.
type Workload struct {
	Kind, Namespace, Name string
}

// NodeDaemonSet returns the DaemonSet that must run on every (not excluded) node for cni type
// t: calico-system/calico-node (created by the tigera operator) or kube-flannel/kube-flannel-ds.
// ok is false for K3s's embedded flannel and none.
func NodeDaemonSet(t inventory.CNIType) (Workload, bool) {
	switch t {
	case inventory.CNICalico:
		return Workload{"DaemonSet", "calico-system", "calico-node"}, true
	case inventory.CNIFlannelStandalone:
		return Workload{"DaemonSet", "kube-flannel", "kube-flannel-ds"}, true
	}
	return Workload{}, false
}

// Excludable reports whether cni type t can leave hosts out (kernelPolicy exclude): only CNIs
// that run as a DaemonSet can; K3s's embedded flannel runs inside K3s on every node.
func Excludable(t inventory.CNIType) bool {
	_, ok := NodeDaemonSet(t)
	return ok
}

// Manifests returns the CNI manifests for cluster c: none for embedded flannel and none; for
// flannel-standalone the kube-flannel manifest; for calico the tigera operator and the
// Installation. read loads spec.cni.calico.manifest. Errors name the inventory field.
func Manifests(c *inventory.Cluster, read ReadFile) ([]Manifest, error) {
	n := c.Spec.CNI
	exclude := n.KernelPolicy == inventory.KernelPolicyExclude
	switch n.Type {
	case inventory.CNIFlannelStandalone:
		p := FlannelParams{Backend: n.Backend, ClusterCIDRs: ClusterCIDRs(c), Tolerations: FlannelTolerations(c), Exclude: exclude}
		if n.Flannel != nil {
			p.Version = n.Flannel.Version
		}
		b, err := FlannelStandalone(p)
		if err != nil {
			return nil, err
		}
		return []Manifest{{FileFlannel, b}}, nil
	case inventory.CNICalico:
		enc, err := CalicoEncapsulation(n.Backend)
		if err != nil {
			return nil, err
		}
		op := OperatorParams{Tolerations: OperatorTolerations(c)}
		if n.Calico != nil {
			op.Version = n.Calico.Version
			if m := n.Calico.Manifest; m != "" {
				b, err := read(c.ResolvePath(m))
				if err != nil {
					return nil, fmt.Errorf("spec.cni.calico.manifest: %w", err)
				}
				if IsChartArchive(m) {
					op.ChartArchive = b
				} else {
					op.Manifest = b
				}
			}
		}
		if op.Manifest == nil && op.ChartArchive == nil && c.Spec.K3s.Install == inventory.Airgap {
			return nil, fmt.Errorf("spec.cni.calico.manifest is required with spec.k3s.install airgap: name a local tigera-operator.yaml (or the tigera-operator chart .tgz) of Calico %s; without it the operator chart would be fetched from %s", orDefault(op.Version, DefaultCalicoVersion), CalicoChartRepo)
		}
		opYAML, err := CalicoOperator(op)
		if err != nil {
			return nil, err
		}
		inst, err := CalicoInstallation(CalicoParams{Encapsulation: enc, ClusterCIDRs: ClusterCIDRs(c),
			NodeTolerations: CalicoNodeTolerations(c), ControlPlaneTolerations: CalicoControlPlaneTolerations(c), Exclude: exclude})
		if err != nil {
			return nil, err
		}
		return []Manifest{{FileCalicoOperator, opYAML}, {FileCalicoInstallation, inst}}, nil
	}
	return nil, nil
}

// IsChartArchive reports whether a spec.cni.calico.manifest path names a Helm chart archive
// (.tgz, .tar.gz) rather than a YAML manifest.
func IsChartArchive(path string) bool {
	l := strings.ToLower(filepath.Base(path))
	return strings.HasSuffix(l, ".tgz") || strings.HasSuffix(l, ".tar.gz")
}

// CalicoEncapsulation returns the canonical spelling of a Calico encapsulation written in
// spec.cni.backend (matched case-insensitively; "" is DefaultCalicoEncapsulation), or an error
// listing the valid ones.
func CalicoEncapsulation(backend string) (string, error) {
	if backend == "" {
		return DefaultCalicoEncapsulation, nil
	}
	for _, e := range calicoEncapsulations {
		if strings.EqualFold(e, backend) {
			return e, nil
		}
	}
	return "", fmt.Errorf("spec.cni.backend %q is not a Calico encapsulation; use one of %s", backend, strings.Join(calicoEncapsulations, ", "))
}

// ClusterCIDRs returns the cluster's pod networks: the first server's cluster-cidr entries
// (comma-separated ones split), or K3s's default 10.42.0.0/16.
func ClusterCIDRs(c *inventory.Cluster) []string {
	var out []string
	if fs := c.FirstServer(); fs != nil {
		for _, e := range c.HostConfig(fs).ClusterCIDR {
			for _, s := range strings.Split(e, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		out = []string{inventory.DefaultClusterCIDR}
	}
	return out
}

// DeclaredTolerations returns one toleration per declared taint (inventory.Cluster.DeclaredTaints),
// each tolerating exactly that taint (inventory.Taint.Toleration).
func DeclaredTolerations(c *inventory.Cluster) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range c.DeclaredTaints() {
		out = append(out, t.Toleration())
	}
	return out
}

func exists(key string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
}

// CalicoDefaultTolerations are calico-node's default tolerations (docs/cni.md): setting
// Installation.spec.calicoNodeDaemonSet...tolerations REPLACES them, so k3strap renders them
// explicitly.
func CalicoDefaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		exists("CriticalAddonsOnly", ""),
		exists("", corev1.TaintEffectNoSchedule),
		exists("", corev1.TaintEffectNoExecute),
	}
}

// CalicoNodeTolerations are the tolerations k3strap renders for calico-node: Calico's
// defaults plus one per declared taint.
func CalicoNodeTolerations(c *inventory.Cluster) []corev1.Toleration {
	return inventory.AppendTolerations(CalicoDefaultTolerations(), DeclaredTolerations(c)...)
}

// CalicoControlPlaneTolerations are rendered as Installation.spec.controlPlaneTolerations (the
// operator's other components such as calico-kube-controllers): CriticalAddonsOnly, the
// control-plane and legacy master NoSchedule taints, plus one per declared taint — complete
// on its own whether Calico merges it with a component's defaults or replaces them.
func CalicoControlPlaneTolerations(c *inventory.Cluster) []corev1.Toleration {
	return inventory.AppendTolerations([]corev1.Toleration{
		exists("CriticalAddonsOnly", ""),
		exists(k3s.TaintControlPlane, corev1.TaintEffectNoSchedule),
		exists(k3s.TaintMaster, corev1.TaintEffectNoSchedule),
	}, DeclaredTolerations(c)...)
}

// OperatorDefaultTolerations are the tigera-operator Deployment's tolerations in the upstream
// manifest and chart values (every NoExecute and NoSchedule taint).
func OperatorDefaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{exists("", corev1.TaintEffectNoExecute), exists("", corev1.TaintEffectNoSchedule)}
}

// OperatorTolerations are the chart values k3strap renders for the tigera-operator
// Deployment: the upstream defaults plus one per declared taint.
func OperatorTolerations(c *inventory.Cluster) []corev1.Toleration {
	return inventory.AppendTolerations(OperatorDefaultTolerations(), DeclaredTolerations(c)...)
}

// FlannelDefaultTolerations are kube-flannel-ds's tolerations in the upstream kube-flannel.yml
// (docs/cni.md: NoSchedule only, so a custom NoExecute taint is not tolerated).
func FlannelDefaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{exists("", corev1.TaintEffectNoSchedule)}
}

// FlannelTolerations are the tolerations k3strap renders for kube-flannel-ds (docs/failure-modes.md F4):
// the upstream one, k3s.TaintControlPlane AND the legacy
// k3s.TaintMaster (any effect), plus one per declared taint, NoExecute ones
// included.
func FlannelTolerations(c *inventory.Cluster) []corev1.Toleration {
	return inventory.AppendTolerations(append(FlannelDefaultTolerations(),
		exists(k3s.TaintControlPlane, ""),
		exists(k3s.TaintMaster, "")), DeclaredTolerations(c)...)
}

// excludeRequirement is the node selector requirement that keeps a CNI DaemonSet off nodes
// labelled ExcludedLabel=true.
func excludeRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: ExcludedLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}
}

// withExclusion adds the exclusion requirement to every term of a's required node affinity,
// creating the affinity when a is nil.
func withExclusion(a *corev1.Affinity) *corev1.Affinity {
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		req = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchExpressions = append(req.NodeSelectorTerms[i].MatchExpressions, excludeRequirement())
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	return a
}

// header starts every manifest k3strap renders.
const header = "# Managed by k3strap: rendered from the inventory; edit the inventory and re-run\n# `k3strap apply`, not this file (K3s re-applies it whenever it changes).\n"

// toYAML renders objects as one multi-document YAML file after the header. Each object is
// encoded through JSON (k8s.io/api field names), without the empty status and null
// creationTimestamp that typed objects carry.
func toYAML(objs ...any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		prune(m)
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// prune drops null creationTimestamps and empty status, resources and updateStrategy objects
// (zero values of typed objects, not settings), recursively.
func prune(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch {
			case k == "creationTimestamp" && e == nil:
				delete(x, k)
			case k == "status" || k == "resources" || k == "updateStrategy":
				if m, ok := e.(map[string]any); ok && isZero(m) {
					delete(x, k)
				}
			default:
				prune(e)
			}
		}
	case []any:
		for _, e := range x {
			prune(e)
		}
	}
}

func isZero(m map[string]any) bool {
	for _, v := range m {
		switch x := v.(type) {
		case float64:
			if x != 0 {
				return false
			}
		case nil:
		default:
			return false
		}
	}
	return true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
