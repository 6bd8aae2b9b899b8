package installer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// restoreCheckStep finds the snapshot on the first server and starts (or resumes) the restore.
//
// Reads: s.day2.snapshot; the first server's restore state. Writes: s.day2.restorePath, restoreID,
// resetDone.
type restoreCheckStep struct{}

func (restoreCheckStep) Phase() events.Phase { return events.PhaseRestoreCheck }

func (restoreCheckStep) Summary() string {
	return "find the snapshot on the first server; start the restore or resume the one in progress"
}

func (restoreCheckStep) Run(ctx context.Context, s *session) error {
	d := s.d2()
	p := d.snapshot
	// A copy on this machine (backup --to) is uploaded into the snapshot directory.
	var local []byte
	if fi, err := os.Stat(d.snapshot); err == nil && fi.Mode().IsRegular() {
		if local, err = readLocalSnapshot(d.snapshot); err != nil {
			return &Failure{Kind: KindInvalid, Phase: events.PhaseRestoreCheck, Info: events.ErrorInfo{Message: err.Error(),
				Fix: "use an intact copy (its NAME.sha256 beside it is checked), or a snapshot on the first server"}}
		}
		p = path.Join(s.snapshotDir(), filepath.Base(p))
	} else if !strings.Contains(p, "/") {
		p = path.Join(s.snapshotDir(), p)
	}
	out, err := s.first.sh(ctx, "snapshot check", sha256Script, "", p, "or-missing")
	if err != nil {
		return s.hostFailure(s.first, "snapshot", KindInstall, err)
	}
	if local != nil {
		sum := sha256.Sum256(local)
		want := hex.EncodeToString(sum[:])
		switch strings.TrimSpace(out) {
		case want:
		case "missing":
			if err := s.first.c().WriteFile(ctx, p, 0o600, bytes.NewReader(local), int64(len(local)), nil); err != nil {
				return s.hostFailure(s.first, "upload snapshot", KindInstall, err)
			}
			if got, err := s.first.sh(ctx, "sha256sum", sha256Script, "", p); err != nil || strings.TrimSpace(got) != want {
				return s.hostFailure(s.first, "upload snapshot", KindInstall, fmt.Errorf("%s: the uploaded copy's checksum differs (%v); re-run", p, err))
			}
			s.in.emitter(events.PhaseRestoreCheck).Step(s.first.host.Name, "upload", events.StatusChanged, fmt.Sprintf("copied %s to %s (sha256 checked)", d.snapshot, p))
			out = want
		default:
			return &Failure{Kind: KindInvalid, Phase: events.PhaseRestoreCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
				Message: fmt.Sprintf("%s on %s differs from %s", p, s.first.host.Name, d.snapshot),
				Fix:     "give the snapshot on the first server by name, or rename the local copy"}}
		}
	}
	if strings.TrimSpace(out) == "missing" {
		return &Failure{Kind: KindInvalid, Phase: events.PhaseRestoreCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
			Message: fmt.Sprintf("snapshot %s not found on %s", p, s.first.host.Name),
			Fix:     "`k3strap backup list` shows the snapshots there; a copy made with --to is put back with scp into " + s.snapshotDir(),
		}}
	}
	for _, hs := range s.hosts {
		if hs.c() == nil {
			return s.hostFailure(hs, "connect", KindInstall, fmt.Errorf("every node must be reachable for a restore: %s", errText(hs.connErr)))
		}
	}
	d.restorePath = p
	kv, err := s.readKV(ctx, s.first, k3s.PathRestoreState)
	if err != nil {
		return s.hostFailure(s.first, "restore state", KindInstall, err)
	}
	em := s.in.emitter(events.PhaseRestoreCheck)
	if kv["id"] != "" && kv["snapshot"] == p && kv["done"] == "" {
		d.restoreID, d.resetDone = kv["id"], kv["reset"] == "1"
		em.Info(s.first.host.Name, fmt.Sprintf("resuming the restore of %s (started before, cluster reset done: %v)", p, d.resetDone))
		return nil
	}
	id, err := newSecretHex(6)
	if err != nil {
		return err
	}
	d.restoreID = id
	if err := s.writeKV(ctx, s.first, k3s.PathRestoreState, map[string]string{"id": id, "snapshot": p}); err != nil {
		return s.hostFailure(s.first, "restore state", KindInstall, err)
	}
	em.Step(s.first.host.Name, "snapshot", events.StatusOK, "restoring "+p)
	return nil
}

// Preview names the snapshot and what the restore would do.
func (st restoreCheckStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRestoreCheck)
	em.Info(s.first.host.Name, fmt.Sprintf("would restore %s: stop K3s on every server, --cluster-reset on %s, move the other servers' %s aside and rejoin them one at a time, restart the agents", s.d2().snapshot, s.first.host.Name, k3s.DirDB))
	return ctx.Err()
}

// rejoined reports whether hs already rejoined after this restore.
func (s *session) rejoined(ctx context.Context, hs *hostState) bool {
	kv, err := s.readKV(ctx, hs, k3s.PathRestoreDone)
	return err == nil && kv["id"] == s.d2().restoreID
}

// readLocalSnapshot reads a snapshot copied with backup --to, checking it against NAME.sha256
// beside it when that file exists.
func readLocalSnapshot(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	sums, err := os.ReadFile(p + ".sha256")
	if err != nil {
		return data, nil
	}
	sum := sha256.Sum256(data)
	if !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+filepath.Base(p)) {
		return nil, fmt.Errorf("%s does not match its checksum in %s.sha256", p, p)
	}
	return data, nil
}
