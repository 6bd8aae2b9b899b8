// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/flags"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/paths"
)

// Settings are the config values the simulator acts on (e2e/k3ssim/README.md, "What it does"), with K3s's
// defaults filled in.
type Settings struct {
	Role        flags.Role
	Token       string // secret: never log
	TokenFile   string
	AgentToken  string // secret: never log
	Server      string // https://HOST:PORT of the server to join; empty for a first server
	ClusterInit bool
	DataDir     string // logical path
	NodeName    string // empty: hostname
	NodeIPs     []string
	ExternalIPs []string
	NodeLabels  []string // key=value
	NodeTaints  []string // key[=value]:Effect
	TLSSANs     []string
	// WriteKubeconfig is the admin kubeconfig path (default /etc/rancher/k3s/k3s.yaml).
	WriteKubeconfig string
	// WriteKubeconfigMode is the octal file mode of the kubeconfig (default 0600).
	WriteKubeconfigMode    uint32
	FlannelBackend         string // vxlan (default), host-gw, wireguard-native, none
	ClusterCIDR            string
	ServiceCIDR            string
	ClusterDNS             string
	ClusterDomain          string
	Disable                []string
	DisableCloudController bool
	DisableNetworkPolicy   bool
	DisableKubeProxy       bool
	DisableHelmController  bool
	DisableAgent           bool
	EgressSelectorMode     string
	SecretsEncryption      bool
	KubeletArgs            []string // key=value without leading dashes
	KubeControllerArgs     []string // key=value without leading dashes
	// HTTPSListenPort is the API/supervisor port (default 6443).
	HTTPSListenPort int
	// BindAddress is the listen address (default: all addresses).
	BindAddress string
}

// Settings resolves the typed settings with K3s defaults. An invalid value (e.g. a
// non-numeric port or an unknown flannel backend) is an error naming the flag.
func (r *Result) Settings() (Settings, error) {
	s := Settings{
		Role:                r.Role,
		DataDir:             paths.DefaultDataDir,
		WriteKubeconfig:     paths.DefaultKubeconfig,
		WriteKubeconfigMode: 0o600,
		FlannelBackend:      "vxlan",
		ClusterCIDR:         "10.42.0.0/16",
		ServiceCIDR:         "10.43.0.0/16",
		ClusterDNS:          "10.43.0.10",
		ClusterDomain:       "cluster.local",
		EgressSelectorMode:  "agent",
		HTTPSListenPort:     6443,
	}
	str := func(flag string, dst *string) {
		if v, ok := r.Get(flag); ok && v != "" {
			*dst = v
		}
	}
	var err error
	boolean := func(flag string, dst *bool) {
		if v, ok := r.Get(flag); ok {
			b, perr := strconv.ParseBool(v)
			if perr != nil && err == nil {
				err = fmt.Errorf("invalid value %q for flag --%s: %v", v, flag, perr)
			}
			*dst = b
		}
	}
	str("token", &s.Token)
	str("token-file", &s.TokenFile)
	str("agent-token", &s.AgentToken)
	str("server", &s.Server)
	str("data-dir", &s.DataDir)
	str("node-name", &s.NodeName)
	str("write-kubeconfig", &s.WriteKubeconfig)
	str("flannel-backend", &s.FlannelBackend)
	str("cluster-domain", &s.ClusterDomain)
	str("egress-selector-mode", &s.EgressSelectorMode)
	str("bind-address", &s.BindAddress)
	boolean("cluster-init", &s.ClusterInit)
	boolean("disable-cloud-controller", &s.DisableCloudController)
	boolean("disable-network-policy", &s.DisableNetworkPolicy)
	boolean("disable-kube-proxy", &s.DisableKubeProxy)
	boolean("disable-helm-controller", &s.DisableHelmController)
	boolean("disable-agent", &s.DisableAgent)
	boolean("secrets-encryption", &s.SecretsEncryption)
	if err != nil {
		return s, err
	}
	if l := r.List("cluster-cidr"); len(l) > 0 {
		s.ClusterCIDR = l[0]
	}
	if l := r.List("service-cidr"); len(l) > 0 {
		s.ServiceCIDR = l[0]
	}
	if l := r.List("cluster-dns"); len(l) > 0 {
		s.ClusterDNS = l[0]
	}
	s.NodeIPs = r.List("node-ip")
	s.ExternalIPs = r.List("node-external-ip")
	s.NodeLabels = r.List("node-label")
	s.NodeTaints = r.List("node-taint")
	s.TLSSANs = r.List("tls-san")
	s.Disable = r.List("disable")
	s.KubeletArgs = trimDashes(r.List("kubelet-arg"))
	s.KubeControllerArgs = trimDashes(r.List("kube-controller-manager-arg"))
	if v, ok := r.Get("https-listen-port"); ok && v != "" {
		p, perr := strconv.Atoi(v)
		if perr != nil || p <= 0 || p > 65535 {
			return s, fmt.Errorf("invalid value %q for flag --https-listen-port", v)
		}
		s.HTTPSListenPort = p
	}
	if v, ok := r.Get("write-kubeconfig-mode"); ok && v != "" {
		m, perr := strconv.ParseUint(v, 8, 32)
		if perr != nil {
			return s, fmt.Errorf("invalid value %q for flag --write-kubeconfig-mode", v)
		}
		s.WriteKubeconfigMode = uint32(m)
	}
	switch s.FlannelBackend {
	case "vxlan", "host-gw", "wireguard-native", "none":
	default:
		return s, fmt.Errorf("invalid flannel backend: %s", s.FlannelBackend)
	}
	if _, _, perr := net.ParseCIDR(s.ClusterCIDR); perr != nil {
		return s, fmt.Errorf("invalid cluster-cidr %s: %v", s.ClusterCIDR, perr)
	}
	return s, nil
}

