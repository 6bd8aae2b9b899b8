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
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
)

// clusterViewStep reads the cluster's view through one server's Kubernetes API (doctor):
// nodes, pods, events, DaemonSets, Deployments, Jobs and HelmCharts (facts.ClusterResources),
// one list request each over the SSH connection, no process started on the server. It tries
// the first server, then the other reachable servers until one answers (an agent has no
// admin kubeconfig).
//
// Reads: connections. Writes: s.doctor.view, viewHost, viewErr.
type clusterViewStep struct{}

func (clusterViewStep) Phase() events.Phase { return events.PhaseClusterView }

func (clusterViewStep) Summary() string {
	return "read nodes, pods, events, DaemonSets, Deployments, Jobs and HelmCharts through one server's Kubernetes API"
}

func (clusterViewStep) Run(ctx context.Context, s *session) error {
	ds := s.doctor
	em := s.in.emitter(events.PhaseClusterView)
	em.Started("reading the cluster through a server")
	var tries []*hostState
	if s.first != nil {
		tries = append(tries, s.first)
	}
	for _, hs := range s.hosts {
		if hs.host.Role == inventory.RoleServer && !slices.Contains(tries, hs) {
			tries = append(tries, hs)
		}
	}
	var why []string
	for _, hs := range tries {
		if hs.c() == nil || hs.connErr != nil {
			continue
		}
		a, err := hs.api(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			why = append(why, err.Error())
			continue
		}
		v := readClusterView(ctx, a)
		if ctx.Err() != nil {
			return ctx.Err()
		}
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
	ds.viewErr = "no server's Kubernetes API listed the nodes"
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

// readClusterView lists facts.ClusterResources through a; a resource that cannot be listed
// (a HelmChart CRD K3s was started without) leaves its error in the view's Errors.
func readClusterView(ctx context.Context, a *kube.API) facts.ClusterView {
	v := facts.NewClusterView()
	for _, res := range facts.ClusterResources {
		list, err := a.ListJSON(ctx, res)
		if err != nil {
			v.Errors[res] = err.Error()
			continue
		}
		v.Add(res, list)
	}
	return v
}
