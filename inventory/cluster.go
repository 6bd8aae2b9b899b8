// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/k3s"
)

// flagTable is the immutable K3s flag table, parsed once.
func flagTable() *k3s.Table { return k3s.Flags() }

// Defaults applied by Load (and usable on clusters built in code).
const (
	DefaultSSHPort        = 22
	DefaultConnectTimeout = Duration(10e9) // 10 s
	DefaultFlannelBackend = k3s.DefaultFlannelBackend
	DefaultClusterCIDR    = k3s.DefaultClusterCIDR
	DefaultServiceCIDR    = k3s.DefaultServiceCIDR
	// DefaultKubeconfigMode is what k3strap renders for write-kubeconfig-mode: the kubeconfig
	// holds cluster-admin credentials, so only root reads it.
	DefaultKubeconfigMode = "0600"
)

// FirstServer returns the host that initialises the cluster: the first server in file order.
// nil when there is no server.
func (c *Cluster) FirstServer() *Host {
	for i := range c.Spec.Hosts {
		if c.Spec.Hosts[i].Role == RoleServer {
			return &c.Spec.Hosts[i]
		}
	}
	return nil
}

// Servers returns the server hosts in file order.
func (c *Cluster) Servers() []*Host { return c.byRole(RoleServer) }

// Agents returns the agent hosts in file order.
func (c *Cluster) Agents() []*Host { return c.byRole(RoleAgent) }

func (c *Cluster) byRole(r Role) []*Host {
	var out []*Host
	for i := range c.Spec.Hosts {
		if c.Spec.Hosts[i].Role == r {
			out = append(out, &c.Spec.Hosts[i])
		}
	}
	return out
}

// Host returns the host named name, or nil.
func (c *Cluster) Host(name string) *Host {
	for i := range c.Spec.Hosts {
		if c.Spec.Hosts[i].Name == name {
			return &c.Spec.Hosts[i]
		}
	}
	return nil
}

// IsFirstServer reports whether h initialises the cluster.
func (c *Cluster) IsFirstServer(h *Host) bool {
	f := c.FirstServer()
	return f != nil && h != nil && f.Name == h.Name
}

// HostSSH returns the SSH settings for h: the host's own fields over the cluster's, with
// k3strap's defaults for what neither sets (user root, port 22, connect timeout 10 s,
// known_hosts ~/.ssh/known_hosts).
func (c *Cluster) HostSSH(h *Host) SSH {
	s := c.HostSSHExplicit(h)
	if s.Port == 0 {
		s.Port = DefaultSSHPort
	}
	if s.User == "" {
		s.User = "root"
	}
	if s.ConnectTimeout == 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	if s.KnownHosts == "" {
		s.KnownHosts = resolveFrom("", DefaultKnownHosts)
	}
	return s
}

// HostSSHExplicit returns only what the inventory (and overrides) set for h's SSH: the host's
// own fields over the cluster's, no defaults — so that ~/.ssh/config can fill the rest.
func (c *Cluster) HostSSHExplicit(h *Host) SSH {
	s := c.Spec.SSH
	o := h.SSH
	if o.User != "" {
		s.User = o.User
	}
	if o.Port != 0 {
		s.Port = o.Port
	}
	if o.KeyPath != "" {
		s.KeyPath = o.KeyPath
	}
	if o.Agent != nil {
		s.Agent = o.Agent
	}
	if o.KnownHosts != "" {
		s.KnownHosts = o.KnownHosts
	}
	if o.ConnectTimeout != 0 {
		s.ConnectTimeout = o.ConnectTimeout
	}
	if o.Bastion != nil || len(o.Bastions) > 0 {
		// The host's jump path replaces the cluster's as a whole.
		s.Bastion, s.Bastions = o.Bastion, o.Bastions
	}
	if o.CertificatePath != "" {
		s.CertificatePath = o.CertificatePath
	}
	if o.KeyPassphraseEnv != "" || o.KeyPassphraseFile != "" {
		s.KeyPassphraseEnv, s.KeyPassphraseFile = o.KeyPassphraseEnv, o.KeyPassphraseFile
	}
	if o.ProxyCommand != "" {
		s.ProxyCommand = o.ProxyCommand
	}
	if o.SudoPasswordEnv != "" {
		s.SudoPasswordEnv = o.SudoPasswordEnv
	}
	if o.SudoPasswordFile != "" {
		s.SudoPasswordFile = o.SudoPasswordFile
	}
	return s
}

