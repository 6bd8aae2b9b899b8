// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"net"
	"sort"
)

// Edge and enterprise settings: a fixed registration address for HA clusters,
// private registries and mirrors, SELinux, the install script and the airgap bundle.

// DefaultInstallScriptURL is the official K3s install script (docs/k3s.md).
const DefaultInstallScriptURL = "https://get.k3s.io"

// APIEndpoint is a fixed registration address (a DNS name or a virtual IP in front of the
// servers): every server gets it in tls-san, agents and joining servers use it as server:,
// and the kubeconfig points at it (docs/k3s.md, "Fixed registration address").
type APIEndpoint struct {
	// Address is the DNS name or IP, without scheme or port (the port is 6443).
	Address string `yaml:"address"`
	// KubeVIP renders a kube-vip DaemonSet (control-plane ARP mode) as a first-server
	// manifest that holds Address (or KubeVIP.Address) on the servers.
	KubeVIP *KubeVIP `yaml:"kubeVIP,omitempty"`
}

// KubeVIP configures the example kube-vip manifest.
type KubeVIP struct {
	// Address is the virtual IP; default APIEndpoint.Address (which must then be an IP).
	Address string `yaml:"address,omitempty"`
	// Interface is the servers' network interface that carries the VIP, e.g. eth0.
	Interface string `yaml:"interface"`
	// Image is the kube-vip image; default DefaultKubeVIPImage.
	Image string `yaml:"image,omitempty"`
}

// DefaultKubeVIPImage is the kube-vip image of the example manifest.
const DefaultKubeVIPImage = "ghcr.io/kube-vip/kube-vip:v0.8.9"

// VIP returns the kube-vip address: KubeVIP.Address, else the endpoint's address.
func (e *APIEndpoint) VIP() string {
	if e == nil || e.KubeVIP == nil {
		return ""
	}
	if e.KubeVIP.Address != "" {
		return e.KubeVIP.Address
	}
	return e.Address
}

// EndpointAddress is the address clients and joining nodes use for the API server: the
// command layer's APIAddress (--api-address) when set, else spec.k3s.apiEndpoint.address;
// "" when neither (the first server's address is used).
func (c *Cluster) EndpointAddress() string {
	if c.APIAddress != "" {
		return c.APIAddress
	}
	if e := c.Spec.K3s.APIEndpoint; e != nil {
		return e.Address
	}
	return ""
}

// RegistrationURL is the server: URL of agents and joining servers: the fixed registration
// address (spec.k3s.apiEndpoint.address) when set, else the first server's (ServerURL).
func (c *Cluster) RegistrationURL() string {
	if e := c.Spec.K3s.APIEndpoint; e != nil && e.Address != "" {
		return "https://" + net.JoinHostPort(e.Address, "6443")
	}
	if f := c.FirstServer(); f != nil {
		return ServerURL(f)
	}
	return ""
}

// Registries is K3s's /etc/rancher/k3s/registries.yaml (docs/registries.md). Secrets are never
// in the inventory: passwords come from files (mode 0600 or stricter) or environment variables.
type Registries struct {
	// Mirrors maps a registry name (docker.io, registry.example.com, "*") to its mirrors.
	Mirrors map[string]RegistryMirror `yaml:"mirrors,omitempty"`
	// Configs maps a registry host (as in a mirror endpoint) to its auth and TLS settings.
	Configs map[string]RegistryConfig `yaml:"configs,omitempty"`
}

// RegistryMirror is one mirrors entry.
type RegistryMirror struct {
	// Endpoint lists mirror URLs tried in order (then the default endpoint). Empty is valid
	// with embedded-registry (the registry is then mirrored between nodes only).
	Endpoint []string `yaml:"endpoint,omitempty"`
	// Rewrite maps a regular expression on the image name to its replacement.
	Rewrite map[string]string `yaml:"rewrite,omitempty"`
}

// RegistryConfig is one configs entry.
type RegistryConfig struct {
	Auth *RegistryAuth `yaml:"auth,omitempty"`
	TLS  *RegistryTLS  `yaml:"tls,omitempty"`
}

// RegistryAuth holds credentials by reference: the password is read from PasswordFile
// (refused when group- or world-readable) or the environment variable PasswordEnv.
type RegistryAuth struct {
	Username     string `yaml:"username,omitempty"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
	PasswordEnv  string `yaml:"passwordEnv,omitempty"`
}

// RegistryTLS names local PEM files uploaded to the hosts (under k3s.DirRegistryTLS) and the
// insecure switch.
type RegistryTLS struct {
	CertFile           string `yaml:"certFile,omitempty"`
	KeyFile            string `yaml:"keyFile,omitempty"`
	CAFile             string `yaml:"caFile,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify,omitempty"`
}

// RegistryHosts returns the configs keys in order.
func (r *Registries) RegistryHosts() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Configs))
	for k := range r.Configs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RegistriesOf returns the registries.yaml h gets and the inventory field it comes from
// (for messages): h's own registries ("spec.hosts[I].registries") when set, which replace
// spec.registries entirely (replace, not merge), else spec.registries ("spec.registries");
// nil and "" when neither is set (docs/registries.md, "Per host").
func (c *Cluster) RegistriesOf(h *Host) (*Registries, string) {
	if h != nil && h.Registries != nil {
		for i := range c.Spec.Hosts {
			if &c.Spec.Hosts[i] == h || c.Spec.Hosts[i].Name == h.Name {
				return h.Registries, fmt.Sprintf("spec.hosts[%d].registries", i)
			}
		}
		return h.Registries, "spec.hosts[" + h.Name + "].registries"
	}
	if c.Spec.Registries != nil {
		return c.Spec.Registries, "spec.registries"
	}
	return nil, ""
}

// HostEnv is what k3strap learns from a host that changes its K3s config (facts, not the
// inventory).
type HostEnv struct {
	// SELinuxEnforcing renders selinux: true (K3s's --selinux) for a host enforcing SELinux.
	SELinuxEnforcing bool
}

// HostConfigOn is HostConfig for a host whose facts are known: HostConfig plus what env
// implies (selinux: true on an enforcing SELinux host).
func (c *Cluster) HostConfigOn(h *Host, env HostEnv) K3sConfig {
	cfg := c.HostConfig(h)
	if env.SELinuxEnforcing {
		if _, set := cfg.Extra["selinux"]; !set {
			if cfg.Extra == nil {
				cfg.Extra = map[string]any{}
			}
			cfg.Extra["selinux"] = true
		}
	}
	return cfg
}
