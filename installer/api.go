// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"time"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/preflight"
)

// Apply converges every host to the inventory, running the steps of Steps("apply") in order:
// connect, facts, plan, preflight, lock, the first server (converged and supervised), further
// servers one at a time, agents in parallel, the kubeconfig, node taints and labels, the CNI
// and Rancher. A host whose files, unit and service already match is left alone (no upload,
// no rewrite, no restart) and reported "unchanged". With Options.DryRun every step that would
// change something reports what instead. It returns a *Failure (or the context's error).
func (in *Installer) Apply(ctx context.Context) error {
	return in.runCommand(ctx, "apply", nil)
}

// JoinLocal joins the local host (connection: local, the only host of the run: Options.Hosts)
// to a cluster whose first server it cannot reach over SSH — a box converging itself at boot
// (docs/edge-first-boot.md): connect, facts, plan, paths, preflight as apply, then wait-api
// (bounded by Options.JoinTimeout) and join-self (token from the inventory, node awaited as
// the node itself). The first server's own box runs Apply instead.
func (in *Installer) JoinLocal(ctx context.Context) error {
	return in.runCommand(ctx, "join-local", nil)
}

// Upgrade is Apply for a new spec.k3s.version: servers one at a time, then agents in batches
// (UpgradeBatchPercent of the agents, at least 1), each drained (unless NoDrain) and
// uncordoned once Ready on the new version. Downgrades are refused by preflight's
// ExistingInstall check unless Force.
func (in *Installer) Upgrade(ctx context.Context) error {
	return in.runCommand(ctx, "upgrade", nil)
}

// Preflight connects, gathers facts, plans and runs every check; it changes nothing. It
// returns the report (nil when the checks did not run) and a *Failure with KindPreflight
// when errors remain.
func (in *Installer) Preflight(ctx context.Context) (*preflight.Report, error) {
	var s *session
	err := in.runCommand(ctx, "preflight", func(ss *session) { s = ss })
	return s.pre.report, err
}

// Check compares every node's taints and labels with the inventory through the first server
// and reports drift per node, changing nothing (`k3strap check`). It returns a *Failure with
// KindDrift when any node differs.
func (in *Installer) Check(ctx context.Context) error {
	return in.runCommand(ctx, "check", nil)
}

// Reset uninstalls K3s from the selected hosts (every host when Options.Hosts is empty):
// agents first, in parallel; then servers one at a time, the first server last. The caller
// asks for confirmation.
func (in *Installer) Reset(ctx context.Context) error {
	return in.runCommand(ctx, "reset", nil)
}

// Kubeconfig fetches the cluster's kubeconfig from the first server and writes or merges it as
// req says. It returns the path written.
func (in *Installer) Kubeconfig(ctx context.Context, req KubeconfigRequest) (string, error) {
	var s *session
	err := in.runCommand(ctx, "kubeconfig", func(ss *session) { s = ss; s.out.kubeconfigReq = req })
	return s.out.kubeconfig, err
}

// UpgradeSUC hands the upgrade to system-upgrade-controller (`k3strap upgrade --via suc`):
// it deploys SUC v0.20.1 and the K3s Plans through the first server's kubectl, then watches
// every node through job, cordon, drain, upgrade, Ready and uncordon, diagnosing stalls. A
// cancelled watch leaves the upgrade running in the cluster.
func (in *Installer) UpgradeSUC(ctx context.Context) error {
	return in.runCommand(ctx, "upgrade --via suc", nil)
}

// WatchUpgrade resumes watching an upgrade SUC runs (`k3strap upgrade --watch`).
func (in *Installer) WatchUpgrade(ctx context.Context) error {
	return in.runCommand(ctx, "upgrade --watch", nil)
}

// BackupRequest is what `k3strap backup` was asked for.
type BackupRequest struct {
	// Name is the snapshot's name prefix (K3s: --name; default "on-demand").
	Name string
	// To is a local directory the snapshot and the token are copied to ("" = none).
	To string
}

