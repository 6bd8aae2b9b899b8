// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"sort"

	"github.com/k3strap/k3strap/inventory"
)

// digestVersion starts every digest's input: a change of what a digest covers changes every
// digest (every done site is then applied again once, which is safe).
const digestVersion = "k3strap fleet site digest v1\n"

// secretMark replaces each secret value in the bytes a digest covers.
var secretMark = []byte("\x00secret\x00")

// siteDigest identifies what a site was asked to be: "sha256:" and the hex SHA-256 of the site
// inventory file's bytes — with the value of every secret field (inventory.Secret: the token,
// Rancher passwords and tokens, ...) cut out, so that no digest depends on a secret — and of the
// fleet defaults the site took (canonical JSON). It does not cover the files the inventory
// names (the airgap binary's bytes are not read for it): a new release comes with a new
// version, which the digest covers. A change to a secret alone (the token) leaves the digest
// as it was: rotating a token is `k3strap rotate token`, not a re-run.
func siteDigest(data []byte, c *inventory.Cluster, taken []appliedGroup) string {
	cut := data
	for _, s := range secretValues(c) {
		cut = bytes.ReplaceAll(cut, []byte(s), secretMark)
	}
	h := sha256.New()
	h.Write([]byte(digestVersion))
	h.Write(cut)
	h.Write([]byte("\x00defaults\x00"))
	h.Write(digestJSON(taken))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// secretValues returns the values of every non-empty inventory.Secret in c, longest first (a
// secret that contains another is cut out whole).
func secretValues(c *inventory.Cluster) []string {
	var out []string
	secretType := reflect.TypeFor[inventory.Secret]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.String:
			if v.Type() == secretType && v.Len() > 0 {
				out = append(out, v.String())
			}
		}
	}
	walk(reflect.ValueOf(c.Spec))
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
