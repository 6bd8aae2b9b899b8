// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"bytes"
	"testing"
	"time"
)

// TestReplicate: a replica restored from a snapshot and fed the change stream holds the same
// objects, resourceVersion, registered types and aux values as the original, and a replica
// watch sees the replicated events with their original resourceVersions.
func TestReplicate(t *testing.T) {
	src, _ := Open("")
	if _, err := src.Create(Nodes, "", map[string]any{"metadata": map[string]any{"name": "cp1"}}); err != nil {
		t.Fatal(err)
	}
	if err := src.SetAux("ipam/nodeCIDRs", map[string]int{"cp1": 0}); err != nil {
		t.Fatal(err)
	}
	snap, ch, stop := src.Replicate()
	defer stop()
	dst, _ := Open("")
	dst.Restore(snap)
	watch, stopWatch, err := dst.Watch(Nodes, "", dst.ResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatch()

	widget := Resource{Group: "example.io", Version: "v1", Resource: "widgets", Singular: "widget", Kind: "Widget", Namespaced: true}
	src.Register(widget)
	if _, err := src.Create(Nodes, "", map[string]any{"metadata": map[string]any{"name": "a1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Create(widget.GR(), "default", map[string]any{"metadata": map[string]any{"name": "w"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Delete(Nodes, "", "cp1"); err != nil {
		t.Fatal(err)
	}
	if err := src.SetAux("ipam/nodeCIDRs", map[string]int{"cp1": 0, "a1": 1}); err != nil {
		t.Fatal(err)
	}
	for want := 5; want > 0; want-- {
		select {
		case ev := <-ch:
			if err := dst.ApplyReplicated(ev); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d replication events missing", want)
		}
	}
	if dst.ResourceVersion() != src.ResourceVersion() {
		t.Errorf("resourceVersion %d, want %d", dst.ResourceVersion(), src.ResourceVersion())
	}
	if _, ok := dst.Resource(widget.GR()); !ok {
		t.Error("registered type not replicated")
	}
	for _, gr := range []GR{Nodes, widget.GR()} {
		a, _ := src.List(gr, "")
		b, _ := dst.List(gr, "")
		if len(a) != len(b) {
			t.Fatalf("%s: %d objects, want %d", gr, len(b), len(a))
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Errorf("%s: %s, want %s", gr, b[i], a[i])
			}
		}
	}
	var aux map[string]int
	if ok, _ := dst.GetAux("ipam/nodeCIDRs", &aux); !ok || aux["a1"] != 1 {
		t.Errorf("aux %v", aux)
	}
	// The replica's own watch saw the node events (ADDED a1, DELETED cp1) in order.
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-watch:
			got = append(got, ev.Type+" "+ev.Name)
		case <-time.After(5 * time.Second):
			t.Fatalf("replica watch saw only %v", got)
		}
	}
	if got[0] != "ADDED a1" || got[1] != "DELETED cp1" {
		t.Errorf("replica watch %v", got)
	}
	// A write on the replica (after a takeover) continues the sequence.
	if _, err := dst.Create(Nodes, "", map[string]any{"metadata": map[string]any{"name": "cp2"}}); err != nil {
		t.Fatal(err)
	}
	if dst.ResourceVersion() != src.ResourceVersion()+1 {
		t.Errorf("replica write got resourceVersion %d, want %d", dst.ResourceVersion(), src.ResourceVersion()+1)
	}
}
