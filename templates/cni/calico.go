// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	"encoding/base64"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// objectMeta is the metadata k3strap renders for its own objects (no creationTimestamp).
type objectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

var managedBy = map[string]string{"app.kubernetes.io/managed-by": "k3strap"}

// installation is the part of operator.tigera.io/v1 Installation k3strap renders (tigera
// operator api/v1/installation_types.go).
type installation struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   objectMeta       `json:"metadata"`
	Spec       installationSpec `json:"spec"`
}

type installationSpec struct {
	CalicoNetwork           calicoNetwork        `json:"calicoNetwork"`
	CalicoNodeDaemonSet     *calicoNodeDaemonSet `json:"calicoNodeDaemonSet,omitempty"`
	ControlPlaneTolerations []corev1.Toleration  `json:"controlPlaneTolerations,omitempty"`
}

type calicoNetwork struct {
	BGP                   string   `json:"bgp"`
	ContainerIPForwarding string   `json:"containerIPForwarding"`
	IPPools               []ipPool `json:"ipPools"`
}

type ipPool struct {
	Name          string `json:"name"`
	CIDR          string `json:"cidr"`
	BlockSize     int32  `json:"blockSize"`
	Encapsulation string `json:"encapsulation"`
	NATOutgoing   string `json:"natOutgoing"`
	NodeSelector  string `json:"nodeSelector"`
}

