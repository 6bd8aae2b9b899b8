// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package inventory is the user's model of a cluster: the hosts, their roles, SSH settings,
// taints, labels, K3s settings, CNI and Rancher options, loaded from one YAML file (with
// overrides that the command layer applies through LoadOptions.Override) and
// validated with errors that name file, line, column, host and fix.
//
// The package does no I/O beyond reading the inventory file (and, for validation, checking that
// referenced local files exist), and opening the airgap bundle it names (bundle.go: extracted
// once into the user's cache directory).
package inventory

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/k3s"
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
	// Overridden maps the field paths whose value came from an override (LoadOptions.Override:
	// a K3STRAP_* environment variable or a command-line flag, not Source) to a description of
	// where it came from, shown in messages ("override ssh.port (a command-line flag or
	// $K3STRAP_SSH_PORT)").
	Overridden map[string]string `yaml:"-"`
	// APIAddress is an extra address clients use for the API server (a load balancer or DNS
	// name; --api-address): added to every server's tls-san and used in the kubeconfig. Set
	// by the command layer, not read from the file.
	APIAddress string `yaml:"-"`
	// Bundle is the airgap bundle spec.k3s.airgapBundle names, opened by Load (bundle.go).
	Bundle *Bundle `yaml:"-"`
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
	// Registries is K3s's registries.yaml (mirrors and per-registry auth/TLS), written 0600 on
	// every host that has no registries of its own (Host.Registries; edge.go;
	// docs/registries.md).
	Registries *Registries `yaml:"registries,omitempty"`
	// Proxy is the HTTP(S) proxy every host reaches the internet through (proxy.go;
	// docs/proxy.md).
	Proxy *Proxy `yaml:"proxy,omitempty"`
	Hosts []Host `yaml:"hosts"`
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
// node.cloudprovider.kubernetes.io/uninitialized taint (docs/failure-modes.md F1).
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
	// APIEndpoint is a fixed registration address in front of the servers (edge.go).
	APIEndpoint *APIEndpoint `yaml:"apiEndpoint,omitempty"`
	// InstallScriptURL is where online hosts download the official install script from
	// (default DefaultInstallScriptURL, https://get.k3s.io); InstallScriptSHA256 pins it.
	InstallScriptURL    string `yaml:"installScriptURL,omitempty"`
	InstallScriptSHA256 string `yaml:"installScriptSHA256,omitempty"`
	// ReleaseURL replaces https://github.com/k3s-io/k3s/releases for online installs (the
	// install script's GITHUB_URL, and INSTALL_K3S_ARTIFACT_URL = ReleaseURL/download for
	// the current official script): a mirror of the release assets.
	ReleaseURL string `yaml:"releaseURL,omitempty"`
	// AirgapInstallScript is the install.sh the user supplies for airgap installs (K3s's
	// airgap docs); empty means k3strap's own script (templates/install/k3s-install.sh).
	AirgapInstallScript string `yaml:"airgapInstallScript,omitempty"`
	// SELinuxRPMs maps a distribution (el8, el9, el10, sle) to a local k3s-selinux RPM that
	// airgap installs upload and install on SELinux hosts of that distribution.
	SELinuxRPMs map[string]string `yaml:"selinuxRPMs,omitempty"`
	// AirgapBundle is a tar written by `k3strap bundle`; its files stand in for the paths of
	// spec.k3s.airgap, airgapInstallScript, selinuxRPMs and the local manifests and charts
	// (bundle.go). Top-level rather than under airgap, which is keyed by architecture.
	AirgapBundle string `yaml:"airgapBundle,omitempty"`
	// Upgrade says how `k3strap upgrade` runs: over SSH (default) or through
	// system-upgrade-controller (upgrade.go).
	Upgrade *Upgrade `yaml:"upgrade,omitempty"`
	// EtcdSnapshots are K3s's scheduled etcd snapshots and their S3 upload (etcdsnapshots.go).
	EtcdSnapshots *EtcdSnapshots `yaml:"etcdSnapshots,omitempty"`
}

