// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package checkid is the one vocabulary of the IDs k3strap's judgements carry: preflight check
// IDs (kubeadm's contract: stable, matched case-insensitively by --ignore-preflight-errors;
// docs/preflight.md), doctor finding IDs (docs/doctor.md) and the bring-up supervisor's
// diagnosis IDs (docs/failure-modes.md). Every ID is defined here and nowhere else; the IDs are
// public (events, JSON output, --ignore-preflight-errors) and never change.
//
// Preflight foresees a problem from the inventory and the facts before anything is installed;
// doctor and the supervisor observe it on a running cluster. Where they judge the same thing,
// Shared pairs the two IDs, and both sides use the same rule and thresholds (the rule's home is
// named in the pair, e.g. k3s.ClockSkewWarn).
package checkid

// Preflight check IDs, in the order preflight runs them (ports: Port-N, preflight.portSpecs).
const (
	SSH                     = "SSH"
	Sudo                    = "Sudo"
	OS                      = "OS"
	Arch                    = "Arch"
	InitSystem              = "InitSystem"
	KernelConfig            = "KernelConfig"
	CNIKernel               = "CNIKernel"
	Cgroups                 = "Cgroups"
	Swap                    = "Swap"
	Mem                     = "Mem"
	Disk                    = "Disk"
	UploadSpace             = "UploadSpace"
	Hostname                = "Hostname"
	MachineID               = "MachineID"
	ClockSkew               = "ClockSkew"
	DefaultRoute            = "DefaultRoute"
	IPFamilies              = "IPFamilies"
	SELinux                 = "SELinux"
	ExistingInstall         = "ExistingInstall"
	ServerCount             = "ServerCount"
	CriticalConfig          = "CriticalConfig"
	CloudController         = "CloudController"
	FirstNodeTaints         = "FirstNodeTaints"
	RancherAgentTolerations = "RancherAgentTolerations"
	RancherVersion          = "RancherVersion"
	AirgapRelease           = "AirgapRelease"
	// Inventory: preflight was given no inventory (preflight.Run; not ignorable).
	Inventory = "Inventory"
)

// Host-network check IDs (package netcheck; docs/failure-modes.md "Host networks"): preflight
// and doctor run the same judgement on their evidence and report it under the same ID.
const (
	// NodePaths: a node cannot reach another on a port K3s needs (probed before install,
	// judged from the rulesets and flannel's state on a running cluster).
	NodePaths = "NodePaths"
	// PathMTU: a path between nodes carries smaller packets than the overlay sends.
	PathMTU = "PathMTU"
	// NodeAddress: K3s registers the node, or flannel announces it, with another address than
	// the one the other nodes use for it (multi-homed hosts; node-ip, flannel-iface).
	NodeAddress = "NodeAddress"
	// HostFirewall: a host's packet filter drops pod traffic (firewalld, ufw, nftables,
	// iptables).
	HostFirewall = "HostFirewall"
	// IptablesBackends: iptables rules in both backends (legacy and nf_tables).
	IptablesBackends = "IptablesBackends"
	// NMCloudSetup: nm-cloud-setup is enabled.
	NMCloudSetup = "NMCloudSetup"
	// NetworkManager: NetworkManager may manage the CNI's interfaces.
	NetworkManager = "NetworkManager"
	// ResolvConf: the resolver file K3s gives the kubelet is unusable.
	ResolvConf = "ResolvConf"
)

// Diagnosis IDs of the bring-up supervisor (diagnose.UninitializedStall, ServiceFailing,
// Timeout); doctor reports the same diagnoses with the same IDs.
const (
	F1CloudController              = "F1-cloud-controller"
	ExternalCloudControllerMissing = "external-cloud-controller-missing"
	ManifestDeployerStall          = "manifest-deployer-stall"
	UninitializedStallUnknown      = "uninitialized-stall-unknown"
	ServiceFailing                 = "service-failing"
	CriticalConfigMismatch         = "critical-config-mismatch"
	BringUpTimeout                 = "bring-up-timeout"
	NoPodCIDR                      = "no-podcidr"
)

