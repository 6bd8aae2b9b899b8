package installer

// Day two: etcd snapshots and restore, removing and replacing nodes, rotating
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
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

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
	res, err := hs.c().Run(ctx, remote.Command("systemctl", "is-active", k3s.Unit(string(hs.host.Role))).AsRoot())
	return err == nil && strings.TrimSpace(string(res.Stdout)) == "active"
}

// systemctl runs `systemctl VERB unit` for hs's K3s unit and returns when it did.
func (s *session) systemctl(ctx context.Context, hs *hostState, verb string) (time.Time, error) {
	at := time.Now()
	_, err := s.sh(ctx, hs, "systemctl "+verb, systemctlScript, "", verb, k3s.Unit(string(hs.host.Role)))
	return at, err
}

// restartAndWait restarts hs's K3s (or runs between stop and start: mid, e.g. certificate
// rotate) and waits for its node as bring-up does: Ready from a heartbeat of this start,
// labels, taints and (servers of an HA cluster) etcd membership.
func (s *session) restartAndWait(ctx context.Context, hs *hostState, what string, mid func() error) error {
	em := s.in.emitter(s.current)
	em.Step(hs.host.Name, what, events.StatusRunning, "")
	var at time.Time
	var err error
	if mid != nil {
		if _, err = s.systemctl(ctx, hs, "stop"); err == nil {
			if err = mid(); err == nil {
				at, err = s.systemctl(ctx, hs, "start")
			}
		}
	} else {
		at, err = s.systemctl(ctx, hs, "restart")
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
	out, err := s.sh(ctx, s.first, "etcd check", etcdCheckScript, "", k3s.DirEtcd)
	return strings.TrimSpace(out) == "yes", err
}

// errNoEtcd is the refusal of etcd snapshots and restore on a cluster without embedded etcd.
func (s *session) errNoEtcd() error {
	return &Failure{Kind: KindInvalid, Phase: events.PhaseEtcdCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("the cluster has no embedded etcd (%s is missing on %s): its datastore is SQLite — a single server without cluster-init — or an external datastore, and `k3s etcd-snapshot` and --cluster-reset only work with embedded etcd", k3s.DirEtcd, s.first.host.Name),
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

// remoteReset uninstalls K3s on a host (scripts/reset.sh).
func remoteReset() remote.Cmd { return remote.Script("reset", resetScript).AsRoot() }
