// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// etcdCheckStep refuses etcd snapshots and restore when the cluster has no embedded etcd.
//
// Reads: the first server's connection. Writes: nothing (refuses a cluster without embedded etcd).
type etcdCheckStep struct{}

func (etcdCheckStep) Phase() events.Phase { return events.PhaseEtcdCheck }

func (etcdCheckStep) Summary() string {
	return "check that the first server runs embedded etcd (snapshots and restore need it)"
}

func (etcdCheckStep) Run(ctx context.Context, s *session) error {
	if s.first.c() == nil {
		return s.hostFailure(s.first, "connect", KindInstall, fmt.Errorf("the first server is unreachable: %w", s.first.connErr))
	}
	ok, err := s.hasEtcd(ctx)
	if err != nil {
		return s.hostFailure(s.first, "etcd check", KindInstall, err)
	}
	if !ok {
		return s.errNoEtcd()
	}
	s.in.emitter(events.PhaseEtcdCheck).Step(s.first.host.Name, "etcd", events.StatusOK, "embedded etcd")
	return nil
}

// hasEtcd reports whether the first server runs embedded etcd.
func (s *session) hasEtcd(ctx context.Context) (bool, error) {
	out, err := s.first.sh(ctx, "etcd check", etcdCheckScript, "", k3s.DirEtcd)
	return strings.TrimSpace(out) == "yes", err
}

// errNoEtcd is the refusal of etcd snapshots and restore on a cluster without embedded etcd.
func (s *session) errNoEtcd() error {
	return &Failure{Kind: KindInvalid, Phase: events.PhaseEtcdCheck, Host: s.first.host.Name, Info: events.ErrorInfo{
		Message: fmt.Sprintf("the cluster has no embedded etcd (%s is missing on %s): its datastore is SQLite — a single server without cluster-init — or an external datastore, and `k3s etcd-snapshot` and --cluster-reset only work with embedded etcd", k3s.DirEtcd, s.first.host.Name),
		Fix:     "back up a SQLite cluster by copying /var/lib/rancher/k3s/server/db/ and the token with K3s stopped (docs/day2.md); an external datastore is backed up with its own tools; a cluster with more than one server in the inventory runs embedded etcd",
	}}
}
