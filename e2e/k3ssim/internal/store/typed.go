// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"fmt"
)

// ToMap converts a typed object (e.g. *corev1.Node) into unstructured content.
func ToMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Decode parses stored JSON into a new T.
func Decode[T any](b []byte) (*T, error) {
	t := new(T)
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("decode %T: %w", t, err)
	}
	return t, nil
}

// GetTyped returns the stored object decoded as T, or the store's NotFound error.
func GetTyped[T any](s *Store, gr GR, ns, name string) (*T, error) {
	b, err := s.Get(gr, ns, name)
	if err != nil {
		return nil, err
	}
	return Decode[T](b)
}

// ListTyped returns all objects of gr in ns ("" = all) decoded as T.
func ListTyped[T any](s *Store, gr GR, ns string) ([]T, error) {
	raws, _ := s.List(gr, ns)
	out := make([]T, 0, len(raws))
	for _, b := range raws {
		t, err := Decode[T](b)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, nil
}

// CreateTyped stores a new typed object and returns it as stored.
func CreateTyped[T any](s *Store, gr GR, ns string, obj *T) (*T, error) {
	m, err := ToMap(obj)
	if err != nil {
		return nil, err
	}
	b, err := s.Create(gr, ns, m)
	if err != nil {
		return nil, err
	}
	return Decode[T](b)
}

// MutateTyped is Mutate for a typed object: fn edits the decoded object and reports whether
// it changed anything. It returns the object as stored afterwards.
func MutateTyped[T any](s *Store, gr GR, ns, name string, fn func(*T) bool) (*T, error) {
	b, err := s.Mutate(gr, ns, name, func(obj map[string]any) (bool, error) {
		raw, err := json.Marshal(obj)
		if err != nil {
			return false, err
		}
		t := new(T)
		if err := json.Unmarshal(raw, t); err != nil {
			return false, err
		}
		if !fn(t) {
			return false, nil
		}
		m, err := ToMap(t)
		if err != nil {
			return false, err
		}
		for k := range obj {
			delete(obj, k)
		}
		for k, v := range m {
			obj[k] = v
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return Decode[T](b)
}

// PodLogKey is the aux key under which the simulator keeps a pod's log text (served at
// /api/v1/namespaces/NS/pods/NAME/log).
func PodLogKey(ns, name string) string { return "podlog/" + ns + "/" + name }
