// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
)

// rancherWatch is one run of the Rancher step: the milestones reached so far and what it is
// waiting for, so that a timeout names both.
type rancherWatch struct {
	s       *session
	first   *hostState
	em      events.Emitter
	start   time.Time
	timeout time.Duration

	reached []string
	// waiting says what the step waits for now; evidence is the latest state behind it.
	waiting  string
	evidence []string
	// explain collects fresh evidence for a timeout report (nil: use evidence).
	explain func(ctx context.Context) []string
	// readErr is the last failure to read the cluster, when the latest look failed.
	readErr     error
	doneMessage string
}

// look runs fn with the first server's Kubernetes API; when the connection dropped it
// reconnects and tries again (session.retry), so a long supervision survives a flaky link.
func (w *rancherWatch) look(ctx context.Context, label string, fn func(kc *kube.API) error) error {
	return w.s.retry(ctx, w.first, label, func(ctx context.Context) error { return w.first.withAPI(ctx, fn) })
}

func (w *rancherWatch) milestone(name, detail string) {
	w.reached = append(w.reached, name)
	w.em.Milestone(w.first.host.Name, events.MilestoneInfo{Name: name, Seconds: time.Since(w.start).Seconds(), Detail: detail})
}

func (w *rancherWatch) reachedMilestone(name string) bool {
	for _, r := range w.reached {
		if r == name {
			return true
		}
	}
	return false
}

func (w *rancherWatch) last() string {
	if len(w.reached) == 0 {
		return "none yet"
	}
	return w.reached[len(w.reached)-1]
}

func (w *rancherWatch) wait(what string, evidence ...string) {
	w.waiting, w.evidence = what, evidence
}

func (w *rancherWatch) failure(msg, fix string, evidence []string) *Failure {
	return &Failure{Kind: KindInstall, Phase: events.PhaseRancher, Host: w.first.host.Name, Info: events.ErrorInfo{
		Message: msg, Fix: fix, Evidence: evidence,
		Resume: "fix the cause and re-run `k3strap apply`: the cluster stays as it is and the Rancher step starts again",
	}}
}

// timeoutFailure reports that rancher.timeout ran out, naming the last milestone reached and
// what was still awaited, with fresh evidence (ctx is the run's context, still alive).
func (w *rancherWatch) timeoutFailure(ctx context.Context) *Failure {
	ev := w.evidence
	if w.readErr != nil && ctx.Err() == nil {
		ev = append(append([]string(nil), ev...), "the last look at the cluster failed: "+w.readErr.Error())
	}
	if w.explain != nil {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if more := w.explain(ectx); len(more) > 0 {
			ev = append(append([]string(nil), ev...), more...)
		}
		cancel()
	}
	waiting := w.waiting
	if waiting == "" {
		waiting = "the first step"
	}
	return w.failure(fmt.Sprintf("Rancher was not ready within %s (rancher.timeout): last milestone reached: %s; still waiting for %s",
		w.timeout, w.last(), waiting), "look at the evidence below; raise spec.rancher.timeout if the cluster is only slow (image pulls on a slow link)", ev)
}

// pollInterval is how often the Rancher step looks at the cluster: twice the bring-up
// supervisor's period, between 0.5 s and 5 s.
func (w *rancherWatch) pollInterval() time.Duration {
	return min(max(2*w.s.in.opts.PollInterval, 500*time.Millisecond), 5*time.Second)
}

// sleep waits one poll interval; it returns ctx's error when ctx ends first.
func (w *rancherWatch) sleep(ctx context.Context) error {
	t := time.NewTimer(w.pollInterval())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

func deploymentState(d *appsv1.Deployment) string {
	return fmt.Sprintf("deployment %s/%s: %d/%d replicas available, %d ready", d.Namespace, d.Name, d.Status.AvailableReplicas, replicasOf(d), d.Status.ReadyReplicas)
}
