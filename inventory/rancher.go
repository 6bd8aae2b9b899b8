// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"net"
	"strings"

	"github.com/k3strap/k3strap/k3s"
)

// Chart versions k3strap installs when the inventory pins none. They are the
// releases this k3strap version was checked with; pin your own with rancher.install.version
// and rancher.install.certManager.version.
const (
	DefaultRancherVersion     = "2.11.3"
	DefaultCertManagerVersion = "v1.17.2"
)

// RancherVersion returns the rancher chart version to install: Version or
// DefaultRancherVersion.
func (in *RancherInstall) RancherVersion() string {
	if in.Version != "" {
		return in.Version
	}
	return DefaultRancherVersion
}

// RancherRepo returns the rancher chart repository: Repo or DefaultRancherRepo.
func (in *RancherInstall) RancherRepo() string {
	if in.Repo != "" {
		return in.Repo
	}
	return DefaultRancherRepo
}

// CertManagerVersion returns the cert-manager chart version: CertManager.Version or
// DefaultCertManagerVersion.
func (in *RancherInstall) CertManagerVersion() string {
	if in.CertManager != nil && in.CertManager.Version != "" {
		return in.CertManager.Version
	}
	return DefaultCertManagerVersion
}

// CertManagerRepo returns the cert-manager chart repository: CertManager.Repo or
// DefaultCertManagerRepo.
func (in *RancherInstall) CertManagerRepo() string {
	if in.CertManager != nil && in.CertManager.Repo != "" {
		return in.CertManager.Repo
	}
	return DefaultCertManagerRepo
}

// EffectiveTLSSource returns TLSSource, rancher when empty.
func (in *RancherInstall) EffectiveTLSSource() RancherTLSSource {
	if in.TLSSource == "" {
		return TLSRancher
	}
	return in.TLSSource
}

// RancherHostname returns the Rancher URL's host name: rancher.install.hostname, else
// <first server address>.sslip.io. sslip.io resolves a name that embeds an IPv4
// address to that address; an IPv6 address is written with '-' for ':'. A first server given
// by DNS name is used as is. "" when there is no install section or no server.
func (c *Cluster) RancherHostname() string {
	r := c.Spec.Rancher
	if r == nil || r.Install == nil {
		return ""
	}
	if r.Install.Hostname != "" {
		return r.Install.Hostname
	}
	fs := c.FirstServer()
	if fs == nil {
		return ""
	}
	ip := net.ParseIP(fs.Address)
	switch {
	case ip == nil:
		return fs.Address
	case ip.To4() != nil:
		return ip.String() + ".sslip.io"
	default:
		return strings.ReplaceAll(ip.String(), ":", "-") + ".sslip.io"
	}
}

// RancherReplicas returns the Rancher replica count: rancher.install.replicas, else the
// number of servers, at most MaxRancherReplicas.
func (c *Cluster) RancherReplicas() int {
	r := c.Spec.Rancher
	if r != nil && r.Install != nil && r.Install.Replicas > 0 {
		return r.Install.Replicas
	}
	return min(max(len(c.Servers()), 1), MaxRancherReplicas)
}

// RancherClusterName returns the cluster's name in Rancher (register API mode):
// rancher.register.clusterName or metadata.name.
func (c *Cluster) RancherClusterName() string {
	if r := c.Spec.Rancher; r != nil && r.Register != nil && r.Register.ClusterName != "" {
		return r.Register.ClusterName
	}
	return c.Metadata.Name
}

// roleTaintKeys are the control-plane and etcd taint keys Kubernetes, K3s and Rancher set on
// their own nodes; Rancher's cattle-cluster-agent tolerates them by default (Rancher docs
// "Rancher Agents", scheduling rules since v2.5.4).
var roleTaintKeys = map[string]bool{
	k3s.TaintControlPlane: true, k3s.TaintMaster: true, k3s.LabelEtcd: true, k3s.LabelRancherControlPlane: true,
}

// FirstServerCustomTaints returns the first server's NoSchedule / NoExecute taints as K3s
// registers them (HostTaints),
// without the control-plane/etcd role taints and the taints Kubernetes manages itself
// (node.kubernetes.io/*, node.cloudprovider.kubernetes.io/*): the "custom taints" of
// docs/failure-modes.md F3 that Rancher's agents only tolerate through appendTolerations.
func (c *Cluster) FirstServerCustomTaints() []Taint {
	fs := c.FirstServer()
	if fs == nil {
		return nil
	}
	var out []Taint
	for _, t := range c.HostTaints(fs) {
		if t.Blocks() && !t.Managed() && !roleTaintKeys[t.Key] {
			out = append(out, t)
		}
	}
	return out
}

// Untolerated returns the taints of ts that none of tolerations tolerates.
func Untolerated(ts []Taint, tolerations []Toleration) []Taint {
	core := CoreTolerations(tolerations)
	var out []Taint
	for _, t := range ts {
		if !t.ToleratedBy(core) {
			out = append(out, t)
		}
	}
	return out
}
