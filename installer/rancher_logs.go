// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/templates/rancher"
)

func (w *rancherWatch) jobLog(ctx context.Context, kc *kube.API, job string) []string {
	out, err := kc.Logs(ctx, rancher.HelmChartNamespace, "job/"+job, 15)
	if err != nil || strings.TrimSpace(out) == "" {
		return nil
	}
	var ev []string
	for _, l := range strings.Split(out, "\n") {
		ev = append(ev, "log: "+l)
	}
	return ev
}

// explainInstall gathers evidence for a timeout: the log tail of an unfinished install job and
// the pods of cert-manager and cattle-system that do not run (untolerated taints, image pulls).
func (w *rancherWatch) explainInstall(ctx context.Context, charts []chartRef) []string {
	// One look (reconnecting when the connection dropped) to be sure the API answers.
	var kc *kube.API
	if err := w.look(ctx, "explaining the Rancher timeout", func(a *kube.API) error {
		kc = a
		return a.Ready(ctx)
	}); err != nil {
		return []string{"the cluster's API does not answer on " + w.first.host.Name + ": " + err.Error()}
	}
	var ev []string
	for _, ch := range charts {
		if !w.reachedMilestone(ch.milestone) {
			job := "helm-install-" + ch.name
			if pods, err := kc.ListPods(ctx, rancher.HelmChartNamespace, ""); err == nil {
				var mine []corev1.Pod
				for _, p := range pods {
					if p.Labels["job-name"] == job || p.Labels["batch.kubernetes.io/job-name"] == job {
						mine = append(mine, p)
					}
				}
				if probs := kube.PodProblems(mine); len(probs) > 0 {
					ev = append(ev, probs...)
				} else if len(mine) > 0 {
					ev = append(ev, fmt.Sprintf("pod %s/%s of job %s is %s (helm is still installing: a slow chart download or image pull?)",
						mine[0].Namespace, mine[0].Name, job, mine[0].Status.Phase))
				}
			}
			ev = append(ev, w.jobLog(ctx, kc, job)...)
			break
		}
	}
	for _, ns := range []string{rancher.CertManagerNamespace, rancher.RancherNamespace} {
		pods, err := kc.ListPods(ctx, ns, "")
		if err == nil {
			ev = append(ev, kube.PodProblems(pods)...)
		}
	}
	return ev
}
