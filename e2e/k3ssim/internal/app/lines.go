// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"sort"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/config"
)

// renderArgs renders component flags the way K3s logs them ("Running kubelet --a=b ..."):
// defaults overridden by the user's component args, sorted by flag name.
func renderArgs(defaults map[string]string, user []string) string {
	m := map[string]string{}
	for k, v := range defaults {
		m[k] = v
	}
	for _, a := range user {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, "--"+k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

// kcmLine is the "Running kube-controller-manager" message (log-lines-default.txt and
// log-lines-f1.txt differ only in --controllers and --configure-cloud-routes).
func kcmLine(s config.Settings, embeddedCCM bool) string {
	dd := s.DataDir
	d := map[string]string{
		"allocate-node-cidrs":       "true",
		"authentication-kubeconfig": dd + "/server/cred/controller.kubeconfig",
		"authorization-kubeconfig":  dd + "/server/cred/controller.kubeconfig",
		"bind-address":              "127.0.0.1",
		"cluster-cidr":              s.ClusterCIDR,
		"cluster-signing-kube-apiserver-client-cert-file": dd + "/server/tls/client-ca.nochain.crt",
		"cluster-signing-kube-apiserver-client-key-file":  dd + "/server/tls/client-ca.key",
		"cluster-signing-kubelet-client-cert-file":        dd + "/server/tls/client-ca.nochain.crt",
		"cluster-signing-kubelet-client-key-file":         dd + "/server/tls/client-ca.key",
		"cluster-signing-kubelet-serving-cert-file":       dd + "/server/tls/server-ca.nochain.crt",
		"cluster-signing-kubelet-serving-key-file":        dd + "/server/tls/server-ca.key",
		"cluster-signing-legacy-unknown-cert-file":        dd + "/server/tls/server-ca.nochain.crt",
		"cluster-signing-legacy-unknown-key-file":         dd + "/server/tls/server-ca.key",
		"controllers":                      "*,tokencleaner",
		"kubeconfig":                       dd + "/server/cred/controller.kubeconfig",
		"leader-elect":                     "false",
		"profiling":                        "false",
		"root-ca-file":                     dd + "/server/tls/server-ca.crt",
		"secure-port":                      "10257",
		"service-account-private-key-file": dd + "/server/tls/service.current.key",
		"service-cluster-ip-range":         s.ServiceCIDR,
		"tls-cert-file":                    dd + "/server/tls/kube-controller-manager/kube-controller-manager.crt",
		"tls-private-key-file":             dd + "/server/tls/kube-controller-manager/kube-controller-manager.key",
		"use-service-account-credentials":  "true",
	}
	if embeddedCCM {
		d["controllers"] = "*,tokencleaner,-service,-route,-cloud-node-lifecycle"
		d["configure-cloud-routes"] = "false"
	}
	return "Running kube-controller-manager " + renderArgs(d, s.KubeControllerArgs)
}

// ccmLine is the "Running cloud-controller-manager" message of the embedded cloud controller.
func ccmLine(s config.Settings) string {
	dd := s.DataDir
	controllers := "*,-route"
	if s.Disabled("servicelb") {
		controllers = "*,-route,-service"
	}
	d := map[string]string{
		"allocate-node-cidrs":          "true",
		"authentication-kubeconfig":    dd + "/server/cred/cloud-controller.kubeconfig",
		"authorization-kubeconfig":     dd + "/server/cred/cloud-controller.kubeconfig",
		"bind-address":                 "127.0.0.1",
		"cloud-config":                 dd + "/server/etc/cloud-config.yaml",
		"cloud-provider":               "k3s",
		"cluster-cidr":                 s.ClusterCIDR,
		"configure-cloud-routes":       "false",
		"controllers":                  controllers,
		"kubeconfig":                   dd + "/server/cred/cloud-controller.kubeconfig",
		"leader-elect":                 "false",
		"leader-elect-resource-name":   "k3s-cloud-controller-manager",
		"node-status-update-frequency": "1m0s",
		"profiling":                    "false",
	}
	return "Running cloud-controller-manager " + renderArgs(d, nil)
}

// kubeletLine is the "Running kubelet" message. cloudExternal adds --cloud-provider=external
// (K3s sets it while its embedded cloud controller runs; users may set it via kubelet-arg).
func kubeletLine(s config.Settings, nodeName, nodeIP string, cloudExternal bool) string {
	dd := s.DataDir
	d := map[string]string{
		"config-dir":        dd + "/agent/etc/kubelet.conf.d",
		"containerd":        "/run/k3s/containerd/containerd.sock",
		"hostname-override": nodeName,
		"kubeconfig":        dd + "/agent/kubelet.kubeconfig",
		"node-ip":           nodeIP,
		"node-labels":       strings.Join(s.NodeLabels, ","),
		"read-only-port":    "0",
	}
	if cloudExternal {
		d["cloud-provider"] = "external"
	}
	return "Running kubelet " + renderArgs(d, s.KubeletArgs)
}

// kubeletCloudExternal reports whether the kubelet runs with cloud-provider=external: the
// embedded cloud controller is on, or the user passed it (docs/failure-modes.md F1).
func kubeletCloudExternal(s config.Settings, disableCCM bool) bool {
	if v, ok := config.ArgValue(s.KubeletArgs, "cloud-provider"); ok {
		return v == "external"
	}
	return !disableCCM
}