// HostConfig returns the K3s config k3strap will write for h, except the runtime values
// the cluster-wide config, the host's overrides, then what the inventory's own fields imply:
//   - node-name is the inventory name; node-label and node-taint come from Labels and Taints;
//   - cloudController external sets disable-cloud-controller and kubelet-arg
//     cloud-provider=external; disabled sets disable-cloud-controller only (docs/failure-modes.md F1);
//   - cni calico / flannel-standalone / none set flannel-backend none, calico also
//     disable-network-policy (docs/cni.md);
//   - write-kubeconfig-mode defaults to 0600;
//   - token-file is k3s.PathTokenFile (the token itself never stands in config.yaml);
//   - servers get their address, APIAddress and spec.k3s.apiEndpoint (address, kube-vip VIP)
//     in tls-san, the first server of an HA cluster cluster-init, every other host server:
//     RegistrationURL (the apiEndpoint when set, else ServerURL(first server)).
//
// It is the one place a host's config is assembled: the installer's plan renders it, preflight
// and the CNI templates judge it.
// Agents get only agent flags: server-only keys from the cluster-wide config are dropped
// (validation reports a server-only key set per agent host).
func (c *Cluster) HostConfig(h *Host) K3sConfig {
	cfg := c.Spec.K3s.Config.Merge(h.K3s.Config)
	cfg.NodeName = h.Name
	if len(h.Labels) > 0 {
		keys := make([]string, 0, len(h.Labels))
		for k := range h.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		labels := StringList{}
		for _, k := range keys {
			labels = append(labels, k+"="+h.Labels[k])
		}
		cfg.NodeLabel = appendUnique(cfg.NodeLabel, labels...)
	}
	cfg.NodeTaint, _ = hostTaints(cfg.NodeTaint, h) // hosttaints.go: the one rule
	switch c.Spec.K3s.CloudController {
	case CloudControllerExternal:
		cfg.DisableCloudController = Bool(true)
		if _, ok := ArgValue(cfg.KubeletArg, "cloud-provider"); !ok {
			cfg.KubeletArg = appendUnique(cfg.KubeletArg, "cloud-provider=external")
		}
	case CloudControllerDisabled:
		cfg.DisableCloudController = Bool(true)
	}
	switch c.Spec.CNI.Type {
	case CNICalico:
		cfg.FlannelBackend = "none"
		cfg.DisableNetworkPolicy = Bool(true)
	case CNIFlannelStandalone, CNINone:
		cfg.FlannelBackend = "none"
	case CNIFlannel, "":
		if c.Spec.CNI.Backend != "" && cfg.FlannelBackend == "" {
			cfg.FlannelBackend = c.Spec.CNI.Backend
		}
	}
	if h.Role == RoleServer && cfg.WriteKubeconfigMode == "" {
		cfg.WriteKubeconfigMode = DefaultKubeconfigMode
	}
	cfg.TokenFile = k3s.PathTokenFile
	first := c.FirstServer()
	if h.Role == RoleServer {
		cfg.TLSSAN = appendUnique(cfg.TLSSAN, h.Address)
		if c.APIAddress != "" {
			cfg.TLSSAN = appendUnique(cfg.TLSSAN, c.APIAddress)
		}
		if e := c.Spec.K3s.APIEndpoint; e != nil && e.Address != "" {
			cfg.TLSSAN = appendUnique(cfg.TLSSAN, e.Address)
		}
		if vip := c.Spec.K3s.APIEndpoint.VIP(); vip != "" {
			cfg.TLSSAN = appendUnique(cfg.TLSSAN, vip)
		}
		if len(c.Servers()) > 1 && c.IsFirstServer(h) {
			cfg.ClusterInit = Bool(true)
		}
		c.etcdSnapshotConfig(&cfg) // etcdsnapshots.go
		dedicatedConfig(&cfg, h)   // dedicated.go
	}
	if first != nil && !c.IsFirstServer(h) {
		cfg.Server = c.RegistrationURL()
	}
	if h.Role == RoleAgent {
		cfg = cfg.ForAgent()
	}
	return cfg
}

// ServerURL is the supervisor address nodes joining through h use (https://ADDRESS:6443;
// docs/k3s.md).
func ServerURL(h *Host) string {
	return "https://" + net.JoinHostPort(h.Address, "6443")
}

// ForAgent drops the keys an agent does not accept.
func (c K3sConfig) ForAgent() K3sConfig {
	out := K3sConfig{
		Token:          c.Token,
		TokenFile:      c.TokenFile,
		Server:         c.Server,
		DataDir:        c.DataDir,
		NodeName:       c.NodeName,
		NodeIP:         c.NodeIP,
		NodeExternalIP: c.NodeExternalIP,
		NodeLabel:      c.NodeLabel,
		NodeTaint:      c.NodeTaint,
		FlannelIface:   c.FlannelIface,
		KubeletArg:     c.KubeletArg,
	}
	if len(c.Extra) > 0 {
		t := flagTable()
		for k, v := range c.Extra {
			if _, ok := t.Lookup(k3s.Agent, k); ok {
				if out.Extra == nil {
					out.Extra = map[string]any{}
				}
				out.Extra[k] = v
			}
		}
	}
	return out
}