// Doctor finding IDs (diagnose.Findings).
const (
	Unreachable     = "unreachable"
	CrashLoop       = "crash-loop"
	ServiceRestarts = "service-restarts"
	// SlowStart: a K3s unit activating for long without a restart (K3s has not sent READY).
	SlowStart = "slow-start"
	// ImagePull: pods on a node cannot pull their images (the airgap images archive missing).
	ImagePull = "image-pull"
	// UninitializedTaint: the uninitialized taint on a node younger than the grace (info).
	UninitializedTaint = "uninitialized-taint"
	NoPodNetwork       = "no-pod-network"
	CNINotRunning      = "cni-not-running"
	F2CNIKernel        = "F2-cni-kernel"
	F3PendingOnTaint   = "F3-pending-on-taint"
	F3RancherAgent     = "F3-rancher-agent"
	F4CNIToleration    = "F4-cni-toleration"
	F5LostTaint        = "F5-lost-taint"
	F5LostLabel        = "F5-lost-label"
	F5Drift            = "F5-drift"
	NotRegistered      = "not-registered"
	NodeNotReady       = "node-not-ready"
	CertExpired        = "cert-expired"
	CertExpiring       = "cert-expiring"
	VersionSkew        = "version-skew"
	EtcdQuorum         = "etcd-quorum"
	EtcdMemberMissing  = "etcd-member-missing"
	DoctorClockSkew    = "clock-skew"
	DiskPressure       = "disk-pressure"
	APIUnreachable     = "api-unreachable"
)

// Proxy IDs (docs/proxy.md). Preflight runs Proxy and NoProxy after DefaultRoute; doctor's
// InClusterProxied is NoProxy's judgement on a running cluster.
const (
	// Proxy: the host's HTTP(S) proxy (spec.proxy) does not answer, refuses the credentials or
	// cannot fetch the online install.
	Proxy = "Proxy"
	// NoProxy: the K3s service's proxy environment, whoever set it, would send in-cluster
	// traffic to the proxy (k3s.InClusterProxied).
	NoProxy = "NoProxy"
	// InClusterProxied: a running K3s unit's environment sends in-cluster traffic to its
	// proxy (NO_PROXY misses entries).
	InClusterProxied = "in-cluster-proxied"
)

// Diagnosis IDs of a stalled `upgrade --via suc` (the SUC watch).
const (
	SUCUntoleratedTaint = "suc-job-untolerated-taint"
	SUCUnschedulable    = "suc-job-unschedulable"
	SUCImagePull        = "suc-image-pull"
	SUCDrainBlocked     = "suc-drain-blocked-pdb"
	SUCDrainSlow        = "suc-drain-stalled"
	SUCNodeNotBack      = "suc-node-not-back"
	SUCJobFailed        = "suc-job-failed"
	SUCNoJob            = "suc-no-job"
)

// Pair is one thing preflight and doctor both judge: Preflight foresees it, Doctor (or the
// supervisor) observes it; Rule names where the rule and its thresholds are defined once.
type Pair struct {
	Preflight, Doctor, Rule string
}

// Shared lists the judgements preflight and doctor share.
func Shared() []Pair {
	return []Pair{
		{ClockSkew, DoctorClockSkew, "k3s.ClockSkewWarn, k3s.ClockSkewError"},
		{CloudController, F1CloudController, "k3s.CloudSettings.UninitializedTaintStays (docs/failure-modes.md F1)"},
		{CNIKernel, F2CNIKernel, "facts kernel features per CNI (docs/failure-modes.md F2)"},
		{FirstNodeTaints, F3PendingOnTaint, "tolerations against taints, inventory.Taint.ToleratedBy (docs/failure-modes.md F3)"},
		{RancherAgentTolerations, F3RancherAgent, "preflight.RancherHasAgentTaintFix (docs/rancher.md)"},
		{CriticalConfig, CriticalConfigMismatch, "k3s.CriticalMismatches (docs/k3s.md)"},
		{Disk, DiskPressure, "free space under k3s.DirDataRoot"},
		{NodePaths, NodePaths, "netcheck.Paths (probes) and netcheck.FirewallPaths (firewall.Ruleset.Evaluate)"},
		{NodeAddress, NodeAddress, "k3s.DefaultNodeIP, k3s.FlannelAddress (netcheck.NodeAddresses)"},
		{HostFirewall, HostFirewall, "netcheck.HostFirewalls"},
		{IptablesBackends, IptablesBackends, "netcheck.IptablesBackendsUsed"},
		{NMCloudSetup, NMCloudSetup, "netcheck.NetworkManagers"},
		{NetworkManager, NetworkManager, "netcheck.NetworkManagers"},
		{ResolvConf, ResolvConf, "k3s.UsableResolvConf over k3s.ResolvConfCandidates (netcheck.ResolvConfs)"},
		{NoProxy, InClusterProxied, "k3s.InClusterProxied over k3s.NoProxy's required entries (docs/proxy.md)"},
	}
}
