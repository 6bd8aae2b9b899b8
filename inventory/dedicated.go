// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import "fmt"

// Dedicated is a server that runs only some of the server roles (docs.k3s.io "Managing Server
// Roles"): K3s's hidden server flags disable-apiserver, disable-controller-manager,
// disable-scheduler (etcd only) and disable-etcd (control plane only), which k3strap renders
// into the server's config.yaml. They need embedded etcd.
type Dedicated string

// Dedicated server roles.
const (
	// DedicatedEtcd runs etcd only: no API server, controller manager or scheduler. Its node
	// is labelled k3s.LabelEtcd only.
	DedicatedEtcd Dedicated = "etcd"
	// DedicatedControlPlane runs the control plane without etcd: it is not an etcd member and
	// must join a server that has etcd.
	DedicatedControlPlane Dedicated = "control-plane"
)

// EtcdMember reports whether h is a server that runs etcd (of an embedded-etcd cluster).
func (h *Host) EtcdMember() bool { return h.Role == RoleServer && h.Dedicated != DedicatedControlPlane }

// dedicatedConfig adds the flags of h's dedicated role to its config.
func dedicatedConfig(cfg *K3sConfig, h *Host) {
	var keys []string
	switch h.Dedicated {
	case DedicatedEtcd:
		keys = []string{"disable-apiserver", "disable-controller-manager", "disable-scheduler"}
	case DedicatedControlPlane:
		keys = []string{"disable-etcd"}
	default:
		return
	}
	if cfg.Extra == nil {
		cfg.Extra = map[string]any{}
	}
	for _, k := range keys {
		cfg.Extra[k] = true
	}
}

func (v *validator) dedicated() {
	first := v.c.FirstServer()
	servers := len(v.c.Servers())
	for i := range v.c.Spec.Hosts {
		h := &v.c.Spec.Hosts[i]
		if h.Dedicated == "" {
			continue
		}
		path := fmt.Sprintf("spec.hosts[%d].dedicated", i)
		switch {
		case h.Dedicated != DedicatedEtcd && h.Dedicated != DedicatedControlPlane:
			v.add(path, atValue, h.Name, fmt.Sprintf("unknown dedicated role %q", h.Dedicated), "write dedicated: etcd or dedicated: control-plane")
		case h.Role != RoleServer:
			v.add(path, atKey, h.Name, "only a server can have a dedicated role", "remove dedicated, or make the host role: server")
		case first != nil && h.Name == first.Name:
			v.add(path, atKey, h.Name, "the first server cannot be dedicated: it initialises etcd (a dedicated control-plane server cannot be first) and k3strap reads the cluster through its API server (an etcd-only server has none)",
				"list a server without dedicated first")
		case servers < 2:
			v.add(path, atKey, h.Name, "dedicated roles need embedded etcd, which k3strap enables only with more than one server", "add servers, or remove dedicated")
		}
	}
}