func trimDashes(in []string) []string {
	out := make([]string, 0, len(in))
	for _, a := range in {
		out = append(out, strings.TrimLeft(a, "-"))
	}
	return out
}

// ArgValue returns the value of key in a list of key=value component args (the last one
// wins, as the component's flag parser makes it) and whether it was present.
func ArgValue(args []string, key string) (string, bool) {
	val, found := "", false
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		if k == key {
			val, found = v, true
		}
	}
	return val, found
}

// Disabled reports whether a packaged component (traefik, servicelb, local-storage,
// metrics-server, coredns) is in the disable list.
func (s Settings) Disabled(component string) bool {
	for _, d := range s.Disable {
		if d == component {
			return true
		}
	}
	return false
}

// AllocateNodeCIDRs is false when kube-controller-manager-arg sets allocate-node-cidrs=false.
func (s Settings) AllocateNodeCIDRs() bool {
	v, ok := ArgValue(s.KubeControllerArgs, "allocate-node-cidrs")
	return !ok || v != "false"
}

// Critical returns the values that must match on every server of a cluster
// ("critical configuration value mismatch", docs/k3s.md), keyed by flag name.
func (s Settings) Critical() map[string]string {
	dis := append([]string{}, s.Disable...)
	sort.Strings(dis)
	return map[string]string{
		"cluster-cidr":             s.ClusterCIDR,
		"service-cidr":             s.ServiceCIDR,
		"cluster-dns":              s.ClusterDNS,
		"cluster-domain":           s.ClusterDomain,
		"disable":                  strings.Join(dis, ","),
		"flannel-backend":          s.FlannelBackend,
		"disable-network-policy":   strconv.FormatBool(s.DisableNetworkPolicy),
		"disable-kube-proxy":       strconv.FormatBool(s.DisableKubeProxy),
		"disable-cloud-controller": strconv.FormatBool(s.DisableCloudController),
		"egress-selector-mode":     s.EgressSelectorMode,
		"secrets-encryption":       strconv.FormatBool(s.SecretsEncryption),
	}
}

// CriticalMismatch returns the sorted flag names whose values differ between two Critical
// maps.
func CriticalMismatch(a, b map[string]string) []string {
	var out []string
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		if a[k] != b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
