// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"sort"
	"strings"
)

// GR identifies a resource type: API group ("" for core) and plural resource name.
type GR struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
}

// String returns "resource.group" (or "resource" for core), as Kubernetes prints it.
func (g GR) String() string {
	if g.Group == "" {
		return g.Resource
	}
	return g.Resource + "." + g.Group
}

// Resource describes one served resource type (what discovery reports).
type Resource struct {
	Group      string   `json:"group"`
	Version    string   `json:"version"`
	Resource   string   `json:"resource"` // plural, lower case
	Singular   string   `json:"singular"`
	Kind       string   `json:"kind"`
	ShortNames []string `json:"shortNames,omitempty"`
	Namespaced bool     `json:"namespaced"`
	// HasStatus: the type has a status subresource, so a PUT/PATCH on the main resource keeps
	// the stored status and one on /status changes only the status.
	HasStatus bool `json:"hasStatus"`
}

// GR returns the resource's group and plural name.
func (r Resource) GR() GR { return GR{Group: r.Group, Resource: r.Resource} }

// APIVersion returns "v1" for core or "group/version".
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// Built-in resource types served from the start. Core ones mirror kube-apiserver; the K3s
// ones (helm.cattle.io, k3s.cattle.io) are the CRDs a K3s server installs itself; Calico's
// Installation is included so manifests applied before the operator CRDs still work.
var builtins = []Resource{
	{"", "v1", "nodes", "node", "Node", []string{"no"}, false, true},
	{"", "v1", "pods", "pod", "Pod", []string{"po"}, true, true},
	{"", "v1", "namespaces", "namespace", "Namespace", []string{"ns"}, false, true},
	{"", "v1", "services", "service", "Service", []string{"svc"}, true, true},
	{"", "v1", "configmaps", "configmap", "ConfigMap", []string{"cm"}, true, false},
	{"", "v1", "secrets", "secret", "Secret", nil, true, false},
	{"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", []string{"sa"}, true, false},
	{"", "v1", "events", "event", "Event", []string{"ev"}, true, false},
	{"", "v1", "endpoints", "endpoints", "Endpoints", []string{"ep"}, true, false},
	{"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", []string{"pvc"}, true, true},
	{"", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", []string{"pv"}, false, true},
	{"", "v1", "limitranges", "limitrange", "LimitRange", []string{"limits"}, true, false},
	{"", "v1", "resourcequotas", "resourcequota", "ResourceQuota", []string{"quota"}, true, true},
	{"apps", "v1", "deployments", "deployment", "Deployment", []string{"deploy"}, true, true},
	{"apps", "v1", "daemonsets", "daemonset", "DaemonSet", []string{"ds"}, true, true},
	{"apps", "v1", "replicasets", "replicaset", "ReplicaSet", []string{"rs"}, true, true},
	{"apps", "v1", "statefulsets", "statefulset", "StatefulSet", []string{"sts"}, true, true},
	{"batch", "v1", "jobs", "job", "Job", nil, true, true},
	{"batch", "v1", "cronjobs", "cronjob", "CronJob", []string{"cj"}, true, true},
	{"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", nil, false, false},
	{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", nil, false, false},
	{"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", nil, true, false},
	{"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", nil, true, false},
	{"networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", []string{"ing"}, true, true},
	{"networking.k8s.io", "v1", "ingressclasses", "ingressclass", "IngressClass", nil, false, false},
	{"networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", []string{"netpol"}, true, false},
	{"storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", []string{"sc"}, false, false},
	{"storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", nil, false, false},
	{"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", []string{"crd", "crds"}, false, true},
	{"apiregistration.k8s.io", "v1", "apiservices", "apiservice", "APIService", nil, false, true},
	{"scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", []string{"pc"}, false, false},
	{"coordination.k8s.io", "v1", "leases", "lease", "Lease", nil, true, false},
	{"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", []string{"pdb"}, true, true},
	{"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", nil, false, false},
	{"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", nil, false, false},
	{"helm.cattle.io", "v1", "helmcharts", "helmchart", "HelmChart", nil, true, true},
	{"helm.cattle.io", "v1", "helmchartconfigs", "helmchartconfig", "HelmChartConfig", nil, true, false},
	{"k3s.cattle.io", "v1", "addons", "addon", "Addon", nil, true, true},
	{"k3s.cattle.io", "v1", "etcdsnapshotfiles", "etcdsnapshotfile", "ETCDSnapshotFile", nil, false, true},
	{"operator.tigera.io", "v1", "installations", "installation", "Installation", nil, false, true},
}

// Builtins returns a copy of the resource types every simulated server serves from the start.
func Builtins() []Resource { return append([]Resource(nil), builtins...) }

// Well-known resource types used by the controllers.
var (
	Nodes       = GR{"", "nodes"}
	Pods        = GR{"", "pods"}
	Namespaces  = GR{"", "namespaces"}
	Services    = GR{"", "services"}
	Deployments = GR{"apps", "deployments"}
	DaemonSets  = GR{"apps", "daemonsets"}
	Jobs        = GR{"batch", "jobs"}
	HelmCharts  = GR{"helm.cattle.io", "helmcharts"}
	Addons      = GR{"k3s.cattle.io", "addons"}
	Ingresses   = GR{"networking.k8s.io", "ingresses"}
	CRDs        = GR{"apiextensions.k8s.io", "customresourcedefinitions"}
	Leases      = GR{"coordination.k8s.io", "leases"}
)

// GuessPlural returns the plural Kubernetes would most likely use for a kind (lower case,
// "y" -> "ies", s/x/ch/sh -> "es"), for kinds applied without a CRD.
func GuessPlural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && !strings.HasSuffix(k, "ey"):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// Resources returns every registered resource type, sorted by group then resource.
func (s *Store) Resources() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Resource, 0, len(s.reg))
	for _, r := range s.reg {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Resource < out[j].Resource
	})
	return out
}

// Resource returns the registered type for gr.
func (s *Store) Resource(gr GR) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reg[gr]
	return r, ok
}

// ResourceForKind returns the registered type with the given group and kind.
func (s *Store) ResourceForKind(group, kind string) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reg {
		if r.Group == group && r.Kind == kind {
			return r, true
		}
	}
	return Resource{}, false
}

// Register adds or replaces a resource type (a CRD being created, or a kind applied without
// one); it is persisted with the state.
func (s *Store) Register(r Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.reg[r.GR()]; ok && sameResource(old, r) {
		return
	}
	s.reg[r.GR()] = r
	s.dynamic[r.GR()] = r
	s.markDirty()
	if b, err := json.Marshal(r); err == nil {
		s.sendLocked(Event{Type: EventRegister, GR: r.GR(), Object: b})
	}
}

func sameResource(a, b Resource) bool {
	return a.Group == b.Group && a.Version == b.Version && a.Resource == b.Resource && a.Kind == b.Kind &&
		a.Singular == b.Singular && a.Namespaced == b.Namespaced && a.HasStatus == b.HasStatus &&
		strings.Join(a.ShortNames, ",") == strings.Join(b.ShortNames, ",")
}
