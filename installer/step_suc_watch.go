// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/bringup"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/sucwatch"
	"github.com/k3strap/k3strap/templates/suc"
)

// sucWatchStep follows the Plans node by node until every selected node runs the version.
//
// Reads: the cluster's nodes, Plans, Jobs and pods. Writes: host results.
type sucWatchStep struct{}

func (sucWatchStep) Phase() events.Phase { return events.PhaseSUCWatch }

func (sucWatchStep) Summary() string {
	return "watch every node through job, cordon, drain, upgrade, Ready and uncordon; diagnose stalls (untolerated taint, image pull, PodDisruptionBudget, node not back); Ctrl-C leaves the upgrade running"
}

func (sucWatchStep) Preview(ctx context.Context, s *session) error {
	s.in.emitter(events.PhaseDryRun).Info(s.first.host.Name, "would watch the Plans until every node runs "+s.in.cluster.Spec.K3s.Version)
	return nil
}

func (sucWatchStep) Run(ctx context.Context, s *session) error {
	c := s.in.cluster
	version := c.Spec.K3s.Version
	em := s.in.emitter(events.PhaseSUCWatch)
	fs := s.first
	file := orFile(c.Source)
	watchHint := fmt.Sprintf("k3strap upgrade --watch -f %s", file)
	var names []string
	for _, hs := range s.hosts {
		if hs.selected {
			names = append(names, hs.host.Name)
		}
	}
	em.Started(fmt.Sprintf("watching system-upgrade-controller move %d nodes to %s (Ctrl-C stops watching; the upgrade goes on)", len(names), version))
	grace := s.in.opts.StallGrace
	interval := sucwatch.PollInterval(len(names))
	start := time.Now()
	var tr *sucwatch.Tracker
	var apiDownSince time.Time
	var lastWarn time.Time
	for {
		if ctx.Err() != nil {
			em.Info("", "stopped watching: the upgrade keeps running in the cluster (system-upgrade-controller applies the Plans on its own); watch it again with `"+watchHint+"`")
			return ctx.Err()
		}
		now := time.Now()
		var p *sucwatch.Poll
		err := s.retry(ctx, fs, "reading SUC's progress", func(ctx context.Context) error {
			return fs.withAPI(ctx, func(a *kube.API) (err error) {
				p, err = sucwatch.Read(ctx, a)
				return err
			})
		})
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			// The first server's own upgrade restarts its API; SSH trouble is retried too.
			if apiDownSince.IsZero() {
				apiDownSince = now
				em.Info(fs.host.Name, "the API does not answer (a server restarting for its upgrade?): "+firstLine(err)+"; still watching")
			}
			if (bringup.Deadline{Start: apiDownSince, Timeout: s.in.opts.Timeout}).Passed(now) {
				return s.hostFailure(fs, "watch", KindInstall, fmt.Errorf("the API has not answered for %s: %w", s.in.opts.Timeout, err))
			}
			_ = sleepCtx(ctx, interval)
			continue
		}
		apiDownSince = time.Time{}
		if tr == nil {
			var watched []string
			for _, n := range names {
				if p.Node(n) == nil {
					em.Warn(n, "not a node of the cluster: not watched")
					s.state(n).setResult(events.StatusSkipped, "not a node of the cluster")
					continue
				}
				if why := p.LeftOut(p.Node(n)); why != "" {
					em.Warn(n, why)
					s.state(n).setResult(events.StatusSkipped, "opted out of SUC upgrades: "+why)
					continue
				}
				watched = append(watched, n)
			}
			if !p.HasPlans() {
				return &Failure{Kind: KindInstall, Phase: events.PhaseSUCWatch, Info: events.ErrorInfo{
					Message: "no SUC Plans in namespace " + suc.Namespace + ": nothing to watch",
					Fix:     "start the upgrade with `k3strap upgrade --via suc -f " + file + "`"}}
			}
			tr = sucwatch.NewTracker(version, em, watched, now)
		}
		done := tr.Observe(p, now)
		if done == len(tr.Nodes()) {
			s.sucFinished(tr, version)
			em.Finished(events.StatusOK, fmt.Sprintf("%d nodes on %s in %s", len(tr.Nodes()), version, time.Since(start).Round(time.Second)))
			return nil
		}
		if quiet := now.Sub(tr.LastProgress()); quiet > grace {
			if f := s.sucStalled(ctx, p, tr, version, watchHint); f != nil {
				return f
			}
			if now.Sub(lastWarn) > grace {
				lastWarn = now
				pend := tr.Pending()
				em.Warn("", fmt.Sprintf("no node has progressed for %s; waiting for %d nodes (%s)", quiet.Round(time.Second), len(pend), abbreviate(pend, 10)))
			}
			if (bringup.Deadline{Start: tr.LastProgress(), Timeout: s.in.opts.Timeout}).Passed(now) {
				return &Failure{Kind: KindInstall, Phase: events.PhaseSUCWatch, Info: events.ErrorInfo{
					Message: fmt.Sprintf("no node has progressed for %s", quiet.Round(time.Second)),
					Fix:     "kubectl -n " + suc.Namespace + " get plans,jobs,pods shows what SUC is doing",
					Resume:  "the upgrade keeps running in the cluster; watch it again with `" + watchHint + "`"}}
			}
		}
		_ = sleepCtx(ctx, interval)
	}
}

