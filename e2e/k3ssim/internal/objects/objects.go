// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package objects holds helpers shared by the simulator's kubectl and its manifest deployer:
// splitting multi-document YAML/JSON into objects, and the create-or-update merge that
// `kubectl apply` performs.
package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// LastApplied is kubectl's annotation holding the last applied configuration.
const LastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Split decodes a YAML (multi-document) or JSON stream into objects. Empty documents are
// skipped; a kind "List" (or "...List" with items) is expanded into its items. A document
// without kind or apiVersion is an error.
func Split(data []byte) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		kind, _ := obj["kind"].(string)
		if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					out = append(out, m)
				}
			}
			continue
		}
		if kind == "" || obj["apiVersion"] == nil {
			return nil, errors.New("error validating data: apiVersion or kind not set")
		}
		out = append(out, obj)
	}
	return out, nil
}

// Meta returns obj's metadata map, creating it if missing.
func Meta(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

// Str returns a string field of a map ("" if missing).
func Str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// GroupVersion splits an apiVersion into group and version ("v1" -> "", "v1").
func GroupVersion(apiVersion string) (group, version string) {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return g, v
	}
	return "", apiVersion
}

// MergeApplied returns existing updated with applied the way `kubectl apply` leaves an
// object (a simplified three-way merge): maps are merged recursively with applied winning,
// lists are replaced, fields the previous apply set (last-applied annotation) but this one
// no longer has are removed, status and server-set metadata are kept, and the last-applied
// annotation is updated. changed is false when the live object already holds everything
// applied says and nothing has to be pruned (kubectl prints "unchanged").
func MergeApplied(existing, applied map[string]any) (merged map[string]any, changed bool) {
	live, _ := deepCopy(existing).(map[string]any)
	if live == nil {
		live = map[string]any{}
	}
	app, _ := deepCopy(applied).(map[string]any)
	last := lastApplied(existing)
	body := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			if k != "status" && k != "metadata" {
				out[k] = v
			}
		}
		return out
	}
	amd := Meta(app)
	var lastMD map[string]any
	if last != nil {
		lastMD, _ = last["metadata"].(map[string]any)
	}
	appliedMD := map[string]any{}
	for _, f := range []string{"labels", "annotations", "finalizers", "ownerReferences"} {
		if v, ok := amd[f]; ok {
			appliedMD[f] = v
		}
	}
	lastMDPart := map[string]any{}
	for _, f := range []string{"labels", "annotations"} {
		if v, ok := lastMD[f]; ok {
			lastMDPart[f] = v
		}
	}
	needPrune := prunes(body(last), body(app)) || prunes(lastMDPart, appliedMD)
	if subset(body(app), live) && subset(appliedMD, Meta(live)) && !needPrune {
		return live, false
	}
	merged = mergeMaps(live, body(app), body(last))
	md := Meta(merged)
	for f, v := range appliedMD {
		switch f {
		case "labels", "annotations":
			cur, _ := md[f].(map[string]any)
			lf, _ := lastMDPart[f].(map[string]any)
			md[f] = mergeMaps(orEmpty(cur), v.(map[string]any), lf)
		default:
			md[f] = v
		}
	}
	SetLastApplied(merged, applied)
	return merged, true
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// mergeMaps merges src into a copy of dst: nested maps recursively, everything else
// replaced; keys present in last (the previous applied state) but absent from src are
// removed.
func mergeMaps(dst, src, last map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range dst {
		out[k] = v
	}
	for k := range last {
		if _, still := src[k]; !still {
			delete(out, k)
		}
	}
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if sok && dok {
			lm, _ := last[k].(map[string]any)
			out[k] = mergeMaps(dm, sm, lm)
			continue
		}
		out[k] = v
	}
	return out
}

// prunes reports whether last has a key (at any map depth) that next no longer has.
func prunes(last, next map[string]any) bool {
	for k, lv := range last {
		nv, ok := next[k]
		if !ok {
			return true
		}
		lm, lok := lv.(map[string]any)
		nm, nok := nv.(map[string]any)
		if lok && nok && prunes(lm, nm) {
			return true
		}
	}
	return false
}

// subset reports whether every value in want is present and equal in have (maps
// recursively, lists element by element with equal length).
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, v := range w {
			hv, present := h[k]
			if !present {
				if v == nil {
					continue
				}
				return false
			}
			if !subset(v, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return len(w) == 0 && have == nil
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}

// SetLastApplied stores applied (without status and server-set metadata) in obj's
// kubectl.kubernetes.io/last-applied-configuration annotation.
func SetLastApplied(obj, applied map[string]any) {
	clean := deepCopy(applied).(map[string]any)
	delete(clean, "status")
	cmd := Meta(clean)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"} {
		delete(cmd, k)
	}
	if ann, ok := cmd["annotations"].(map[string]any); ok {
		delete(ann, LastApplied)
		if len(ann) == 0 {
			delete(cmd, "annotations")
		}
	}
	b, _ := json.Marshal(clean)
	md := Meta(obj)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[LastApplied] = string(b) + "\n"
	md["annotations"] = ann
}

func lastApplied(obj map[string]any) map[string]any {
	ann, _ := Meta(obj)["annotations"].(map[string]any)
	s, _ := ann[LastApplied].(string)
	if s == "" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
