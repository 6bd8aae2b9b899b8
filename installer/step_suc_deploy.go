// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/suc"
)

// sucOptions renders the inventory into what templates/suc needs.
func (s *session) sucOptions() (suc.Options, error) {
	c := s.in.cluster
	set := c.SUC()
	o := suc.Options{K3sVersion: c.Spec.K3s.Version, ControllerImage: set.ControllerImage,
		UpgradeImage: set.UpgradeImage, KubectlImage: set.KubectlImage}
	if set.DrainTimeout != "" {
		d, err := time.ParseDuration(set.DrainTimeout)
		if err != nil {
			return o, err
		}
		o.DrainTimeout = d
	}
	if set.Manifest != "" {
		b, err := os.ReadFile(c.ResolvePath(set.Manifest))
		if err != nil {
			return o, fmt.Errorf("reading spec.k3s.upgrade.suc.manifest: %w", err)
		}
		o.ControllerManifest = b
	}
	agents := 0
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if h.Role == inventory.RoleAgent {
			agents++
		}
		for _, t := range c.HostTaints(h) {
			o.Tolerations = append(o.Tolerations, suc.TolerationFor(t.Key, t.Value, string(t.Effect)))
		}
	}
	// As the SSH path's batches (step_join_agents.go): the percentage rounded down, at least 1.
	o.AgentConcurrency = max(1, agents*s.in.opts.UpgradeBatchPercent/100)
	return o, nil
}

// sucDeployStep applies SUC and the Plans through the first server's kubectl.
//
// Reads: the inventory (version, taints, spec.k3s.upgrade.suc). Writes: SUC and its Plans in the
// cluster.
type sucDeployStep struct{}

func (sucDeployStep) Phase() events.Phase { return events.PhaseSUCDeploy }

func (sucDeployStep) Summary() string {
	return "deploy system-upgrade-controller " + suc.Version + " and apply the k3s-server and k3s-agent Plans (tolerating every declared taint) through the first server's Kubernetes API"
}

func (sucDeployStep) render(s *session) (ctl, plans []byte, o suc.Options, err error) {
	o, err = s.sucOptions()
	if err != nil {
		return nil, nil, o, &Failure{Kind: KindInvalid, Phase: events.PhaseSUCDeploy, Info: events.ErrorInfo{Message: err.Error(), Fix: "correct spec.k3s.upgrade.suc"}}
	}
	plans, err = suc.Plans(o)
	if err != nil {
		return nil, nil, o, &Failure{Kind: KindInvalid, Phase: events.PhaseSUCDeploy, Info: events.ErrorInfo{Message: err.Error(), Fix: "set spec.k3s.version to the release to upgrade to"}}
	}
	return suc.ControllerManifests(o), plans, o, nil
}

func (st sucDeployStep) Preview(ctx context.Context, s *session) error {
	_, plans, o, err := st.render(s)
	if err != nil {
		return err
	}
	em := s.in.emitter(events.PhaseDryRun)
	em.Emit(events.Event{Type: events.Info, Host: s.first.host.Name, Step: "suc",
		Message: fmt.Sprintf("would apply system-upgrade-controller %s and the Plans %s (concurrency 1) and %s (concurrency %d) moving every node to %s",
			suc.Version, suc.ServerPlan, suc.AgentPlan, o.AgentConcurrency, o.K3sVersion),
		Diff: string(plans)})
	return nil
}

func (st sucDeployStep) Run(ctx context.Context, s *session) error {
	ctl, plans, o, err := st.render(s)
	if err != nil {
		return err
	}
	fs := s.first
	em := s.in.emitter(events.PhaseSUCDeploy)
	em.Started(fmt.Sprintf("system-upgrade-controller %s and Plans to %s (agents %d at a time)", suc.Version, o.K3sVersion, o.AgentConcurrency))
	apply := func(what string, body []byte, step string) error {
		var out string
		err := s.retry(ctx, fs, "applying "+what, func(ctx context.Context) error {
			// A Plan right after its CRD may meet an API that does not serve the kind yet.
			for i := 0; ; i++ {
				err := fs.withAPI(ctx, func(a *kube.API) (err error) {
					out, err = a.Apply(ctx, body)
					return err
				})
				if err == nil || i >= 20 || !(meta.IsNoMatchError(err) || kube.IsAPIDown(err)) {
					return err
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
				}
			}
		})
		if err != nil {
			return s.hostFailure(fs, step, KindInstall, fmt.Errorf("applying %s: %w", what, err))
		}
		status := events.StatusUnchanged
		var changed []string
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasSuffix(l, " unchanged") {
				status = events.StatusChanged
				changed = append(changed, l)
			}
		}
		msg := what + " unchanged"
		if status == events.StatusChanged {
			msg = what + ": " + strings.Join(changed, "; ")
		}
		em.Step(fs.host.Name, step, status, msg)
		return nil
	}
	if err := apply("system-upgrade-controller "+suc.Version, ctl, "controller"); err != nil {
		return err
	}
	if err := apply("Plans "+suc.ServerPlan+", "+suc.AgentPlan, plans, "plans"); err != nil {
		return err
	}
	em.Finished(events.StatusOK, "SUC upgrades the nodes now; k3strap watches")
	return nil
}
