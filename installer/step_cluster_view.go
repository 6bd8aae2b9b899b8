// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// clusterViewStep reads the cluster's view through one server (doctor): nodes, pods, events,
// DaemonSets, Deployments, Jobs and HelmCharts in one SSH command (facts.DoctorClusterScript).
// It tries the first server, then the other reachable hosts (servers first) until one answers.
//
// Reads: connections. Writes: s.doctor.view, viewHost, viewErr.
type clusterViewStep struct{}

func (clusterViewStep) Phase() events.Phase { return events.PhaseClusterView }

func (clusterViewStep) Summary() string {
	return "read nodes, pods, events, DaemonSets, Deployments, Jobs and HelmCharts through one server (one command)"
}

func (clusterViewStep) Run(ctx context.Context, s *session) error {
	ds := s.doctor
	em := s.in.emitter(events.PhaseClusterView)
	em.Started("reading the cluster through a server")
	var tries []*hostState
	if s.first != nil {
		tries = append(tries, s.first)
	}
	for _, role := range []inventory.Role{inventory.RoleServer, inventory.RoleAgent} {
		for _, hs := range s.hosts {
			if hs.host.Role == role && !slices.Contains(tries, hs) {
				tries = append(tries, hs)
			}
		}
	}
	var why []string
	for _, hs := range tries {
		if hs.c() == nil || hs.connErr != nil {
			continue
		}
		res, err := hs.c().Run(ctx, remote.Script("read the cluster", facts.DoctorClusterScript).AsRoot())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			why = append(why, hs.host.Name+": "+err.Error())
			continue
		}
		v := facts.ParseClusterView(res.Stdout)
		if v.Nodes == nil {
			why = append(why, hs.host.Name+": "+orDefault(v.Errors["nodes"], "no node list"))
			continue
		}
		ds.view, ds.viewHost = v, hs
		em.Step(hs.host.Name, "cluster-view", events.StatusOK, fmt.Sprintf("%d nodes, %d pods, %d events, %d DaemonSets, %d HelmCharts",
			len(v.Nodes), len(v.Pods), len(v.Events), len(v.DaemonSets), len(v.HelmCharts)))
		em.Finished(events.StatusOK, "")
		return nil
	}
	ds.viewErr = "no server answered `k3s kubectl get nodes`"
	if len(why) > 0 {
		ds.viewErr += ": " + strings.Join(why, "; ")
	}
	em.Warn("", ds.viewErr)
	em.Finished(events.StatusFailed, ds.viewErr)
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