// Snapshot is one etcd snapshot on the first server.
type Snapshot struct {
	Name, Location, Size, Created string
}

// Backup saves an etcd snapshot on the first server (k3s etcd-snapshot save) and, with
// req.To, copies it and the server token to the workstation (0600, checksummed). It returns
// the snapshot's path on the first server.
func (in *Installer) Backup(ctx context.Context, req BackupRequest) (string, error) {
	var s *session
	err := in.runCommand(ctx, "backup", func(ss *session) { s = ss; s.d2().backup = req })
	return s.d2().saved, err
}

// BackupList lists the etcd snapshots on the first server (k3s etcd-snapshot ls).
func (in *Installer) BackupList(ctx context.Context) ([]Snapshot, error) {
	var s *session
	err := in.runCommand(ctx, "backup-list", func(ss *session) { s = ss })
	return s.d2().snapshots, err
}

// Restore restores the cluster from snapshot (a name in the first server's snapshot
// directory or a path on it): K3s stopped on every server, --cluster-reset with the snapshot
// on the first, its bring-up supervised, the other servers' etcd data moved aside and each
// rejoined in turn, agents restarted. Every step is resumable. The caller asks first.
func (in *Installer) Restore(ctx context.Context, snapshot string) error {
	return in.runCommand(ctx, "restore", func(s *session) { s.d2().snapshot = snapshot })
}

// RemoveNodes drains, deletes (and for a server removes from etcd) and uninstalls the named
// nodes, refusing when the etcd members left would have no live majority.
func (in *Installer) RemoveNodes(ctx context.Context, names []string) error {
	return in.runCommand(ctx, "remove-node", func(s *session) { s.d2().remove = names })
}

// RotateCertificates runs `k3s certificate rotate` on every node: servers one at a time, then
// agents, each restarted and checked like a bring-up.
func (in *Installer) RotateCertificates(ctx context.Context) error {
	return in.runCommand(ctx, "rotate-certificates", nil)
}

// RotateToken replaces the server token (`k3s token rotate`) with the inventory's token
// (K3STRAP_K3S_TOKEN) or a generated one, updates the token file on every node and restarts
// them: servers one at a time, then agents.
func (in *Installer) RotateToken(ctx context.Context) error {
	return in.runCommand(ctx, "rotate-token", nil)
}

// DoctorRequest is what `k3strap doctor` was asked for.
type DoctorRequest struct {
	// Discover is set without an inventory (--ssh): the hosts given are entry points, the other
	// nodes are found from the cluster (InternalIP) and reached with the same SSH settings.
	Discover bool
	// Fix applies the repairable findings' repairs after Confirm (nil Confirm: no repair, the
	// commands are printed).
	Fix     bool
	Confirm func(repairs []string) bool
	// Bundle is the support bundle to write (a .tar.gz), "" for none.
	Bundle string
	// TaintGrace is how long the uninitialized taint may stay before F1 is reported (default
	// 60 s).
	TaintGrace time.Duration
	// Now replaces the clock of the findings (tests).
	Now func() time.Time
}

// DoctorReport is what doctor found and did.
type DoctorReport struct {
	Findings []finding.Finding
	// Repaired lists the repairs applied ("node: what").
	Repaired []string
	// Bundle is the support bundle written ("" when none).
	Bundle string
}

// Doctor runs `k3strap doctor`. It returns the report and a *Failure of KindFindingsError or
// KindFindingsWarning when it found problems (nil when healthy).
func (in *Installer) Doctor(ctx context.Context, req DoctorRequest) (*DoctorReport, error) {
	ds := &doctorState{req: req, nodes: map[string]*diagnose.NodeEvidence{}, nodeOf: map[string]string{}}
	err := in.runCommand(ctx, "doctor", func(s *session) { s.doctor = ds })
	return &ds.report, err
}
