// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/k3s"
)

// K3sConfig is the content of a K3s config.yaml. YAML keys are K3s flag names
// (docs/k3s.md#config-file); the typed fields are the ones k3strap reads or renders, and
// Extra holds any other flag, validated against the K3s flag table (package k3s). Bools are pointers so that
// an explicit false in a per-host override can replace a cluster-wide true.
type K3sConfig struct {
	Token                    Secret     `yaml:"token,omitempty"`
	TokenFile                string     `yaml:"token-file,omitempty"`
	AgentToken               Secret     `yaml:"agent-token,omitempty"`
	Server                   string     `yaml:"server,omitempty"`
	ClusterInit              *bool      `yaml:"cluster-init,omitempty"`
	DataDir                  string     `yaml:"data-dir,omitempty"`
	NodeName                 string     `yaml:"node-name,omitempty"`
	NodeIP                   StringList `yaml:"node-ip,omitempty"`
	NodeExternalIP           StringList `yaml:"node-external-ip,omitempty"`
	NodeLabel                StringList `yaml:"node-label,omitempty"`
	NodeTaint                StringList `yaml:"node-taint,omitempty"`
	TLSSAN                   StringList `yaml:"tls-san,omitempty"`
	WriteKubeconfigMode      string     `yaml:"write-kubeconfig-mode,omitempty"`
	FlannelBackend           string     `yaml:"flannel-backend,omitempty"`
	FlannelIface             string     `yaml:"flannel-iface,omitempty"`
	ClusterCIDR              StringList `yaml:"cluster-cidr,omitempty"`
	ServiceCIDR              StringList `yaml:"service-cidr,omitempty"`
	ClusterDNS               StringList `yaml:"cluster-dns,omitempty"`
	ClusterDomain            string     `yaml:"cluster-domain,omitempty"`
	Disable                  StringList `yaml:"disable,omitempty"`
	DisableCloudController   *bool      `yaml:"disable-cloud-controller,omitempty"`
	DisableNetworkPolicy     *bool      `yaml:"disable-network-policy,omitempty"`
	DisableKubeProxy         *bool      `yaml:"disable-kube-proxy,omitempty"`
	DisableHelmController    *bool      `yaml:"disable-helm-controller,omitempty"`
	EmbeddedRegistry         *bool      `yaml:"embedded-registry,omitempty"`
	SecretsEncryption        *bool      `yaml:"secrets-encryption,omitempty"`
	SystemDefaultRegistry    string     `yaml:"system-default-registry,omitempty"`
	KubeletArg               StringList `yaml:"kubelet-arg,omitempty"`
	KubeAPIServerArg         StringList `yaml:"kube-apiserver-arg,omitempty"`
	KubeControllerManagerArg StringList `yaml:"kube-controller-manager-arg,omitempty"`
	KubeCloudControllerArg   StringList `yaml:"kube-cloud-controller-manager-arg,omitempty"`
	// Extra holds every other key. Values are YAML scalars (string, bool, number) or lists of
	// scalars, as K3s accepts them.
	Extra map[string]any `yaml:",inline"`
}

// StringList is a repeatable K3s flag: a YAML list, or a single scalar taken as one item (K3s
// accepts both).
type StringList []string

// UnmarshalYAML accepts a scalar or a sequence of scalars.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			*l = nil
			return nil
		}
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: list items must be strings", c.Line)}}
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a string or a list of strings", n.Line)}}
}

// Secret is a value that must never reach a log line, an event, an error or a command line.
// String and GoString mask it; Reveal returns the value for the one place that writes it (a
// 0600 file on a host or stdin of a remote command).
type Secret string

// String masks the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "********"
}

// GoString masks the secret in %#v.
func (s Secret) GoString() string { return `inventory.Secret("********")` }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// Bool returns a pointer to b, for the *bool fields.
func Bool(b bool) *bool { return &b }

// IsTrue reports whether p is set and true.
func IsTrue(p *bool) bool { return p != nil && *p }

