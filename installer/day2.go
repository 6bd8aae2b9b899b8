package installer

// Day two (issue 12): etcd snapshots and restore, removing and replacing nodes, rotating
// certificates and the token. Each is a command of the step engine (commandFor → day2Command),
// with the same output modes, dry-run and exit codes as apply. docs/day2.md describes them.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// Day-two paths on the hosts.
const (
	// PathEtcdDir exists on a server that runs embedded etcd (K3s: <data-dir>/server/db/etcd).
	PathEtcdDir = "/var/lib/rancher/k3s/server/db/etcd"
	// PathDB is a server's datastore directory; restore moves it aside on the other servers.
	PathDB = "/var/lib/rancher/k3s/server/db"
	// PathSnapshotDir is K3s's default snapshot directory.
	PathSnapshotDir = "/var/lib/rancher/k3s/server/db/snapshots"
	// PathRestoreState records a restore in progress on the first server (resumable).
	PathRestoreState = "/var/lib/k3strap/restore.state"
	// PathRestoreDone records on every server the restore it rejoined after.
	PathRestoreDone = "/var/lib/k3strap/restore.done"
	k3sBinary       = "/usr/local/bin/k3s"
)

// BackupRequest is what `k3strap backup` was asked for.
type BackupRequest struct {
	// Name is the snapshot's name prefix (K3s: --name; default "on-demand").
	Name string
	// To is a local directory the snapshot and the token are copied to ("" = none).
	To string
}

// snapshotName is the name K3s gives the snapshot before -<node>-<unix time>: Name, else
// K3s's default "on-demand" (docs.k3s.io "etcd-snapshot").
func (b BackupRequest) snapshotName() string {
	if b.Name == "" {
		return "on-demand"
	}
	return b.Name
}

// Snapshot is one etcd snapshot on the first server.
type Snapshot struct {
	Name, Location, Size, Created string
}

// day2State is what the day-two steps of one run share.
type day2State struct {
	backup   BackupRequest
	snapshot string // restore: NAME or PATH as given
	remove   []string
	newToken inventory.Secret

	// saved is the path of the snapshot the backup step saved on the first server.
	saved string
	// local are the files the backup copied to the workstation.
	local     []string
	snapshots []Snapshot
	// restore: its id and the snapshot's path on the first server, whether the first server
	// was already reset (resumed run).
	restoreID, restorePath string
	resetDone              bool
}