// AirgapArtifacts are the local files for one architecture (docs/k3s.md#airgap).
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
	// ConnectTimeout bounds the whole connect — the ssh-agent (dial, list, sign), TCP, the SSH
	// handshake, the host key check and authentication —, e.g. "10s"; greater than zero.
	ConnectTimeout Duration `yaml:"connectTimeout,omitempty"`
	// CertificatePath is an OpenSSH user certificate (signed by a CA: ssh-keygen -s, Vault,
	// Teleport) for the key in keyPath; default <keyPath>-cert.pub when that file exists, as
	// OpenSSH's CertificateFile. One outside its validity window fails before dialing.
	CertificatePath string `yaml:"certificatePath,omitempty"`
	// KeyPassphraseEnv names an environment variable holding the passphrase of an encrypted
	// key (headless runs; never a flag). Without it or keyPassphraseFile, the passphrase is
	// asked on the terminal, else the key is left to the ssh-agent.
	KeyPassphraseEnv string `yaml:"keyPassphraseEnv,omitempty"`
	// KeyPassphraseFile names a file (mode 0600) whose first line is the key's passphrase.
	KeyPassphraseFile string `yaml:"keyPassphraseFile,omitempty"`
	// ProxyCommand is a local command whose stdin and stdout are the SSH connection (OpenSSH
	// ProxyCommand: `ssh -W %h:%p bastion`, SSM, cloudflared); tokens %h %p %r %n %%. It wins
	// over ~/.ssh/config's and is exclusive with bastion.
	ProxyCommand string `yaml:"proxyCommand,omitempty"`
	// Bastion is a jump host every connection goes through.
	Bastion *Bastion `yaml:"bastion,omitempty"`
	// Bastions are jump hosts crossed in order (the first is dialed directly, each next one
	// through the previous: ProxyJump a,b); exclusive with bastion.
	Bastions []Bastion `yaml:"bastions,omitempty"`
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
func (r Role) FlagRole() k3s.Role {
	if r == RoleAgent {
		return k3s.Agent
	}
	return k3s.Server
}

// Host is one machine.
type Host struct {
	// Name is the Kubernetes node name (DNS-1123 subdomain); rendered as K3s node-name.
	Name string `yaml:"name"`
	// Address is how the workstation reaches the host over SSH (IP or DNS name).
	Address string `yaml:"address"`
	Role    Role   `yaml:"role"`
	// Dedicated splits a server's roles: etcd (etcd only) or control-plane (no etcd);
	// empty runs both (dedicated.go).
	Dedicated Dedicated `yaml:"dedicated,omitempty"`
	// Labels are node labels kept true by k3strap.
	Labels map[string]string `yaml:"labels,omitempty"`
	// Taints are node taints kept true by k3strap (key[=value]:Effect in YAML).
	Taints []Taint `yaml:"taints,omitempty"`
	// Connection is how k3strap reaches the host: ssh (default) or local — k3strap runs on the
	// host itself and runs its commands there without SSH (local mode, as k0sctl's localhost
	// and k3sup's --local; docs/edge-first-boot.md). At most one host of an inventory is local.
	Connection Connection `yaml:"connection,omitempty"`
	// SSH overrides the cluster SSH defaults for this host; zero fields inherit.
	SSH SSH `yaml:"ssh,omitempty"`
	// K3s overrides cluster K3s settings for this host.
	K3s HostK3s `yaml:"k3s,omitempty"`
	// Registries is this host's registries.yaml (a site's local mirror): when set it replaces
	// spec.registries for this host entirely — replace, not merge; `registries: {}` gives the
	// host an empty file. Nil uses spec.registries (Cluster.RegistriesOf; docs/registries.md).
	Registries *Registries `yaml:"registries,omitempty"`
	// Proxy overrides spec.proxy for this host: its non-empty fields replace the
	// cluster-wide ones (Cluster.HostProxy; docs/proxy.md).
	Proxy *Proxy `yaml:"proxy,omitempty"`
}

// Connection says how k3strap reaches a host.
type Connection string

// Connections.
const (
	// ConnectionSSH reaches the host over SSH (the default).
	ConnectionSSH Connection = "ssh"
	// ConnectionLocal runs on the host itself: k3strap is started there (by hand, or at boot
	// by `k3strap firstboot`) and runs commands through /bin/sh, sudo when not root.
	ConnectionLocal Connection = "local"
)

// HostK3s is the per-host K3s override.
type HostK3s struct {
	// Config keys replace the same keys of the cluster-wide config for this host.
	Config K3sConfig `yaml:"config,omitempty"`
}

// CNIType names the pod network.
type CNIType string

// CNI choices.
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

