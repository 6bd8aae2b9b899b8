// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package objects

import (
	"encoding/json"
	"testing"
)

func TestSplitMultiDocAndList(t *testing.T) {
	objs, err := Split([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\n---\n" +
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}]}`))
	if err != nil || len(objs) != 2 || Str(objs[1], "kind") != "ConfigMap" {
		t.Fatalf("%v %v", objs, err)
	}
	if _, err := Split([]byte("metadata: {name: x}\n")); err == nil {
		t.Fatal("a document without kind must fail")
	}
}

func TestMergeAppliedUnchangedConfiguredPruned(t *testing.T) {
	applied := map[string]any{}
	_ = json.Unmarshal([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w","labels":{"a":"1"}},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}`), &applied)
	// What the server stored: applied plus server defaults and status.
	live := map[string]any{}
	_ = json.Unmarshal([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w","uid":"u","resourceVersion":"7","labels":{"a":"1"}},"spec":{"replicas":2,"strategy":{},"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}},"status":{"replicas":2}}`), &live)
	SetLastApplied(live, applied)
	if _, changed := MergeApplied(live, applied); changed {
		t.Fatal("re-applying the same manifest must be unchanged")
	}
	applied["spec"].(map[string]any)["replicas"] = 3
	merged, changed := MergeApplied(live, applied)
	if !changed || merged["spec"].(map[string]any)["replicas"] != float64(3) && merged["spec"].(map[string]any)["replicas"] != 3 {
		t.Fatalf("replicas change not applied: %v", merged["spec"])
	}
	if merged["status"] == nil || Meta(merged)["uid"] != "u" || merged["spec"].(map[string]any)["strategy"] == nil {
		t.Fatal("status, uid and server defaults must be kept")
	}
	// Dropping a field that the last apply set prunes it.
	delete(applied["spec"].(map[string]any), "replicas")
	merged, changed = MergeApplied(merged, applied)
	if _, has := merged["spec"].(map[string]any)["replicas"]; !changed || has {
		t.Fatal("a field removed from the manifest must be pruned")
	}
}
