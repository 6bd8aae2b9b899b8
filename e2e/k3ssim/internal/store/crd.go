// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EstablishCRD registers the resource a CustomResourceDefinition declares and marks the
// CRD Established, as kube-apiserver's apiextensions controllers do.
func (s *Store) EstablishCRD(name string) ([]byte, error) {
	var reg *Resource
	b, err := s.Mutate(CRDs, "", name, func(obj map[string]any) (bool, error) {
		raw, _ := json.Marshal(obj)
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Plural     string   `json:"plural"`
					Singular   string   `json:"singular"`
					Kind       string   `json:"kind"`
					ShortNames []string `json:"shortNames"`
				} `json:"names"`
				Scope    string `json:"scope"`
				Versions []struct {
					Name         string         `json:"name"`
					Served       bool           `json:"served"`
					Storage      bool           `json:"storage"`
					Subresources map[string]any `json:"subresources"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &crd); err != nil {
			return false, err
		}
		version, hasStatus := "", false
		for _, v := range crd.Spec.Versions {
			if v.Storage || version == "" {
				version = v.Name
				_, hasStatus = v.Subresources["status"]
			}
		}
		if crd.Spec.Names.Plural == "" || version == "" {
			return false, nil
		}
		singular := crd.Spec.Names.Singular
		if singular == "" {
			singular = strings.ToLower(crd.Spec.Names.Kind)
		}
		reg = &Resource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural,
			Singular: singular, Kind: crd.Spec.Names.Kind, ShortNames: crd.Spec.Names.ShortNames,
			Namespaced: crd.Spec.Scope != "Cluster", HasStatus: hasStatus}
		now := metav1.Now().UTC().Format(time.RFC3339)
		obj["status"] = map[string]any{
			"acceptedNames": map[string]any{"plural": crd.Spec.Names.Plural, "singular": singular,
				"kind": crd.Spec.Names.Kind, "shortNames": crd.Spec.Names.ShortNames, "listKind": crd.Spec.Names.Kind + "List"},
			"conditions": []any{
				map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
				map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
			},
			"storedVersions": []any{version},
		}
		return true, nil
	})
	if reg != nil {
		s.Register(*reg)
	}
	return b, err
}
