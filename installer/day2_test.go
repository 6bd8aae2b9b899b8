// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLiveMajority(t *testing.T) {
	for _, c := range []struct {
		left, live int
		want       bool
	}{{2, 2, true}, {2, 1, false}, {3, 2, true}, {3, 1, false}, {1, 1, true}, {1, 0, false}, {0, 0, false}, {4, 2, false}, {4, 3, true}} {
		if got := liveMajority(c.left, c.live); got != c.want {
			t.Errorf("liveMajority(%d left, %d live) = %v, want %v", c.left, c.live, got, c.want)
		}
	}
}

// The day-two commands take the run lock before changing anything, and restore reuses apply's
// supervised bring-up of the first server.
func TestDay2Commands(t *testing.T) {
	for _, name := range []string{"backup", "backup-list", "restore", "remove-node", "rotate-certificates", "rotate-token"} {
		var phases []string
		for _, st := range Steps(name) {
			phases = append(phases, string(st.Phase))
		}
		list := strings.Join(phases, " ")
		if name != "backup-list" && !strings.Contains(list, "lock") {
			t.Errorf("%s takes no lock: %s", name, list)
		}
		if name == "restore" && !strings.Contains(list, "cluster-reset supervise bring-up rejoin-servers restart-agents") {
			t.Errorf("restore steps: %s", list)
		}
	}
}

// TestPickSnapshot: `restore --snapshot NAME` takes the name given to `backup --name NAME`,
// which K3s saves as NAME-<node>-<unix time> (".zip" when compressed): the newest of that
// name, the others listed newest first; a file of the name itself wins; a longer name that
// starts the same ("bar1-x") or a snapshot of an unknown node is not taken.
func TestPickSnapshot(t *testing.T) {
	files := []string{
		"bar1-cp1-1795630425", "bar1-cp1-1795630500", "bar1-cp2-1795630300.zip",
		"bar1-x-cp1-1795639999", "bar10-cp1-1795639999", "bar1-old-1795639999",
		"on-demand-cp1-1795630000", "etcd-snapshot-cp1-1795600000", "bar1-cp1-notatime",
	}
	nodes := []string{"cp1", "cp2", "cp3"}
	m := pickSnapshot("bar1", files, nodes)
	if m.exact || m.chosen != "bar1-cp1-1795630500" || m.taken.Unix() != 1795630500 {
		t.Fatalf("bar1: %+v, want bar1-cp1-1795630500", m)
	}
	if got := strings.Join(m.others, " "); got != "bar1-cp1-1795630425 bar1-cp2-1795630300.zip" {
		t.Errorf("others of bar1: %s", got)
	}
	if m := pickSnapshot("bar1-x", files, nodes); m.chosen != "bar1-x-cp1-1795639999" || len(m.others) != 0 {
		t.Errorf("bar1-x: %+v", m)
	}
	if m := pickSnapshot("bar1-cp1-1795630425", files, nodes); !m.exact {
		t.Errorf("a full snapshot name is not taken as it is: %+v", m)
	}
	if m := pickSnapshot("on-demand", files, nodes); m.chosen != "on-demand-cp1-1795630000" {
		t.Errorf("on-demand: %+v", m)
	}
	for _, name := range []string{"bar", "missing", "etcd-snapshot-cp1"} {
		if m := pickSnapshot(name, files, nodes); m.exact || m.chosen != "" {
			t.Errorf("%s matched %+v", name, m)
		}
	}
	if m := pickSnapshot("bar1", nil, nodes); m.chosen != "" {
		t.Errorf("empty directory: %+v", m)
	}
}

// TestRestoreCommands: backup says how to restore what it saved, exactly: the full snapshot
// name (and the name given to backup as the short form), and the local copy by its absolute
// path; arguments are shell-quoted.
func TestRestoreCommands(t *testing.T) {
	d := &day2State{backup: BackupRequest{Name: "bar1"}, saved: "/var/lib/rancher/k3s/server/db/snapshots/bar1-cp1-1795630425"}
	got := d.restoreCommands("my cluster.yaml")
	if len(got) != 1 || !strings.HasPrefix(got[0], "k3strap restore -f 'my cluster.yaml' --snapshot bar1-cp1-1795630425   # or --snapshot bar1") {
		t.Fatalf("without --to: %q", got)
	}
	d.local = []string{"backups/bar1-cp1-1795630425", "backups/bar1-cp1-1795630425.token"}
	got = d.restoreCommands("c.yaml")
	abs, _ := filepath.Abs("backups/bar1-cp1-1795630425")
	if len(got) != 2 || !strings.HasPrefix(got[1], "k3strap restore -f c.yaml --snapshot "+abs+" ") {
		t.Fatalf("with --to: %q", got)
	}
	if got := (&day2State{saved: "/x/on-demand-cp1-1"}).restoreCommands("c.yaml"); !strings.Contains(got[0], "--snapshot on-demand:") {
		t.Errorf("default name: %q", got)
	}
}