// EffectiveFlannelBackend returns the flannel backend of cfg ("vxlan" when unset).
func (c K3sConfig) EffectiveFlannelBackend() string {
	if c.FlannelBackend == "" {
		return DefaultFlannelBackend
	}
	return c.FlannelBackend
}

// EmbeddedFlannel reports whether K3s's embedded flannel configures the nodes' pod network:
// the first server's effective flannel-backend (a server flag the agents receive from their
// server) is not none. false without a server.
func (c *Cluster) EmbeddedFlannel() bool {
	first := c.FirstServer()
	return first != nil && c.HostConfig(first).EffectiveFlannelBackend() != "none"
}

// KubeletCloudProviderExternal reports whether h's kubelet will run with cloud-provider=external:
// K3s sets it itself while its embedded cloud controller runs (a server setting that agents
// receive from their server); otherwise only a kubelet-arg does. An explicit kubelet-arg
// cloud-provider wins. The rule is k3s.CloudSettings (docs/failure-modes.md F1).
func (c *Cluster) KubeletCloudProviderExternal(h *Host) bool {
	return c.CloudSettings(h).KubeletCloudProviderExternal()
}

// EmbeddedCloudController reports whether K3s's embedded cloud controller runs for h: on a
// server, unless its config disables it; on an agent, as its first server says.
func (c *Cluster) EmbeddedCloudController(h *Host) bool {
	return !c.CloudSettings(h).DisableCloudController
}

// ExternalCloudControllerDeclared reports whether k3strap deploys an external cloud
// controller: spec.k3s.cloudController external with a manifest.
func (c *Cluster) ExternalCloudControllerDeclared() bool {
	e := c.Spec.K3s.ExternalCloudController
	return c.Spec.K3s.CloudController == CloudControllerExternal && e != nil && e.Manifest != ""
}

// CloudSettings returns the settings of h that decide, by k3s.CloudSettings's rule, whether
// its node's uninitialized taint is ever removed (docs/failure-modes.md F1): the
// disable-cloud-controller of h (for an agent: of the first server), h's rendered kubelet-arg,
// and whether an external cloud controller is declared.
func (c *Cluster) CloudSettings(h *Host) k3s.CloudSettings {
	src := h
	if h.Role == RoleAgent {
		src = c.FirstServer()
	}
	s := k3s.CloudSettings{KubeletArgs: c.HostConfig(h).KubeletArg, ExternalCloudController: c.ExternalCloudControllerDeclared()}
	if src != nil {
		s.DisableCloudController = IsTrue(c.HostConfig(src).DisableCloudController)
	}
	return s
}

// String describes the host for messages: name (address).
func (h *Host) String() string { return fmt.Sprintf("%s (%s)", h.Name, h.Address) }

func appendUnique(l StringList, items ...string) StringList {
	seen := map[string]bool{}
	for _, s := range l {
		seen[s] = true
	}
	out := append(StringList(nil), l...)
	for _, s := range items {
		if !seen[strings.TrimSpace(s)] {
			out = append(out, s)
			seen[s] = true
		}
	}
	return out
}

// ResolvConf returns the resolver file h's K3s is told to use: the resolv-conf key of its
// config, else a kubelet-arg resolv-conf=FILE; "" when neither is set (K3s then chooses,
// docs/k3s.md#dns).
func (c *Cluster) ResolvConf(h *Host) string {
	cfg := c.HostConfig(h)
	if v, ok := cfg.Extra["resolv-conf"].(string); ok && v != "" {
		return v
	}
	if v, ok := ArgValue(cfg.KubeletArg, "resolv-conf"); ok {
		return v
	}
	return ""
}

// ClusterCIDRs returns the pod and service ranges of the first server's config, K3s's
// defaults (10.42.0.0/16, 10.43.0.0/16) where unset; entries may be comma-separated
// (dual-stack).
func (c *Cluster) ClusterCIDRs() (pods, services []string) {
	split := func(l StringList, def string) []string {
		if len(l) == 0 {
			return []string{def}
		}
		var out []string
		for _, e := range l {
			for _, s := range strings.Split(e, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
		}
		return out
	}
	var cfg K3sConfig
	if fs := c.FirstServer(); fs != nil {
		cfg = c.HostConfig(fs)
	}
	return split(cfg.ClusterCIDR, DefaultClusterCIDR), split(cfg.ServiceCIDR, DefaultServiceCIDR)
}

// LocalHost returns the host whose connection is local (k3strap runs on it), nil when every
// host is reached over SSH. Validation allows at most one.
func (c *Cluster) LocalHost() *Host {
	for i := range c.Spec.Hosts {
		if c.Spec.Hosts[i].Connection == ConnectionLocal {
			return &c.Spec.Hosts[i]
		}
	}
	return nil
}

// IsLocal reports whether h is reached without SSH (connection: local).
func (h *Host) IsLocal() bool { return h != nil && h.Connection == ConnectionLocal }
