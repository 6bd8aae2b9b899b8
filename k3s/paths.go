// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

// Paths on a K3s host, as K3s and its install script lay them out (docs/k3s.md "Files",
// "Install script", "Airgap", "Config file"; install.sh and pkg/cli/cmds in k3s-io/k3s). Every
// package names a host path through these constants; the remote scripts get them as arguments.
const (
	// DirBin is install.sh's INSTALL_K3S_BIN_DIR default: the binary and its helper scripts.
	DirBin = "/usr/local/bin"
	// PathBinary is the k3s binary (an airgap install copies the release binary here).
	PathBinary = DirBin + "/k3s"
	// PathUninstall and PathAgentUninstall are the uninstall scripts install.sh leaves for a
	// server and an agent; PathKillall stops every K3s process.
	PathUninstall      = DirBin + "/k3s-uninstall.sh"
	PathAgentUninstall = DirBin + "/k3s-agent-uninstall.sh"
	PathKillall        = DirBin + "/k3s-killall.sh"

	// DirConfig holds K3s's configuration files.
	DirConfig = "/etc/rancher/k3s"
	// PathConfig is config.yaml; DirConfigDropins its drop-ins, read after it in lexical order.
	PathConfig       = DirConfig + "/config.yaml"
	DirConfigDropins = PathConfig + ".d"
	// PathRegistries is the private registry configuration (docs/registries.md).
	PathRegistries = DirConfig + "/registries.yaml"
	// PathKubeconfig is the admin kubeconfig a server writes (server https://127.0.0.1:6443).
	PathKubeconfig = DirConfig + "/k3s.yaml"

	// DirDataRoot is the filesystem K3s keeps images and its datastore on (disk checks).
	DirDataRoot = "/var/lib/rancher"
	// DirData is K3s's default data-dir.
	DirData = DirDataRoot + "/k3s"
	// PathKubeletKubeconfig is the kubelet's kubeconfig on every node (servers and agents):
	// the node's own identity, which the node authorizer lets read its own Node object.
	PathKubeletKubeconfig = DirData + "/agent/kubelet.kubeconfig"
	// DirImages is where an airgap images archive goes before the first start.
	DirImages = DirData + "/agent/images"
	// PathServerToken is a server's join token (K10<ca hash>::server:<password>).
	PathServerToken = DirData + "/server/token"
	// DirManifests is where K3s's deploy controller applies every manifest it finds.
	DirManifests = DirData + "/server/manifests"
	// DirDB is a server's datastore directory; DirEtcd exists only with embedded etcd;
	// DirSnapshots is the default etcd-snapshot-dir.
	DirDB        = DirData + "/server/db"
	DirEtcd      = DirDB + "/etcd"
	DirSnapshots = DirDB + "/snapshots"

	// PathSubnetEnv is flannel's node lease, written once the node's pod network exists
	// (docs/k3s.md "Flannel").
	PathSubnetEnv = "/run/flannel/subnet.env"
	// DirSystemd is where install.sh writes the unit and its environment file
	// (UNIT.service, UNIT.service.env); DirInitd the OpenRC scripts.
	DirSystemd = "/etc/systemd/system"
	DirInitd   = "/etc/init.d"
)

// The units install.sh writes (docs/k3s.md "Install script").
const (
	UnitServer = "k3s"
	UnitAgent  = "k3s-agent"
)

// Unit returns the K3s unit of a node of role ("server" or "agent"): k3s for servers,
// k3s-agent for agents.
func Unit(role string) string {
	if role == "agent" {
		return UnitAgent
	}
	return UnitServer
}

// Files k3strap keeps on a K3s host beside K3s's own (docs/architecture.md).
const (
	// DirK3strap holds k3strap's state on a host; reset removes it.
	DirK3strap = "/var/lib/k3strap"
	// PathInstallScript is the install script k3strap uploads; its presence marks a K3s that
	// k3strap installed.
	PathInstallScript = DirK3strap + "/k3s-install.sh"
	// PathTokenFile holds the cluster token (mode 0600). K3s reads it through the token-file
	// flag, so config.yaml (and `k3strap render`) never holds the secret.
	PathTokenFile = DirConfig + "/cluster-token"
	// DirRegistryTLS holds registry TLS files: DirRegistryTLS/<registry host>/{cert,key,ca}.pem.
	DirRegistryTLS = DirConfig + "/registries.d"
	// PathSELinuxRPM is where an airgap k3s-selinux RPM is uploaded before it is installed.
	PathSELinuxRPM = DirK3strap + "/k3s-selinux.rpm"
	// PathLock is the run lock on the first server: while it is held and fresh, no other
	// k3strap run changes the cluster.
	PathLock = DirK3strap + "/run.lock"
	// PathRestoreState records a restore in progress on the first server (resumable);
	// PathRestoreDone records on every server the restore it rejoined after.
	PathRestoreState = DirK3strap + "/restore.state"
	PathRestoreDone  = DirK3strap + "/restore.done"
)

// ShellVars returns the host paths remote scripts use as sh assignments, one a line, to go
// before a script's body (the scripts spell no path themselves): K3S_BIN (the binary),
// K3S_BIN_DIR, K3S_CONFIG, K3S_CONFIG_DIR, K3S_DATA_ROOT, K3S_DATA_DIR, K3S_SERVER_TOKEN,
// K3S_SUBNET_ENV, K3S_SYSTEMD_DIR, K3S_INITD_DIR, K3STRAP_DIR. The variables are not exported:
// K3s and its scripts never see them.
func ShellVars() string {
	vars := [][2]string{
		{"K3S_BIN", PathBinary}, {"K3S_BIN_DIR", DirBin}, {"K3S_CONFIG", PathConfig}, {"K3S_CONFIG_DIR", DirConfig},
		{"K3S_DATA_ROOT", DirDataRoot}, {"K3S_DATA_DIR", DirData}, {"K3S_SERVER_TOKEN", PathServerToken},
		{"K3S_SUBNET_ENV", PathSubnetEnv}, {"K3S_SYSTEMD_DIR", DirSystemd}, {"K3S_INITD_DIR", DirInitd},
		{"K3STRAP_DIR", DirK3strap},
	}
	var b []byte
	for _, v := range vars {
		b = append(b, v[0]+"='"+v[1]+"'\n"...)
	}
	return string(b)
}
