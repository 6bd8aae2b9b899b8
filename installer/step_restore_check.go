// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

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
	"sort"
	"strconv"
	"strings"
	"time"

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
	// A copy on this machine (backup --to) is uploaded into the snapshot directory.
	var local []byte
	if isLocalCopy(d.snapshot) {
		var err error
		if local, err = readLocalSnapshot(d.snapshot); err != nil {
			return &Failure{Kind: KindInvalid, Phase: events.PhaseRestoreCheck, Info: events.ErrorInfo{Message: err.Error(),
				Fix: "use an intact copy (its NAME.sha256 beside it is checked), or a snapshot on the first server"}}
		}
	}
	p, err := s.snapshotOnFirst(ctx, d.snapshot)
	if err != nil {
		return err
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
			Fix:     "`k3strap backup list` shows the snapshots there; give a copy made with --to as its path on this machine (it is uploaded)",
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

// Preview names the snapshot (a name given to backup resolved as the run would) and what
// the restore would do.
func (st restoreCheckStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseRestoreCheck)
	snap := s.d2().snapshot
	if s.first.c() != nil {
		p, err := s.snapshotOnFirst(ctx, snap)
		if err != nil {
			return err
		}
		snap = p
	}
	em.Info(s.first.host.Name, fmt.Sprintf("would restore %s: stop K3s on every server, --cluster-reset on %s, move the other servers' %s aside and rejoin them one at a time, restart the agents", snap, s.first.host.Name, k3s.DirDB))
	return ctx.Err()
}

// snapshotOnFirst is the path on the first server of the snapshot given to restore: a path
// as it is, a copy on this machine where it is uploaded to (the snapshot directory, same file
// name), a name as resolveSnapshotName finds it.
func (s *session) snapshotOnFirst(ctx context.Context, given string) (string, error) {
	switch {
	case isLocalCopy(given):
		return path.Join(s.snapshotDir(), filepath.Base(given)), nil
	case strings.Contains(given, "/"):
		return given, nil
	}
	return s.resolveSnapshotName(ctx, given)
}

// resolveSnapshotName turns the name given to `restore --snapshot` into the path of a snapshot
// in the first server's snapshot directory: the file of that name when there is one, else the
// newest snapshot that `backup --name NAME` (k3s etcd-snapshot save --name NAME) saved — K3s
// names it NAME-<node>-<unix time>[.zip] (docs/day2.md). It says which one it took and which
// others of that name there are; none is a Failure listing what the directory holds.
func (s *session) resolveSnapshotName(ctx context.Context, name string) (string, error) {
	dir := s.snapshotDir()
	out, err := s.first.sh(ctx, "list snapshots", snapshotDirScript, "", dir)
	if err != nil {
		return "", s.hostFailure(s.first, "snapshot", KindInstall, err)
	}
	var files []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			files = append(files, l)
		}
	}
	var nodes []string
	for _, h := range s.in.cluster.Servers() {
		nodes = append(nodes, h.Name)
	}
	m := pickSnapshot(name, files, nodes)
	em := s.in.emitter(events.PhaseRestoreCheck)
	switch {
	case m.exact:
		return path.Join(dir, name), nil
	case m.chosen == "":
		there := "the directory holds no snapshot"
		if len(files) > 0 {
			there = "it holds: " + strings.Join(files, ", ")
		}
		return "", &Failure{Kind: KindInvalid, Phase: events.PhaseRestoreCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
			Message: fmt.Sprintf("no snapshot %s on %s: %s has neither a file of that name nor one that `backup --name %s` saved (%s-<node>-<time>); %s", name, s.first.host.Name, dir, name, name, there),
			Fix:     "`k3strap backup list` shows the snapshots there; give one of those names, a path on the first server, or a copy made with `backup --to` (its path on this machine)",
		}}
	}
	msg := fmt.Sprintf("snapshot %s: %s, taken %s", name, m.chosen, m.taken.UTC().Format(time.RFC3339))
	if len(m.others) > 0 {
		msg += fmt.Sprintf(", the newest of %d with that name (the others: %s; give the full name to restore one of them)", len(m.others)+1, strings.Join(m.others, ", "))
	}
	em.Info(s.first.host.Name, msg)
	return path.Join(dir, m.chosen), nil
}

// snapshotMatch is what pickSnapshot found for a name.
type snapshotMatch struct {
	// exact is true when a file has the name itself.
	exact bool
	// chosen is the newest NAME-<node>-<time> snapshot and taken its time; others are the
	// other snapshots of that name, newest first.
	chosen string
	taken  time.Time
	others []string
}

// pickSnapshot finds name among the file names of a snapshot directory: the file itself, or
// the snapshots K3s saved under that name on one of nodes — NAME-<node>-<unix time>, ".zip"
// appended when compressed (k3s etcd-snapshot save --name; etcd-snapshot-compress) — newest
// first by the time in the name. Only the given node names are accepted between name and
// time, so that "bar" does not take the snapshots of "bar-1".
func pickSnapshot(name string, files, nodes []string) snapshotMatch {
	type cand struct {
		file string
		at   int64
	}
	var cands []cand
	for _, f := range files {
		if f == name {
			return snapshotMatch{exact: true}
		}
		rest, ok := strings.CutPrefix(strings.TrimSuffix(f, ".zip"), name+"-")
		if !ok {
			continue
		}
		for _, n := range nodes {
			ts, ok := strings.CutPrefix(rest, n+"-")
			if !ok {
				continue
			}
			if at, err := strconv.ParseInt(ts, 10, 64); err == nil && at > 0 {
				cands = append(cands, cand{f, at})
				break
			}
		}
	}
	if len(cands) == 0 {
		return snapshotMatch{}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].at != cands[j].at {
			return cands[i].at > cands[j].at
		}
		return cands[i].file > cands[j].file
	})
	m := snapshotMatch{chosen: cands[0].file, taken: time.Unix(cands[0].at, 0)}
	for _, c := range cands[1:] {
		m.others = append(m.others, c.file)
	}
	return m
}

// rejoined reports whether hs already rejoined after this restore.
func (s *session) rejoined(ctx context.Context, hs *hostState) bool {
	kv, err := s.readKV(ctx, hs, k3s.PathRestoreDone)
	return err == nil && kv["id"] == s.d2().restoreID
}

// isLocalCopy reports whether the snapshot given to restore is a file on this machine (a
// `backup --to` copy, uploaded), rather than a name or a path on the first server.
func isLocalCopy(snapshot string) bool {
	fi, err := os.Stat(snapshot)
	return err == nil && fi.Mode().IsRegular()
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
