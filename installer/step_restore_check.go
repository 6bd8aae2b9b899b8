package installer

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/k3strap/k3strap/events"
)

// restoreCheckStep finds the snapshot on the first server and starts (or resumes) the restore.
type restoreCheckStep struct{}

func (restoreCheckStep) Phase() events.Phase { return events.PhaseRestoreCheck }

func (restoreCheckStep) Summary() string {
	return "find the snapshot on the first server; start the restore or resume the one in progress"
}

func (restoreCheckStep) Run(ctx context.Context, s *session) error {
	d := s.d2()
	p := d.snapshot
	if !strings.Contains(p, "/") {
		p = path.Join(s.snapshotDir(), p)
	}
	out, err := s.sh(ctx, s.first, "snapshot check", `[ -f "$1" ] && echo found || echo missing`, "", p)
	if err != nil {
		return s.hostFailure(s.first, "snapshot", KindInstall, err)
	}
	if strings.TrimSpace(out) != "found" {
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
	kv, err := s.readKV(ctx, s.first, PathRestoreState)
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
	if err := s.writeKV(ctx, s.first, PathRestoreState, map[string]string{"id": id, "snapshot": p}); err != nil {
		return s.hostFailure(s.first, "restore state", KindInstall, err)
	}
	em.Step(s.first.host.Name, "snapshot", events.StatusOK, "restoring "+p)
	return nil
}

// Preview names the snapshot and what the restore would do.
func (st restoreCheckStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRestoreCheck)
	em.Info(s.first.host.Name, fmt.Sprintf("would restore %s: stop K3s on every server, --cluster-reset on %s, move the other servers' %s aside and rejoin them one at a time, restart the agents", s.d2().snapshot, s.first.host.Name, PathDB))
	return ctx.Err()
}

// rejoined reports whether hs already rejoined after this restore.
func (s *session) rejoined(ctx context.Context, hs *hostState) bool {
	kv, err := s.readKV(ctx, hs, PathRestoreDone)
	return err == nil && kv["id"] == s.d2().restoreID
}
