// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package cni

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/kube-flannel.yaml
var flannelBase []byte

// FlannelParams configures the standalone flannel manifest.
type FlannelParams struct {
	// Version is the flannel image tag; "" means DefaultFlannelVersion.
	Version string
	// Backend is vxlan (default when ""), host-gw or wireguard-native (flannel's "wireguard").
	Backend string
	// ClusterCIDRs are the pod networks (IPv4 and/or IPv6), as K3s's cluster-cidr.
	ClusterCIDRs []string
	// Tolerations replace the DaemonSet's tolerations (FlannelTolerations).
	Tolerations []corev1.Toleration
	// Exclude makes the DaemonSet's node affinity skip nodes labelled ExcludedLabel=true.
	Exclude bool
}

// flannelBackendType maps an inventory backend to flannel's net-conf.json Backend.Type.
func flannelBackendType(b string) (string, error) {
	switch strings.ToLower(b) {
	case "", "vxlan":
		return "vxlan", nil
	case "host-gw":
		return "host-gw", nil
	case "wireguard-native", "wireguard":
		return "wireguard", nil
	}
	return "", fmt.Errorf("spec.cni.backend %q is not a flannel backend; use vxlan, host-gw or wireguard-native", b)
}

// netConf renders flannel's net-conf.json for the pod networks and backend type.
func netConf(cidrs []string, backend string) (string, error) {
	type conf struct {
		Network        string `json:"Network,omitempty"`
		EnableIPv4     *bool  `json:"EnableIPv4,omitempty"`
		EnableIPv6     bool   `json:"EnableIPv6,omitempty"`
		IPv6Network    string `json:"IPv6Network,omitempty"`
		EnableNFTables bool   `json:"EnableNFTables"`
		Backend        struct {
			Type string `json:"Type"`
		} `json:"Backend"`
	}
	var c conf
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return "", fmt.Errorf("cluster-cidr %q: %w", s, err)
		}
		if p.Addr().Is4() {
			if c.Network == "" {
				c.Network = p.String()
			}
		} else if c.IPv6Network == "" {
			c.EnableIPv6, c.IPv6Network = true, p.String()
		}
	}
	if c.Network == "" {
		f := false
		c.EnableIPv4 = &f
	}
	c.Backend.Type = backend
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

// FlannelStandalone renders the kube-flannel manifest (namespace kube-flannel, RBAC, ConfigMap
// kube-flannel-cfg, DaemonSet kube-flannel-ds) for K3s with flannel-backend none: the network
// and backend from the inventory, images of p.Version, p.Tolerations (which must include both
// control-plane keys and every declared taint, docs/failure-modes.md F4) and, with p.Exclude, a node
// affinity that skips excluded nodes.
func FlannelStandalone(p FlannelParams) ([]byte, error) {
	bt, err := flannelBackendType(p.Backend)
	if err != nil {
		return nil, err
	}
	nc, err := netConf(p.ClusterCIDRs, bt)
	if err != nil {
		return nil, err
	}
	version := orDefault(p.Version, DefaultFlannelVersion)
	image := "docker.io/flannel/flannel:" + version
	var objs []any
	for _, doc := range strings.Split(string(flannelBase), "\n---\n") {
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return nil, fmt.Errorf("embedded kube-flannel.yaml: %w", err)
		}
		switch kind.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				return nil, fmt.Errorf("embedded kube-flannel.yaml: %w", err)
			}
			cm.Data["net-conf.json"] = nc
			objs = append(objs, &cm)
		case "DaemonSet":
			var ds appsv1.DaemonSet
			if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
				return nil, fmt.Errorf("embedded kube-flannel.yaml: %w", err)
			}
			spec := &ds.Spec.Template.Spec
			for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
				for i := range cs {
					switch cs[i].Image {
					case "FLANNEL_IMAGE":
						cs[i].Image = image
					case "FLANNEL_CNI_PLUGIN_IMAGE":
						cs[i].Image = FlannelCNIPluginImage
					}
				}
			}
			spec.Tolerations = append([]corev1.Toleration(nil), p.Tolerations...)
			if p.Exclude {
				spec.Affinity = withExclusion(spec.Affinity)
			}
			objs = append(objs, &ds)
		default:
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				return nil, fmt.Errorf("embedded kube-flannel.yaml: %w", err)
			}
			objs = append(objs, m)
		}
	}
	return toYAML(objs...)
}