// Rancher is the optional Rancher section: install Rancher on the new cluster, or
// register the cluster with a Rancher that runs elsewhere. Exactly one of Install and Register.
type Rancher struct {
	Install  *RancherInstall  `yaml:"install,omitempty"`
	Register *RancherRegister `yaml:"register,omitempty"`
	// Timeout bounds the supervision after the cluster is up (chart installs, deployment
	// available, URL answering; or the cluster agent available), e.g. "15m". Zero means
	// DefaultRancherTimeout.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// Rancher defaults (docs/rancher.md).
const (
	// DefaultRancherTimeout is how long k3strap waits for Rancher after the cluster is up.
	DefaultRancherTimeout = Duration(15 * time.Minute)
	// DefaultRancherRepo is Rancher's stable Helm chart repository.
	DefaultRancherRepo = "https://releases.rancher.com/server-charts/stable"
	// DefaultCertManagerRepo is Jetstack's Helm chart repository (chart cert-manager).
	DefaultCertManagerRepo = "https://charts.jetstack.io"
	// MaxRancherReplicas caps the default replica count (Rancher's chart default is 3).
	MaxRancherReplicas = 3
)

// RancherTLSSource is the Rancher chart's ingress.tls.source (docs/rancher.md).
type RancherTLSSource string

// TLS sources of Rancher's ingress certificate.
const (
	// TLSRancher: Rancher's own CA issues the certificate through cert-manager (default).
	TLSRancher RancherTLSSource = "rancher"
	// TLSLetsEncrypt: cert-manager gets a Let's Encrypt certificate (needs LetsEncrypt.Email and a
	// hostname reachable from the internet).
	TLSLetsEncrypt RancherTLSSource = "letsEncrypt"
	// TLSSecret: the certificate comes from the Secret cattle-system/tls-rancher-ingress, made by
	// k3strap from TLSSecret's files or by the user; cert-manager is not installed.
	TLSSecret RancherTLSSource = "secret"
)

// NeedsCertManager reports whether the TLS source needs cert-manager (rancher and letsEncrypt
// do; secret does not). The empty source means rancher.
func (s RancherTLSSource) NeedsCertManager() bool { return s != TLSSecret }

// RancherInstall installs Rancher on the new cluster through K3s's helm-controller: HelmChart
// objects (helm.cattle.io/v1) for cert-manager (when the TLS source needs it) and rancher
// (release rancher, namespace cattle-system) in the first server's manifests folder.
type RancherInstall struct {
	// Version is the rancher chart version (= the Rancher version), e.g. "2.11.3"; default
	// DefaultRancherVersion.
	Version string `yaml:"version,omitempty"`
	// Repo is the chart repository; default DefaultRancherRepo.
	Repo string `yaml:"repo,omitempty"`
	// Hostname is the Rancher URL's host; default <first server address>.sslip.io.
	Hostname string `yaml:"hostname,omitempty"`
	// Replicas defaults to the number of servers, at most MaxRancherReplicas.
	Replicas int `yaml:"replicas,omitempty"`
	// BootstrapPassword is the first admin login; generated with crypto/rand when empty and then
	// stored 0600 next to the kubeconfig. Never logged, never in `render` output.
	BootstrapPassword Secret `yaml:"bootstrapPassword,omitempty"`
	// TLSSource is the chart's ingress.tls.source: rancher (default), letsEncrypt or secret.
	TLSSource RancherTLSSource `yaml:"tlsSource,omitempty"`
	// LetsEncrypt configures tlsSource letsEncrypt.
	LetsEncrypt *LetsEncrypt `yaml:"letsEncrypt,omitempty"`
	// TLSSecret names local PEM files for tlsSource secret; k3strap creates the Secret
	// cattle-system/tls-rancher-ingress from them. Without it the user creates that Secret.
	TLSSecret *RancherTLSFiles `yaml:"tlsSecret,omitempty"`
	// PrivateCA tells Rancher its certificate is signed by a private CA (chart value privateCA).
	PrivateCA bool `yaml:"privateCA,omitempty"`
	// PrivateCAFile is a local PEM file with that CA; k3strap creates the Secret
	// cattle-system/tls-ca (key cacerts.pem) from it. Only with PrivateCA.
	PrivateCAFile string `yaml:"privateCAFile,omitempty"`
	// SystemDefaultRegistry is the registry Rancher pulls its system images from (airgap),
	// e.g. "registry.example.com:5000".
	SystemDefaultRegistry string `yaml:"systemDefaultRegistry,omitempty"`
	// Values are further rancher chart values, merged over the ones k3strap sets (a key set
	// here wins). bootstrapPassword is refused here: use BootstrapPassword.
	Values map[string]any `yaml:"values,omitempty"`
	// Tolerations are added to the Rancher and cert-manager pods (chart values tolerations),
	// e.g. to tolerate the first server's custom taints (docs/failure-modes.md F3).
	Tolerations []Toleration `yaml:"tolerations,omitempty"`
	// CertManager pins the cert-manager chart (installed for tlsSource rancher and letsEncrypt).
	CertManager *CertManager `yaml:"certManager,omitempty"`
	// Airgap gives the chart archives as local files; they are sent in the HelmChart's
	// chartContent (base64) and Rancher gets useBundledSystemChart: true.
	Airgap *RancherAirgap `yaml:"airgap,omitempty"`
}

// LetsEncrypt configures Rancher's Let's Encrypt issuer.
type LetsEncrypt struct {
	// Email is the ACME account address. Required.
	Email string `yaml:"email"`
	// Environment is production (default) or staging.
	Environment string `yaml:"environment,omitempty"`
}

// RancherTLSFiles are local PEM files for the ingress certificate.
type RancherTLSFiles struct {
	// CertFile is the certificate chain (PEM); KeyFile its private key (PEM, kept secret).
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// CertManager pins the cert-manager chart from the jetstack repository.
type CertManager struct {
	// Version is the chart version, e.g. "v1.17.2"; default DefaultCertManagerVersion.
	Version string `yaml:"version,omitempty"`
	// Repo is the chart repository; default DefaultCertManagerRepo.
	Repo string `yaml:"repo,omitempty"`
}

// RancherAirgap names the local chart archives (.tgz) of an airgap install.
type RancherAirgap struct {
	// RancherChart is rancher-<version>.tgz. Required.
	RancherChart string `yaml:"rancherChart"`
	// CertManagerChart is cert-manager-<version>.tgz; required when cert-manager is needed.
	CertManagerChart string `yaml:"certManagerChart,omitempty"`
}

// RancherRegister registers the cluster with an existing Rancher: either an import manifest
// URL, or the Rancher URL with an API token (the cluster object is then created through
// Rancher's v3 API, carrying the agent tolerations the first server's taints need, F3).
type RancherRegister struct {
	// ImportURL is https://RANCHER/v3/import/TOKEN_CLUSTERID.yaml. It embeds the registration
	// token, so it is a Secret (never logged; errors show only its host).
	ImportURL Secret `yaml:"importURL,omitempty"`
	// URL is the Rancher server URL (https://rancher.example.com) for API mode.
	URL string `yaml:"url,omitempty"`
	// APIToken is a Rancher API bearer token (token-xxxxx:yyyy) for API mode; APITokenEnv
	// names an environment variable holding it instead.
	APIToken    Secret `yaml:"apiToken,omitempty"`
	APITokenEnv string `yaml:"apiTokenEnv,omitempty"`
	// ClusterName is the cluster's name in Rancher (API mode); default metadata.name.
	ClusterName string `yaml:"clusterName,omitempty"`
	// Insecure accepts a self-signed Rancher certificate (curl --insecure in Rancher's own
	// instructions).
	Insecure bool `yaml:"insecure,omitempty"`
	// CACertFile is a local PEM CA bundle to verify Rancher's certificate with.
	CACertFile string `yaml:"caCertFile,omitempty"`
	// RancherVersion is the version of that Rancher (e.g. v2.11.3), for preflight's
	// RancherVersion check in import-URL mode; API mode asks Rancher.
	RancherVersion string `yaml:"rancherVersion,omitempty"`
	// ClusterAgentTolerations and FleetAgentTolerations are what the cluster object in Rancher
	// carries in clusterAgentDeploymentCustomization.appendTolerations and
	// fleetAgentDeploymentCustomization.appendTolerations (import-URL mode: declare what you
	// set in Rancher; API mode: added to the tolerations k3strap sets for the first server's
	// taints). Preflight's RancherAgentTolerations compares them with the first server's
	// taints (docs/failure-modes.md F3).
	ClusterAgentTolerations []Toleration `yaml:"clusterAgentTolerations,omitempty"`
	FleetAgentTolerations   []Toleration `yaml:"fleetAgentTolerations,omitempty"`
}

// APIMode reports whether the cluster object is created through Rancher's API (URL and a
// token) rather than an import URL.
func (r *RancherRegister) APIMode() bool { return r != nil && r.ImportURL == "" && r.URL != "" }

// Toleration is a Kubernetes pod toleration as written in the inventory.
type Toleration struct {
	// Key is the taint key; empty with operator Exists tolerates every taint.
	Key string `yaml:"key,omitempty"`
	// Operator is Equal (default) or Exists.
	Operator string `yaml:"operator,omitempty"`
	Value    string `yaml:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute; empty matches every effect.
	Effect string `yaml:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated (seconds).
	TolerationSeconds *int64 `yaml:"tolerationSeconds,omitempty"`
}

// Core returns the Kubernetes form of t.
func (t Toleration) Core() corev1.Toleration {
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
		Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds}
}

// CoreTolerations converts inventory tolerations to Kubernetes ones.
func CoreTolerations(ts []Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, t.Core())
	}
	return out
}

// TolerationFor returns the inventory toleration that tolerates exactly taint t.
func TolerationFor(t Taint) Toleration {
	c := t.Toleration()
	return Toleration{Key: c.Key, Operator: string(c.Operator), Value: c.Value, Effect: string(c.Effect)}
}
