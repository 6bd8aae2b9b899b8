// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"net/http"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// Legacy (non-aggregated) discovery documents, enough for client-go's discovery client and
// kubectl's REST mapper.

func (s *Server) apiVersions(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: s.cfg.ServerAddress},
		},
	})
}

func (s *Server) groups() map[string][]string {
	g := map[string][]string{}
	for _, r := range s.cfg.Store.Resources() {
		if r.Group == "" {
			continue
		}
		found := false
		for _, v := range g[r.Group] {
			if v == r.Version {
				found = true
			}
		}
		if !found {
			g[r.Group] = append(g[r.Group], r.Version)
		}
	}
	return g
}

func apiGroup(name string, versions []string) metav1.APIGroup {
	sort.Strings(versions)
	grp := metav1.APIGroup{Name: name}
	for _, v := range versions {
		grp.Versions = append(grp.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	grp.PreferredVersion = grp.Versions[len(grp.Versions)-1]
	return grp
}

func (s *Server) apiGroupList(w http.ResponseWriter) {
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	g := s.groups()
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		list.Groups = append(list.Groups, apiGroup(n, g[n]))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) apiGroupDoc(w http.ResponseWriter, group string) {
	versions, ok := s.groups()[group]
	if !ok {
		notFoundPath(w)
		return
	}
	grp := apiGroup(group, versions)
	grp.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
	writeJSON(w, http.StatusOK, grp)
}

var allVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

func (s *Server) resourceList(w http.ResponseWriter, group, version string) {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	found := false
	for _, r := range s.cfg.Store.Resources() {
		if r.Group != group || r.Version != version {
			continue
		}
		found = true
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Resource, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: allVerbs, ShortNames: r.ShortNames,
		})
		if r.HasStatus {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
		if r.GR() == store.Pods {
			list.APIResources = append(list.APIResources,
				metav1.APIResource{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
				metav1.APIResource{Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}})
		}
	}
	if !found {
		notFoundPath(w)
		return
	}
	writeJSON(w, http.StatusOK, list)
}