func (s *session) d2() *day2State {
	if s.day2 == nil {
		s.day2 = &day2State{}
	}
	return s.day2
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

// day2Commands are the commands of this file, in the order `k3strap steps` lists them.
func day2Commands() []string {
	return []string{"backup", "backup-list", "restore", "remove-node", "rotate-certificates", "rotate-token"}
}

func day2Command(name string) (command, bool) {
	first := connectStep{firstOnly: true}
	all := []step{connectStep{}, factsStep{}, planStep{}}
	switch name {
	case "backup":
		return command{name: name, steps: []step{first, lockStep{}, etcdCheckStep{}, snapshotSaveStep{}, snapshotFetchStep{}}, withFirst: true}, true
	case "backup-list":
		return command{name: name, steps: []step{first, etcdCheckStep{}, snapshotListStep{}}, withFirst: true}, true
	case "restore":
		return command{name: name, steps: append(all, lockStep{}, etcdCheckStep{}, restoreCheckStep{}, restoreStopStep{},
			restoreResetStep{}, superviseStep{}, bringUpStep{}, restoreRejoinStep{}, restoreAgentsStep{}), withFirst: true}, true
	case "remove-node":
		return command{name: name, steps: append(all, lockStep{}, removeNodeStep{}), withFirst: true}, true
	case "rotate-certificates":
		return command{name: name, steps: append(all, lockStep{}, rotateCertsStep{}), withFirst: true}, true
	case "rotate-token":
		return command{name: name, steps: append(all, lockStep{}, rotateTokenStep{}), withFirst: true}, true
	}
	return command{}, false
}

// sh runs a k3strap script as root on hs and returns its stdout; a non-zero exit is an error
// carrying the script's last stderr lines.
func (s *session) sh(ctx context.Context, hs *hostState, label, script string, stdin string, args ...string) (string, error) {
	if hs.c() == nil {
		return "", fmt.Errorf("unreachable: %s", errText(hs.connErr))
	}
	cmd := remote.Script(label, script, args...).AsRoot()
	if stdin != "" {
		cmd = cmd.WithStdin(strings.NewReader(stdin))
	}
	res, err := hs.c().Check(ctx, cmd)
	if err != nil {
		return "", err
	}
	return string(res.Stdout), nil
}

// serviceActive reports whether hs's K3s unit runs now (asked, not from facts).
func (s *session) serviceActive(ctx context.Context, hs *hostState) bool {
	if hs.c() == nil {
		return false
	}
	res, err := hs.c().Run(ctx, remote.Command("systemctl", "is-active", ServiceName(hs.host.Role)).AsRoot())
	return err == nil && strings.TrimSpace(string(res.Stdout)) == "active"
}

// systemctl stops hs's K3s unit (verb "stop": returns once it stopped) or starts it (verb
// "start") and returns when it did so. A start does not wait for systemd's READY, as apply's
// starts (startCommand) do not: a K3s agent sends READY only after a fresh node heartbeat,
// which can come minutes after its node is Ready; callers wait for the node instead.
func (s *session) systemctl(ctx context.Context, hs *hostState, verb string) (time.Time, error) {
	at := time.Now()
	if verb == "start" && hs.plan != nil {
		if hs.c() == nil {
			return at, fmt.Errorf("unreachable: %s", errText(hs.connErr))
		}
		_, err := hs.c().Check(ctx, startCommand(hs, "start", false))
		return at, err
	}
	_, err := s.sh(ctx, hs, "systemctl "+verb, `systemctl "$1" "$2"`, "", verb, ServiceName(hs.host.Role))
	return at, err
}

// restartAndWait stops hs's K3s, runs mid when given (e.g. certificate rotate, which needs K3s
// stopped), starts it and waits for its node as bring-up does: Ready from a heartbeat of this
// start, labels, taints and (servers of an HA cluster) etcd membership. The stop is waited for
// before the start, so that no heartbeat of the old process passes for one of the new.
func (s *session) restartAndWait(ctx context.Context, hs *hostState, what string, mid func() error) error {
	em := s.in.emitter(s.current)
	em.Step(hs.host.Name, what, events.StatusRunning, "")
	var at time.Time
	_, err := s.systemctl(ctx, hs, "stop")
	if err == nil && mid != nil {
		err = mid()
	}
	if err == nil {
		at, err = s.systemctl(ctx, hs, "start")
	}
	if err != nil {
		return s.hostFailure(hs, what, KindInstall, err)
	}
	if err := s.waitNode(ctx, hs, s.nodeView(), "", convergeResult{started: at, restarted: true}); err != nil {
		return s.hostFailure(hs, what, KindInstall, err)
	}
	hs.setResult(events.StatusChanged, what+": done, node Ready")
	em.Step(hs.host.Name, what, events.StatusChanged, "restarted, node Ready")
	return nil
}

// hasEtcd reports whether the first server runs embedded etcd.
func (s *session) hasEtcd(ctx context.Context) (bool, error) {
	out, err := s.sh(ctx, s.first, "etcd check", `if [ -d "$1" ]; then echo yes; else echo no; fi`, "", PathEtcdDir)
	return strings.TrimSpace(out) == "yes", err
}

// errNoEtcd is the refusal of etcd snapshots and restore on a cluster without embedded etcd.
func (s *session) errNoEtcd() error {
	return &Failure{Kind: KindInvalid, Phase: events.PhaseEtcdCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("the cluster has no embedded etcd (%s is missing on %s): its datastore is SQLite — a single server without cluster-init — or an external datastore, and `k3s etcd-snapshot` and --cluster-reset only work with embedded etcd", PathEtcdDir, s.first.host.Name),
		Fix:     "back up a SQLite cluster by copying /var/lib/rancher/k3s/server/db/ and the token with K3s stopped (docs/day2.md); an external datastore is backed up with its own tools; a cluster with more than one server in the inventory runs embedded etcd",
	}}
}

// newSecretHex returns n random bytes as hex.
func newSecretHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// etcdMembers returns the cluster's etcd members (nodes labelled node-role.kubernetes.io/etcd,
// which K3s's etcd member controller keeps in line with the members: deleting a server's
// Node removes its member).
func (s *session) etcdMembers(ctx context.Context) ([]string, error) {
	nodes, err := kube.Kubectl{R: s.first.c()}.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if n.Labels["node-role.kubernetes.io/etcd"] == "true" {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

// remoteReset uninstalls K3s on a host (reset.go's script).
func remoteReset() remote.Cmd { return remote.Script("reset", resetScript).AsRoot() }
