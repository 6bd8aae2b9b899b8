// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import "strings"

// TaintUninitialized is the taint the kubelet puts on its Node when it runs with
// cloud-provider=external; a cloud controller removes it once it has initialised the node
// (docs/failure-modes.md F1; k3s-io/k3s pkg/daemons/agent/agent_linux.go).
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// CloudSettings are the settings that decide whether a node's uninitialized taint is ever
// removed (docs/failure-modes.md F1).
type CloudSettings struct {
	// DisableCloudController is the disable-cloud-controller setting of the server (for an
	// agent: of the server it joins), i.e. K3s's embedded cloud controller does not run.
	DisableCloudController bool
	// KubeletArgs are the node's kubelet-arg entries (name=value, dashes optional).
	KubeletArgs []string
	// ExternalCloudController is true when an external cloud controller is declared (deployed
	// right after the first server starts).
	ExternalCloudController bool
}

// KubeletCloudProviderExternal reports whether the kubelet runs with cloud-provider=external:
// an explicit kubelet-arg cloud-provider wins; otherwise K3s sets it itself exactly while its
// embedded cloud controller runs (pkg/daemons/agent/agent_linux.go, since 2021).
func (s CloudSettings) KubeletCloudProviderExternal() bool {
	if v, ok := ArgValue(s.KubeletArgs, "cloud-provider"); ok {
		return v == "external"
	}
	return !s.DisableCloudController
}

// UninitializedTaintStays is the F1 rule (docs/failure-modes.md F1, k3s-io/k3s#11619): the
// node registers with TaintUninitialized and nothing ever removes it when its kubelet runs with
// cloud-provider=external, K3s's embedded cloud controller is disabled, and no external cloud
// controller is declared. disable-cloud-controller alone adds no taint (measured on v1.36.3).
func (s CloudSettings) UninitializedTaintStays() bool {
	return s.KubeletCloudProviderExternal() && s.DisableCloudController && !s.ExternalCloudController
}

// CloudSettingsFrom reads CloudSettings from a rendered K3s config (config key → value as in
// config.yaml, see CriticalMismatches for value shapes): disable-cloud-controller and
// kubelet-arg. For an agent pass its server's disable-cloud-controller in serverConfig (nil
// means cfg itself is a server's config).
func CloudSettingsFrom(cfg, serverConfig map[string]any, externalDeclared bool) CloudSettings {
	src := cfg
	if serverConfig != nil {
		src = serverConfig
	}
	disabled := CriticalValues(src)[KeyDisableCloudController].Value == "true"
	args, _ := values(cfg["kubelet-arg"])
	more, _ := values(cfg["kubelet-arg+"])
	return CloudSettings{DisableCloudController: disabled, KubeletArgs: append(args, more...), ExternalCloudController: externalDeclared}
}

// ArgValue returns the value of name=VALUE among args (e.g. kubelet-arg entries, with or
// without leading dashes) and whether it was present. The last occurrence wins, as for flags.
// An entry without "=" has the value "".
func ArgValue(args []string, name string) (string, bool) {
	val, found := "", false
	for _, a := range args {
		a = strings.TrimLeft(strings.TrimSpace(a), "-")
		k, v, _ := strings.Cut(a, "=")
		if k == name {
			val, found = v, true
		}
	}
	return val, found
}