// calicoNodeDaemonSet is Installation.spec.calicoNodeDaemonSet: tolerations and affinity given
// here REPLACE calico-node's defaults (docs/cni.md).
type calicoNodeDaemonSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				Affinity    *corev1.Affinity    `json:"affinity,omitempty"`
				Tolerations []corev1.Toleration `json:"tolerations"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// felixConfiguration enables WireGuard (crd.projectcalico.org/v1 FelixConfiguration default).
type felixConfiguration struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		WireguardEnabled   bool `json:"wireguardEnabled"`
		WireguardEnabledV6 bool `json:"wireguardEnabledV6,omitempty"`
	} `json:"spec"`
}

// CalicoParams configures the Installation.
type CalicoParams struct {
	// Encapsulation is a canonical Calico encapsulation (CalicoEncapsulation): VXLAN,
	// VXLANCrossSubnet, IPIP, IPIPCrossSubnet, None, or WireGuard (VXLAN pools plus Felix's
	// WireGuard encryption).
	Encapsulation string
	// ClusterCIDRs are the pod networks; one IP pool per entry.
	ClusterCIDRs []string
	// NodeTolerations are calico-node's tolerations (CalicoNodeTolerations): they replace
	// Calico's defaults, so they must include them.
	NodeTolerations []corev1.Toleration
	// ControlPlaneTolerations go to spec.controlPlaneTolerations.
	ControlPlaneTolerations []corev1.Toleration
	// Exclude adds a calico-node node affinity that skips nodes labelled ExcludedLabel=true.
	Exclude bool
}

// CalicoInstallation renders the operator.tigera.io/v1 Installation "default" for K3s: one IP
// pool per cluster CIDR with the inventory's encapsulation, BGP only for IPIP and None,
// containerIPForwarding Enabled (K3s's Calico guide), calico-node tolerations and, with
// Exclude, its affinity; for WireGuard also FelixConfiguration default with
// wireguardEnabled.
func CalicoInstallation(p CalicoParams) ([]byte, error) {
	enc, err := CalicoEncapsulation(p.Encapsulation)
	if err != nil {
		return nil, err
	}
	poolEnc, bgp := enc, "Disabled"
	switch enc {
	case "IPIP", "IPIPCrossSubnet", "None":
		bgp = "Enabled"
	case "WireGuard":
		poolEnc = "VXLAN"
	}
	in := installation{APIVersion: "operator.tigera.io/v1", Kind: "Installation",
		Metadata: objectMeta{Name: "default", Labels: managedBy}}
	in.Spec.CalicoNetwork = calicoNetwork{BGP: bgp, ContainerIPForwarding: "Enabled"}
	v6 := false
	for _, s := range p.ClusterCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("cluster-cidr %q: %w", s, err)
		}
		pool := ipPool{Name: "default-ipv4-ippool", CIDR: pfx.String(), BlockSize: 26, Encapsulation: poolEnc, NATOutgoing: "Enabled", NodeSelector: "all()"}
		if pfx.Addr().Is6() {
			v6 = true
			pool.Name, pool.BlockSize = "default-ipv6-ippool", 122
			if poolEnc == "IPIP" || poolEnc == "IPIPCrossSubnet" {
				pool.Encapsulation = "None" // Calico has no IPIP for IPv6
			}
		}
		in.Spec.CalicoNetwork.IPPools = append(in.Spec.CalicoNetwork.IPPools, pool)
	}
	ds := &calicoNodeDaemonSet{}
	ds.Spec.Template.Spec.Tolerations = append([]corev1.Toleration(nil), p.NodeTolerations...)
	if p.Exclude {
		ds.Spec.Template.Spec.Affinity = withExclusion(nil)
	}
	in.Spec.CalicoNodeDaemonSet = ds
	in.Spec.ControlPlaneTolerations = p.ControlPlaneTolerations
	objs := []any{in}
	if enc == "WireGuard" {
		fc := felixConfiguration{APIVersion: "crd.projectcalico.org/v1", Kind: "FelixConfiguration",
			Metadata: objectMeta{Name: "default", Labels: managedBy}}
		fc.Spec.WireguardEnabled, fc.Spec.WireguardEnabledV6 = true, v6
		objs = append(objs, fc)
	}
	return toYAML(objs...)
}

// helmChart is the part of helm.cattle.io/v1 HelmChart k3strap renders (K3s's helm-controller,
// docs/cni.md).
type helmChart struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Chart           string `json:"chart,omitempty"`
		Repo            string `json:"repo,omitempty"`
		Version         string `json:"version,omitempty"`
		ChartContent    string `json:"chartContent,omitempty"`
		TargetNamespace string `json:"targetNamespace"`
		CreateNamespace bool   `json:"createNamespace"`
		Bootstrap       bool   `json:"bootstrap"`
		ValuesContent   string `json:"valuesContent"`
	} `json:"spec"`
}

// OperatorParams configures how the tigera operator is deployed.
type OperatorParams struct {
	// Version is the tigera-operator chart version (= Calico release); "" means
	// DefaultCalicoVersion. Used when neither Manifest nor ChartArchive is given.
	Version string
	// Manifest is a local tigera-operator.yaml (airgap); placed unchanged.
	Manifest []byte
	// ChartArchive is a local tigera-operator chart .tgz (airgap); sent as chartContent.
	ChartArchive []byte
	// Tolerations are the operator Deployment's tolerations (chart value `tolerations`).
	Tolerations []corev1.Toleration
}

// CalicoOperator renders how the tigera operator reaches the cluster: the user's local
// manifest unchanged, or a HelmChart "tigera-operator" (kube-system; release in namespace
// tigera-operator) from CalicoChartRepo at p.Version or from the local chart archive. The
// chart's own Installation is disabled (installation.enabled false): k3strap renders the
// Installation itself. bootstrap is set because no pod network exists before the operator
// runs: helm-controller then runs the install job on the host network and tolerates the
// not-ready taint.
func CalicoOperator(p OperatorParams) ([]byte, error) {
	if p.Manifest != nil {
		return append([]byte(nil), p.Manifest...), nil
	}
	values := map[string]any{
		"installation": map[string]any{"enabled": false},
		"tolerations":  p.Tolerations,
	}
	vb, err := yaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	hc := helmChart{APIVersion: "helm.cattle.io/v1", Kind: "HelmChart",
		Metadata: objectMeta{Name: "tigera-operator", Namespace: "kube-system", Labels: managedBy}}
	hc.Spec.Chart, hc.Spec.TargetNamespace, hc.Spec.CreateNamespace, hc.Spec.Bootstrap = "tigera-operator", "tigera-operator", true, true
	hc.Spec.ValuesContent = string(vb)
	if p.ChartArchive != nil {
		hc.Spec.ChartContent = base64.StdEncoding.EncodeToString(p.ChartArchive)
	} else {
		hc.Spec.Repo, hc.Spec.Version = CalicoChartRepo, orDefault(p.Version, DefaultCalicoVersion)
	}
	return toYAML(hc)
}
