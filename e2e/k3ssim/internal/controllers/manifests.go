// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/objects"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

const manifestAux = "deploy/manifests" // map file -> checksum applied

// deployManifests is K3s's deploy controller for <data-dir>/server/manifests: every *.yaml,
// *.yml or *.json file (a "NAME.skip" file next to it disables it) is applied (create or
// update) when its content changes, with an Addon object named after the file.
func (c *Controller) deployManifests() {
	dir := c.cfg.ManifestsDir
	if dir == "" {
		return
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		l := strings.ToLower(p)
		if strings.HasSuffix(l, ".yaml") || strings.HasSuffix(l, ".yml") || strings.HasSuffix(l, ".json") {
			if _, err := os.Stat(p + ".skip"); err != nil {
				files = append(files, p)
			}
		}
		return nil
	})
	sort.Strings(files)
	applied := map[string]string{}
	_, _ = c.cfg.Store.GetAux(manifestAux, &applied)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sum := hash10(string(data))
		if applied[f] == sum {
			continue
		}
		objs, err := objects.Split(data)
		if err != nil {
			c.cfg.Log.Errorf("Failed to process config: failed to process %s: %v", f, err)
			continue
		}
		for _, o := range objs {
			if err := ApplyToStore(c.cfg.Store, o); err != nil {
				c.cfg.Log.Errorf("Failed to apply %s from %s: %v", objects.Str(o, "kind"), f, err)
			}
		}
		base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		addon := map[string]any{"apiVersion": "k3s.cattle.io/v1", "kind": "Addon",
			"metadata": map[string]any{"name": base, "namespace": "kube-system"},
			"spec":     map[string]any{"source": f, "checksum": sum}}
		_ = ApplyToStore(c.cfg.Store, addon)
		_ = c.cfg.Store.UpdateAux(manifestAux, &applied, func() error {
			applied[f] = sum
			return nil
		})
	}
}

// ApplyToStore creates obj or merges it into the stored object as `kubectl apply` would.
// A kind without a registered resource type is registered with a guessed plural. Namespaced
// objects without a namespace go to "default".
func ApplyToStore(s *store.Store, obj map[string]any) error {
	group, version := objects.GroupVersion(objects.Str(obj, "apiVersion"))
	kind := objects.Str(obj, "kind")
	res, ok := s.ResourceForKind(group, kind)
	md := objects.Meta(obj)
	ns := objects.Str(md, "namespace")
	if !ok {
		res = store.Resource{Group: group, Version: version, Resource: store.GuessPlural(kind), Singular: strings.ToLower(kind),
			Kind: kind, Namespaced: ns != ""}
		s.Register(res)
	}
	if !res.Namespaced {
		ns = ""
	} else if ns == "" {
		ns = "default"
	}
	name := objects.Str(md, "name")
	cur, err := s.Get(res.GR(), ns, name)
	if err != nil {
		objects.SetLastApplied(obj, obj)
		if _, err = s.Create(res.GR(), ns, obj); err == nil && res.GR() == store.CRDs {
			_, err = s.EstablishCRD(name)
		}
		return err
	}
	var existing map[string]any
	if err := json.Unmarshal(cur, &existing); err != nil {
		return err
	}
	merged, changed := objects.MergeApplied(existing, obj)
	if !changed {
		return nil
	}
	if _, err = s.Update(res.GR(), ns, name, merged, store.UpdateOptions{}); err == nil && res.GR() == store.CRDs {
		_, err = s.EstablishCRD(name)
	}
	return err
}
