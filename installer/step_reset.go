// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// resetStep uninstalls K3s from the selected hosts (every host when --host was not given):
// agents first, in parallel; then servers one at a time, the first server last. When the
// first server stays, it holds the run lock meanwhile and the reset hosts' Node objects are
// deleted from the cluster. Afterwards `apply` works on those hosts again. The command layer
// asks for confirmation first.
//
// Reads: hostState.facts, selected. Writes: host results; the reset hosts' Node objects.
type resetStep struct{}

func (resetStep) Phase() events.Phase { return events.PhaseReset }

func (resetStep) Summary() string {
	return "uninstall K3s: agents in parallel, then servers one at a time, the first server last; delete their Node objects"
}

func (resetStep) Run(ctx context.Context, s *session) error { return s.reset(ctx) }

// Preview names the hosts the step would uninstall K3s from, in order.
func (resetStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseReset)
	for _, hs := range s.hosts {
		if hs.selected {
			em.Info(hs.host.Name, "would uninstall K3s (k3s-uninstall.sh / k3s-agent-uninstall.sh) and remove k3strap's files")
		}
	}
	return ctx.Err()
}

func (s *session) reset(ctx context.Context) error {
	first := s.in.cluster.FirstServer()
	resetAll := len(s.in.opts.Hosts) == 0
	selected := map[string]bool{}
	for _, n := range s.in.opts.Hosts {
		selected[n] = true
	}
	var agents, servers []*hostState
	var fs *hostState
	for _, hs := range s.hosts {
		if !resetAll && !selected[hs.host.Name] {
			continue
		}
		switch {
		case first != nil && hs.host.Name == first.Name:
			fs = hs
		case hs.host.Role == inventory.RoleAgent:
			agents = append(agents, hs)
		default:
			servers = append(servers, hs)
		}
	}
	var keeper *hostState // the first server, when it stays and runs K3s
	if first != nil && fs == nil {
		if st := s.state(first.Name); st.facts != nil && st.facts.K3s.Installed() {
			keeper = st
			st.setResult(events.StatusUnchanged, "kept (not selected)")
		}
	}
	if keeper != nil {
		lk, err := s.lock(ctx, keeper, "reset")
		if err != nil {
			return err
		}
		defer lk.Release()
	}
	var (
		mu     sync.Mutex
		failed []string
	)
	one := func(ctx context.Context, hs *hostState) {
		if err := s.resetOne(ctx, hs, keeper); err != nil {
			mu.Lock()
			failed = append(failed, hs.host.Name)
			mu.Unlock()
		}
	}
	s.each(ctx, agents, one)
	for _, hs := range servers {
		one(ctx, hs)
	}
	if fs != nil {
		one(ctx, fs)
	}
	if len(failed) > 0 {
		return &Failure{Kind: KindInstall, Phase: events.PhaseReset, Info: events.ErrorInfo{
			Message: "reset failed on " + strings.Join(failed, ", "),
			Fix:     "see each host's error above",
			Resume:  "re-run `k3strap reset` for those hosts",
		}}
	}
	return nil
}

func (s *session) resetOne(ctx context.Context, hs *hostState, keeper *hostState) error {
	em := s.in.emitter(events.PhaseReset)
	if hs.connErr != nil || hs.c() == nil {
		hs.setResult(events.StatusFailed, "unreachable: "+errText(hs.connErr))
		return fmt.Errorf("unreachable")
	}
	res, err := hs.c().Check(ctx, remoteReset())
	if err != nil {
		hs.setResult(events.StatusFailed, "uninstall: "+err.Error())
		em.Fail(hs.host.Name, "reset", events.ErrorInfo{Message: err.Error(), Resume: "re-run `k3strap reset --host " + hs.host.Name + "`"})
		return err
	}
	if _, others, ok := strings.Cut(string(res.Stdout), "@k3strap kept"); ok {
		units := strings.Join(strings.Fields(others), ", ")
		msg := "the uninstall script left " + k3s.PathBinary + " and the data directory in place because other unit files match k3s*.service: " + units
		hs.setResult(events.StatusFailed, msg)
		em.Fail(hs.host.Name, "reset", events.ErrorInfo{Message: msg,
			Fix:    "remove or rename those unit files if they are not a K3s service (K3s's uninstall script treats every k3s*.service as one)",
			Resume: "re-run `k3strap reset --host " + hs.host.Name + "`"})
		return fmt.Errorf("%s", msg)
	}
	if strings.Contains(string(res.Stdout), "@k3strap nothing") {
		hs.setResult(events.StatusUnchanged, "no K3s installed")
		em.Step(hs.host.Name, "reset", events.StatusUnchanged, "no K3s installed")
	} else {
		hs.setResult(events.StatusChanged, "K3s uninstalled")
		em.Step(hs.host.Name, "reset", events.StatusChanged, "K3s uninstalled, k3strap's files removed")
	}
	if keeper != nil {
		if err := keeper.withAPI(ctx, func(a *kube.API) error { return a.DeleteNode(ctx, hs.host.Name, nodeDeleteTimeout) }); err != nil {
			em.Warn(hs.host.Name, "could not delete its Node object: "+err.Error())
		} else {
			em.Step(hs.host.Name, "node", events.StatusChanged, "Node object deleted from the cluster")
		}
	}
	return nil
}
