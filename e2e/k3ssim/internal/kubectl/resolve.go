// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectl

import (
	"encoding/json"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/objects"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// resInfo is a resource type as discovery reports it.
type resInfo struct {
	group, version, plural, singular, kind string
	short                                  []string
	namespaced                             bool
}

func fromStore(r store.Resource) resInfo {
	return resInfo{group: r.Group, version: r.Version, plural: r.Resource, singular: r.Singular, kind: r.Kind,
		short: r.ShortNames, namespaced: r.Namespaced}
}

// path is the REST path of the collection (name "") or of one object.
func (r resInfo) path(ns, name string) string {
	p := "/api/" + r.version
	if r.group != "" {
		p = "/apis/" + r.group + "/" + r.version
	}
	if r.namespaced && ns != "" {
		p += "/namespaces/" + url.PathEscape(ns)
	}
	p += "/" + r.plural
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// typeName is kubectl's "kind.group" lower-case form used in output (deployment.apps).
func (r resInfo) typeName() string {
	k := strings.ToLower(r.kind)
	if r.group == "" {
		return k
	}
	return k + "." + r.group
}

func (r resInfo) matches(typ string) bool {
	t := strings.ToLower(typ)
	name, group, hasGroup := strings.Cut(t, ".")
	if hasGroup && group != r.group && !strings.HasPrefix(r.group, group) {
		return false
	}
	if !hasGroup {
		name = t
	}
	if name == r.plural || name == r.singular || name == strings.ToLower(r.kind) {
		return true
	}
	for _, s := range r.short {
		if name == s {
			return true
		}
	}
	return false
}

// discover lists every resource type the server serves (legacy discovery).
func (k *kubectl) discover() ([]resInfo, error) {
	if k.res != nil {
		return k.res, nil
	}
	var out []resInfo
	add := func(gv string) error {
		path := "/apis/" + gv
		if gv == "v1" {
			path = "/api/v1"
		}
		data, err := k.do("GET", path, "", nil)
		if err != nil {
			return err
		}
		var l metav1.APIResourceList
		if err := json.Unmarshal(data, &l); err != nil {
			return err
		}
		group, version := objects.GroupVersion(gv)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			out = append(out, resInfo{group: group, version: version, plural: r.Name, singular: r.SingularName,
				kind: r.Kind, short: r.ShortNames, namespaced: r.Namespaced})
		}
		return nil
	}
	if err := add("v1"); err != nil {
		return nil, err
	}
	data, err := k.do("GET", "/apis", "", nil)
	if err != nil {
		return nil, err
	}
	var groups metav1.APIGroupList
	if err := json.Unmarshal(data, &groups); err != nil {
		return nil, err
	}
	for _, g := range groups.Groups {
		if err := add(g.PreferredVersion.GroupVersion); err != nil {
			return nil, err
		}
	}
	k.res = out
	return out, nil
}

// resolve maps a kubectl type argument (nodes, node, no, deploy, deployments.apps,
// helmcharts, ...) to a resource; built-in types resolve without a round trip.
func (k *kubectl) resolve(typ string) (resInfo, error) {
	for _, r := range store.Builtins() {
		ri := fromStore(r)
		if ri.matches(typ) {
			return ri, nil
		}
	}
	all, err := k.discover()
	if err != nil {
		return resInfo{}, serverErr(err, "")
	}
	for _, r := range all {
		if r.matches(typ) {
			return r, nil
		}
	}
	return resInfo{}, failf("error: the server doesn't have a resource type %q", typ)
}

// resolveKind maps an object's apiVersion and kind to a resource. A kind the server does
// not know yet gets a guessed plural (the simulator registers it on create) and counts as
// namespaced when the object names a namespace.
func (k *kubectl) resolveKind(apiVersion, kind, objNamespace string) resInfo {
	group, version := objects.GroupVersion(apiVersion)
	for _, r := range store.Builtins() {
		if r.Group == group && r.Kind == kind {
			return fromStore(r)
		}
	}
	if all, err := k.discover(); err == nil {
		for _, r := range all {
			if r.group == group && r.kind == kind {
				return r
			}
		}
	}
	return resInfo{group: group, version: version, plural: store.GuessPlural(kind), singular: strings.ToLower(kind),
		kind: kind, namespaced: objNamespace != ""}
}
