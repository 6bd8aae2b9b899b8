// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package events

// Phase names a stage of a k3strap command in events: a step of a command's step list (see
// installer.Steps), a per-host stage inside a step (upload, configure, install), or a command
// itself (the summary and command-wide errors carry the command's name). Front-ends compare
// phases with these constants, never with text.
type Phase string

// Steps of the commands, in the order apply runs them.
const (
	PhaseConnect Phase = "connect"
	PhaseFacts   Phase = "facts"
	PhasePlan    Phase = "plan"
	// PhasePaths is the path check between the hosts (docs/preflight.md "The path check").
	PhasePaths       Phase = "paths"
	PhasePreflight   Phase = "preflight"
	PhaseLock        Phase = "lock"
	PhaseFirstServer Phase = "first-server"
	PhaseSupervise   Phase = "supervise"
	PhaseJoinServers Phase = "join-servers"
	PhaseJoinAgents  Phase = "join-agents"
	PhaseBringUp     Phase = "bring-up"
	// PhaseStage uploads joining hosts' files while the first server comes up.
	PhaseStage          Phase = "stage"
	PhaseKubeconfig     Phase = "kubeconfig"
	PhaseReconcileNodes Phase = "reconcile-nodes"
	PhaseCNI            Phase = "cni"
	PhaseRancher        Phase = "rancher"
	// PhaseDrift is `k3strap check`'s comparison of nodes with the inventory.
	PhaseDrift Phase = "drift"
	// PhaseReset is `k3strap reset`'s uninstall of every selected host.
	PhaseReset Phase = "reset"
	// Day two: etcd snapshots and restore, removing nodes, rotation.
	PhaseEtcdCheck          Phase = "etcd-check"
	PhaseSnapshot           Phase = "snapshot"
	PhaseSnapshotCopy       Phase = "snapshot-copy"
	PhaseSnapshotList       Phase = "snapshot-list"
	PhaseRestoreCheck       Phase = "restore-check"
	PhaseRestoreStop        Phase = "restore-stop"
	PhaseClusterReset       Phase = "cluster-reset"
	PhaseRejoinServers      Phase = "rejoin-servers"
	PhaseRestartAgents      Phase = "restart-agents"
	PhaseRemoveNode         Phase = "remove-node"
	PhaseReplaceNodes       Phase = "replace-nodes"
	PhaseRotateCertificates Phase = "rotate-certificates"
	PhaseRotateToken        Phase = "rotate-token"
)

// Stages inside a step, per host.
const (
	// PhaseUpload carries upload progress.
	PhaseUpload Phase = "upload"
	// PhaseConfigure is a host's converge result (files, unit, service).
	PhaseConfigure Phase = "configure"
	// PhaseInstall is the install script and the service (re)start.
	PhaseInstall Phase = "install"
	// PhaseUpgrade is draining and uncordoning around a version change.
	PhaseUpgrade Phase = "upgrade"
	// PhaseDryRun carries what --dry-run would change (with diffs).
	PhaseDryRun Phase = "dry-run"
	// PhaseRetry reports a transient failure being retried after reconnecting.
	PhaseRetry Phase = "retry"
	// PhaseSSH carries every remote command and file write (secrets masked) for --verbose.
	PhaseSSH Phase = "ssh"
)

// CommandPhase is the phase of command-wide events (the summary, a failure outside any step):
// the command's own name, e.g. "apply".
func CommandPhase(command string) Phase { return Phase(command) }
