package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
)

// etcdCheckStep refuses etcd snapshots and restore when the cluster has no embedded etcd.
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