// sucStalled diagnoses the pending nodes and returns the failure of the first with a firm
// diagnosis (nil when none has one; soft findings are emitted as warnings).
func (s *session) sucStalled(ctx context.Context, p *sucwatch.Poll, tr *sucwatch.Tracker, version, watchHint string) error {
	em := s.in.emitter(events.PhaseSUCWatch)
	for _, name := range tr.Pending() {
		st := sucwatch.DiagnoseNode(p, p.Node(name), version)
		if st == nil {
			continue
		}
		if st.NeedsDrainView {
			var pods []corev1.Pod
			var pdbs []policyv1.PodDisruptionBudget
			err := s.first.withAPI(ctx, func(a *kube.API) (err error) {
				pods, pdbs, err = sucwatch.DrainView(ctx, a, name)
				return err
			})
			if err != nil && ctx.Err() == nil {
				em.Debug(name, "reading the node's pods and PodDisruptionBudgets: "+err.Error())
			}
			sucwatch.DiagnoseDrain(st, name, pods, pdbs)
			if st.Diagnosis == checkid.SUCDrainSlow {
				continue // no budget to name yet: keep waiting
			}
		}
		s.sucFinished(tr, version)
		hs := s.state(name)
		info := events.ErrorInfo{Message: st.Message, Fix: st.Fix, Diagnosis: st.Diagnosis, Evidence: st.Evidence,
			Resume: "the upgrade keeps running in the cluster; once fixed, watch it again with `" + watchHint + "`"}
		if hs != nil {
			hs.setResult(events.StatusFailed, st.Message)
		}
		for _, other := range tr.Pending() {
			if other != name {
				s.state(other).setResultIfUnset(events.StatusSkipped, "upgrade still running in the cluster")
			}
		}
		return &Failure{Kind: KindInstall, Phase: events.PhaseSUCWatch, Host: name, Step: "watch", Info: info}
	}
	return nil
}

// sucFinished sets the result of every node the watch saw finish: upgraded, or already on
// the version before the watch started (a watch that stops on a stalled node reports the
// nodes done before it as what they are, not as unreached).
func (s *session) sucFinished(tr *sucwatch.Tracker, version string) {
	pending := map[string]bool{}
	for _, n := range tr.Pending() {
		pending[n] = true
	}
	for _, n := range tr.Nodes() {
		switch {
		case pending[n]:
		case tr.Unchanged(n):
			s.state(n).setResult(events.StatusUnchanged, "already on "+version)
		default:
			s.state(n).setResult(events.StatusChanged, "upgraded to "+version+" by system-upgrade-controller")
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// abbreviate lists at most n names and says how many more.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