// Merge returns c with every key set in over replacing the same key of c (per-host overrides
// replace cluster-wide values; lists are replaced, not appended). Neither input is modified.
func (c K3sConfig) Merge(over K3sConfig) K3sConfig {
	out := c
	out.Extra = map[string]any{}
	for k, v := range c.Extra {
		out.Extra[k] = v
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setS := func(dst *Secret, v Secret) {
		if v != "" {
			*dst = v
		}
	}
	setL := func(dst *StringList, v StringList) {
		if v != nil {
			*dst = append(StringList(nil), v...)
		}
	}
	setB := func(dst **bool, v *bool) {
		if v != nil {
			b := *v
			*dst = &b
		}
	}
	setS(&out.Token, over.Token)
	setS(&out.AgentToken, over.AgentToken)
	set(&out.TokenFile, over.TokenFile)
	set(&out.Server, over.Server)
	setB(&out.ClusterInit, over.ClusterInit)
	set(&out.DataDir, over.DataDir)
	set(&out.NodeName, over.NodeName)
	setL(&out.NodeIP, over.NodeIP)
	setL(&out.NodeExternalIP, over.NodeExternalIP)
	setL(&out.NodeLabel, over.NodeLabel)
	setL(&out.NodeTaint, over.NodeTaint)
	setL(&out.TLSSAN, over.TLSSAN)
	set(&out.WriteKubeconfigMode, over.WriteKubeconfigMode)
	set(&out.FlannelBackend, over.FlannelBackend)
	set(&out.FlannelIface, over.FlannelIface)
	setL(&out.ClusterCIDR, over.ClusterCIDR)
	setL(&out.ServiceCIDR, over.ServiceCIDR)
	setL(&out.ClusterDNS, over.ClusterDNS)
	set(&out.ClusterDomain, over.ClusterDomain)
	setL(&out.Disable, over.Disable)
	setB(&out.DisableCloudController, over.DisableCloudController)
	setB(&out.DisableNetworkPolicy, over.DisableNetworkPolicy)
	setB(&out.DisableKubeProxy, over.DisableKubeProxy)
	setB(&out.DisableHelmController, over.DisableHelmController)
	setB(&out.EmbeddedRegistry, over.EmbeddedRegistry)
	setB(&out.SecretsEncryption, over.SecretsEncryption)
	set(&out.SystemDefaultRegistry, over.SystemDefaultRegistry)
	setL(&out.KubeletArg, over.KubeletArg)
	setL(&out.KubeAPIServerArg, over.KubeAPIServerArg)
	setL(&out.KubeControllerManagerArg, over.KubeControllerManagerArg)
	setL(&out.KubeCloudControllerArg, over.KubeCloudControllerArg)
	for k, v := range over.Extra {
		out.Extra[k] = v
	}
	if len(out.Extra) == 0 {
		out.Extra = nil
	}
	return out
}

// Keys returns the flag names set in c, sorted: typed fields and Extra together.
func (c K3sConfig) Keys() []string {
	n := yaml.Node{}
	if err := n.Encode(c); err != nil {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	sort.Strings(keys)
	return keys
}

// ArgValue returns the value of name=VALUE among args (e.g. kubelet-arg entries, with or
// without leading dashes), and whether it was present. The last occurrence wins, as for flags.
// It is k3s.ArgValue.
func ArgValue(args []string, name string) (string, bool) { return k3s.ArgValue(args, name) }

// Values returns c as config.yaml would hold it: config key → value (string, bool, or []any of
// scalars), typed fields and Extra together; unset keys are absent. Secrets are included as
// they are (for rules such as k3s.CriticalMismatches, never for output).
func (c K3sConfig) Values() map[string]any {
	out := map[string]any{}
	b, err := yaml.Marshal(c)
	if err != nil {
		return out
	}
	_ = yaml.Unmarshal(b, &out)
	return out
}
