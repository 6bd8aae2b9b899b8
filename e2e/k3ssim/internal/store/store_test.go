// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestConflictWatchAndPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db", "state.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create(Nodes, "", map[string]any{"metadata": map[string]any{"name": "vm"}, "spec": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := Decode[map[string]any](b)
	rv := (*n)["metadata"].(map[string]any)["resourceVersion"].(string)
	if (*n)["kind"] != "Node" || (*n)["metadata"].(map[string]any)["generation"] != nil {
		t.Fatalf("stored node %v", *n)
	}
	ch, stop, err := s.Watch(Nodes, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if ev := <-ch; ev.Type != "ADDED" || ev.Name != "vm" {
		t.Fatalf("first watch event %+v", ev)
	}
	if err := s.Bump(Nodes, "", "vm"); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Type != "MODIFIED" {
		t.Fatalf("bump event %+v", ev)
	}
	stale := map[string]any{"metadata": map[string]any{"name": "vm", "resourceVersion": rv}, "spec": map[string]any{"unschedulable": true}}
	_, err = s.Update(Nodes, "", "vm", stale, UpdateOptions{CheckResourceVersion: true})
	if !apierrors.IsConflict(err) || err.Error() != `Operation cannot be fulfilled on nodes "vm": `+ConflictMessage {
		t.Fatalf("want Conflict, got %v", err)
	}
	if _, err := s.Create(Nodes, "", map[string]any{"metadata": map[string]any{"name": "vm"}}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("want AlreadyExists, got %v", err)
	}
	// Status subresource: only .status changes; a main-resource write keeps the status.
	cur, _ := s.Get(Nodes, "", "vm")
	obj, _ := Decode[map[string]any](cur)
	(*obj)["status"] = map[string]any{"phase": "x"}
	(*obj)["spec"] = map[string]any{"unschedulable": true}
	if _, err := s.Update(Nodes, "", "vm", *obj, UpdateOptions{Status: true, CheckResourceVersion: true}); err != nil {
		t.Fatal(err)
	}
	after, _ := GetTyped[map[string]any](s, Nodes, "", "vm")
	if (*after)["status"].(map[string]any)["phase"] != "x" || len((*after)["spec"].(map[string]any)) != 0 {
		t.Fatalf("status write: %v", *after)
	}
	(*after)["status"] = map[string]any{}
	(*after)["spec"] = map[string]any{"unschedulable": true}
	if _, err := s.Update(Nodes, "", "vm", *after, UpdateOptions{CheckResourceVersion: true}); err != nil {
		t.Fatal(err)
	}
	after2, _ := GetTyped[map[string]any](s, Nodes, "", "vm")
	if (*after2)["status"].(map[string]any)["phase"] != "x" || (*after2)["spec"].(map[string]any)["unschedulable"] != true {
		t.Fatalf("main write: %v", *after2)
	}
	if err := s.SetAux("k", 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s2.ResourceVersion() != s.ResourceVersion() {
		t.Fatalf("rv %d after reload, want %d", s2.ResourceVersion(), s.ResourceVersion())
	}
	var v int
	if ok, _ := s2.GetAux("k", &v); !ok || v != 42 {
		t.Fatal("aux not persisted")
	}
	if _, err := s2.Get(Nodes, "", "vm"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s2.Watch(Nodes, "", 1); err != ErrGone {
		t.Fatalf("watch from an rv older than the restart: %v, want ErrGone", err)
	}
	if _, stop2, err := s2.Watch(Nodes, "", s2.ResourceVersion()); err != nil {
		t.Fatalf("watch from the current rv: %v", err)
	} else {
		stop2()
	}
}
