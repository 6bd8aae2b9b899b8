// Package inventory is the user's model of a cluster: the hosts, their roles, SSH settings,
// taints, labels, K3s settings, CNI and Rancher options, loaded from one YAML file (with
// K3STRAP_* environment variables and command-line flags layered over it through viper) and
// validated with errors that name file, line, column, host and fix.
//
// The package does no I/O beyond reading the inventory file (and, for validation, checking that
// referenced local files exist).
package inventory

import (
	"github.com/k3strap/k3strap/inventory/k3sflags"
)

// APIVersion and Kind identify an inventory document.
const (
	APIVersion = "k3strap.io/v1alpha1"
	Kind       = "Cluster"
)

// Cluster is one inventory document.
type Cluster struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`

	// Source is where the document came from: the file path given to Load. Empty when the
	// cluster was built in code.
	Source string `yaml:"-"`
	// Positions maps field paths ("spec.hosts[1].taints[0]") to where they stand in Source.
	Positions Positions `yaml:"-"`
	// KeyPositions maps the same field paths to where their mapping key stands (for fields and
	// map entries; list items have none). Load fills it; errors about a key (unknown field,
	// unknown K3s flag) point there, errors about a value point at Positions.
	KeyPositions Positions `yaml:"-"`
	// Overridden maps the field paths whose value came from a K3STRAP_* environment variable or
	// a command-line flag (not from Source) to the override key that set them ("ssh.port").
	Overridden map[string]string `yaml:"-"`
}

// Metadata names the cluster.
type Metadata struct {
	Name string `yaml:"name"`
}

// Spec is everything the user declares.
type Spec struct {
	K3s     K3s      `yaml:"k3s"`
	SSH     SSH      `yaml:"ssh"`
	CNI     CNI      `yaml:"cni,omitempty"`
	Rancher *Rancher `yaml:"rancher,omitempty"`
	Hosts   []Host   `yaml:"hosts"`
}

// InstallMode says how the K3s binary reaches a host.
type InstallMode string

// Install modes.
const (
	// Online lets each host download the K3s release itself (INSTALL_K3S_VERSION / channel).
	Online InstallMode = "online"
	// Airgap uploads the binary and images archive for the host's architecture from local files.
	Airgap InstallMode = "airgap"
)

// CloudControllerMode says which cloud controller clears the
// node.cloudprovider.kubernetes.io/uninitialized taint (DOMAIN.md F1).
type CloudControllerMode string

// Cloud controller modes.
const (
	// CloudControllerEmbedded keeps K3s's embedded cloud controller (the default).
	CloudControllerEmbedded CloudControllerMode = "embedded"
	// CloudControllerExternal disables the embedded one, gives every kubelet
	// cloud-provider=external, and deploys the manifest in ExternalCloudController.
	CloudControllerExternal CloudControllerMode = "external"
	// CloudControllerDisabled disables the embedded one and runs none: no uninitialized taint
	// unless the user adds cloud-provider=external themselves, but no ServiceLB and no node
	// addresses from a cloud controller.
	CloudControllerDisabled CloudControllerMode = "disabled"
)

// K3s holds the cluster-wide K3s settings.
type K3s struct {
	// Version is a K3s release such as "v1.31.4+k3s1". Exactly one of Version and Channel.
	Version string `yaml:"version,omitempty"`
	// Channel is a K3s release channel such as "stable" (online installs only).
	Channel string `yaml:"channel,omitempty"`
	// Token is the cluster join secret. Empty means: read it back from the first server if K3s
	// already runs there, else generate one with crypto/rand. Never logged.
	Token Secret `yaml:"token,omitempty"`
	// Install is online (default) or airgap.
	Install InstallMode `yaml:"install,omitempty"`
	// Airgap maps a Go architecture name (amd64, arm64, arm) to the local artifacts for it.
	Airgap map[string]AirgapArtifacts `yaml:"airgap,omitempty"`
	// CloudController is embedded (default), external or disabled.
	CloudController CloudControllerMode `yaml:"cloudController,omitempty"`
	// ExternalCloudController is the manifest deployed right after the first server starts when
	// CloudController is external.
	ExternalCloudController *ExternalCloudController `yaml:"externalCloudController,omitempty"`
	// Config is the cluster-wide K3s config.yaml content; keys are K3s flag names.
	Config K3sConfig `yaml:"config,omitempty"`
}

// AirgapArtifacts are the local files for one architecture (DOMAIN.md §2 "Airgap").
type AirgapArtifacts struct {
	// Binary is the k3s binary (k3s, k3s-arm64, k3s-armhf in a release).
	Binary string `yaml:"binary"`
	// Images is the images archive k3s-airgap-images-<arch>.tar[.zst|.gz].
	Images string `yaml:"images,omitempty"`
	// Checksums is an optional sha256sum-<arch>.txt; when given, Binary and Images are verified
	// against it before upload.
	Checksums string `yaml:"checksums,omitempty"`
}

// ExternalCloudController declares the cloud controller to deploy when the embedded one is off.
type ExternalCloudController struct {
	// Manifest is a local YAML file placed in the first server's manifests folder.
	Manifest string `yaml:"manifest"`
}

// SSH holds connection settings; every field may be overridden per host.
type SSH struct {
	User string `yaml:"user,omitempty"`
	// Port is the TCP port, default 22.
	Port int `yaml:"port,omitempty"`
	// KeyPath is a private key file; "~" is expanded.
	KeyPath string `yaml:"keyPath,omitempty"`
	// Agent uses the ssh-agent at $SSH_AUTH_SOCK. Nil means: use it when SSH_AUTH_SOCK is set.
	Agent *bool `yaml:"agent,omitempty"`
	// KnownHosts is the known_hosts file to verify against and record new keys into; default
	// ~/.ssh/known_hosts.
	KnownHosts string `yaml:"knownHosts,omitempty"`
	// ConnectTimeout bounds TCP connect plus SSH handshake, e.g. "10s".
	ConnectTimeout Duration `yaml:"connectTimeout,omitempty"`
	// Bastion is a jump host every connection goes through.
	Bastion *Bastion `yaml:"bastion,omitempty"`
	// SudoPasswordEnv names an environment variable holding the sudo password (headless runs).
	SudoPasswordEnv string `yaml:"sudoPasswordEnv,omitempty"`
	// SudoPasswordFile names a file holding the sudo password (headless runs).
	SudoPasswordFile string `yaml:"sudoPasswordFile,omitempty"`
}

// Bastion is a jump host (ProxyJump).
type Bastion struct {
	Address string `yaml:"address"`
	User    string `yaml:"user,omitempty"`
	Port    int    `yaml:"port,omitempty"`
	KeyPath string `yaml:"keyPath,omitempty"`
}

// Role is a host's K3s role.
type Role string

// Host roles.
const (
	// RoleServer runs the control plane; the first server in file order initialises the cluster.
	RoleServer Role = "server"
	// RoleAgent runs workloads only.
	RoleAgent Role = "agent"
)

// FlagRole returns the K3s flag-table role for r.
func (r Role) FlagRole() k3sflags.Role {
	if r == RoleAgent {
		return k3sflags.Agent
	}
	return k3sflags.Server
}

// Host is one machine.
type Host struct {
	// Name is the Kubernetes node name (DNS-1123 subdomain); rendered as K3s node-name.
	Name string `yaml:"name"`
	// Address is how the workstation reaches the host over SSH (IP or DNS name).
	Address string `yaml:"address"`
	Role    Role   `yaml:"role"`
	// Labels are node labels kept true by k3strap.
	Labels map[string]string `yaml:"labels,omitempty"`
	// Taints are node taints kept true by k3strap (key[=value]:Effect in YAML).
	Taints []Taint `yaml:"taints,omitempty"`
	// SSH overrides the cluster SSH defaults for this host; zero fields inherit.
	SSH SSH `yaml:"ssh,omitempty"`
	// K3s overrides cluster K3s settings for this host.
	K3s HostK3s `yaml:"k3s,omitempty"`
}

// HostK3s is the per-host K3s override.
type HostK3s struct {
	// Config keys replace the same keys of the cluster-wide config for this host.
	Config K3sConfig `yaml:"config,omitempty"`
}

// CNIType names the pod network.
type CNIType string

// CNI choices (issue 4).
const (
	CNIFlannel           CNIType = "flannel"
	CNICalico            CNIType = "calico"
	CNIFlannelStandalone CNIType = "flannel-standalone"
	CNINone              CNIType = "none"
)

// KernelPolicy says what happens to hosts whose kernel lacks what the CNI needs (F2).
type KernelPolicy string

// Kernel policies.
const (
	KernelPolicyStrict  KernelPolicy = "strict"
	KernelPolicyExclude KernelPolicy = "exclude"
)

// CNI is the pod network choice.
type CNI struct {
	// Type is flannel (default, embedded in K3s), calico, flannel-standalone or none.
	Type CNIType `yaml:"type,omitempty"`
	// Backend is the flannel backend (vxlan, host-gw, wireguard-native) or the Calico
	// encapsulation (VXLAN, IPIP, VXLANCrossSubnet, IPIPCrossSubnet, None, WireGuard).
	Backend string `yaml:"backend,omitempty"`
	// KernelPolicy is strict (default) or exclude.
	KernelPolicy KernelPolicy `yaml:"kernelPolicy,omitempty"`
	// Calico settings when Type is calico.
	Calico *CalicoSpec `yaml:"calico,omitempty"`
	// Flannel settings when Type is flannel-standalone.
	Flannel *FlannelSpec `yaml:"flannel,omitempty"`
}

// CalicoSpec configures the tigera operator install.
type CalicoSpec struct {
	// Version of the tigera operator manifest, e.g. "v3.29.1".
	Version string `yaml:"version,omitempty"`
	// Manifest is a local tigera-operator.yaml (airgap); empty means fetch by version.
	Manifest string `yaml:"manifest,omitempty"`
}

// FlannelSpec configures a standalone flannel DaemonSet.
type FlannelSpec struct {
	// Version of the flannel image, e.g. "v0.26.1".
	Version string `yaml:"version,omitempty"`
}

// Rancher is the optional Rancher section (issue 5): install Rancher or register with one.
type Rancher struct {
	Install  *RancherInstall  `yaml:"install,omitempty"`
	Register *RancherRegister `yaml:"register,omitempty"`
}

// RancherInstall installs Rancher on the new cluster through K3s's helm-controller.
type RancherInstall struct {
	Version string `yaml:"version,omitempty"`
	// Hostname defaults to <first server address>.sslip.io.
	Hostname string `yaml:"hostname,omitempty"`
	// Replicas defaults to the number of servers, at most 3.
	Replicas int `yaml:"replicas,omitempty"`
	// BootstrapPassword; generated with crypto/rand when empty. Never logged.
	BootstrapPassword Secret `yaml:"bootstrapPassword,omitempty"`
	// Extra holds fields issue 5 adds (TLS source, private CA, registry, values, chart files).
	Extra map[string]any `yaml:",inline"`
}

// RancherRegister registers the cluster with an existing Rancher.
type RancherRegister struct {
	// ImportURL is https://RANCHER/v3/import/TOKEN_CLUSTERID.yaml.
	ImportURL string `yaml:"importURL,omitempty"`
	// Insecure accepts a self-signed Rancher certificate.
	Insecure bool `yaml:"insecure,omitempty"`
	// Extra holds fields issue 5 adds (API URL, token, cluster name).
	Extra map[string]any `yaml:",inline"`
}
