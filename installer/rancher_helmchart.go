// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/templates/rancher"
)

// chartSpec is the part of a HelmChart the Rancher step compares with what it rendered.
type chartSpec struct {
	Version       string `yaml:"version" json:"version"`
	ChartContent  string `yaml:"chartContent" json:"chartContent"`
	ValuesContent string `yaml:"valuesContent" json:"valuesContent"`
}

// chartRef is one HelmChart the install waits for.
type chartRef struct {
	name      string // HelmChart name = release
	milestone string
	want      *chartSpec // the rendered spec (nil when unknown)
}

// planned returns the file the first server's plan has at path, or nil.
func (hs *hostState) planned(path string) *plan.File {
	if hs.plan == nil {
		return nil
	}
	return hs.plan.File(path)
}

func (w *rancherWatch) planned(manifest string) *chartSpec {
	f := w.first.planned(plan.RancherManifestPath(manifest))
	if f == nil {
		return nil
	}
	var doc struct {
		Spec chartSpec `yaml:"spec"`
	}
	if err := yaml.Unmarshal(f.Content, &doc); err != nil {
		return nil
	}
	return &doc.Spec
}

// install supervises the Rancher install: HelmChart install jobs finished (a failed
// one reports the job's log tail) → deployment cattle-system/rancher available → the Rancher
// URL answers.
func (w *rancherWatch) install(ctx context.Context) error {
	c := w.s.in.cluster
	in := c.Spec.Rancher.Install
	host := c.RancherHostname()
	url := "https://" + host
	replicas := fmt.Sprintf("%d replicas", c.RancherReplicas())
	if c.RancherReplicas() == 1 {
		replicas = "1 replica"
	}
	w.em.Started(fmt.Sprintf("installing Rancher %s at %s (%s)", in.RancherVersion(), url, replicas))
	if err := w.bootstrapPassword(ctx); err != nil {
		return err
	}
	var charts []chartRef
	if in.EffectiveTLSSource().NeedsCertManager() {
		charts = append(charts, chartRef{rancher.CertManagerRelease, MilestoneCertManagerInstalled, w.planned(plan.ManifestCertManager)})
	}
	charts = append(charts, chartRef{rancher.RancherRelease, MilestoneRancherInstalled, w.planned(plan.ManifestRancher)})
	w.explain = func(ectx context.Context) []string { return w.explainInstall(ectx, charts) }
	for {
		var objs []kube.Object
		var kc *kube.API
		err := w.look(ctx, "reading Rancher's install state", func(a *kube.API) (err error) {
			kc = a
			objs, err = a.List(ctx, "helmcharts.helm.cattle.io,jobs.batch,deployments.apps", "", "")
			return err
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// The API may be briefly away (a K3s restart); the next look tries again.
			w.readErr = err
		default:
			w.readErr = nil
			done, err := w.installStep(ctx, kc, objs, charts, host)
			if err != nil || done {
				return err
			}
		}
		if err := w.sleep(ctx); err != nil {
			return err
		}
	}
}

// installStep looks once; it reports done when the URL answered.
func (w *rancherWatch) installStep(ctx context.Context, kc *kube.API, objs []kube.Object, charts []chartRef, host string) (bool, error) {
	for _, ch := range charts {
		if w.reachedMilestone(ch.milestone) {
			continue
		}
		ok, err := w.chartInstalled(ctx, kc, objs, ch)
		if err != nil || !ok {
			return false, err
		}
	}
	if !w.reachedMilestone(MilestoneRancherAvailable) {
		o := kube.Find(objs, "Deployment", rancher.RancherNamespace, rancher.RancherRelease)
		if o == nil {
			w.wait("deployment cattle-system/rancher to be created by the rancher chart")
			return false, nil
		}
		var d appsv1.Deployment
		if err := o.Decode(&d); err != nil {
			return false, err
		}
		if !kube.DeploymentAvailable(&d) {
			w.wait("deployment cattle-system/rancher to become available", deploymentState(&d))
			return false, nil
		}
		w.milestone(MilestoneRancherAvailable, fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, replicasOf(&d)))
	}
	detail, err := w.probeURL(ctx, host)
	if err != nil {
		w.wait("https://"+host+" to answer", "GET https://"+host+"/ping: "+err.Error())
		return false, nil
	}
	w.milestone(MilestoneRancherAnswers, detail)
	w.s.out.rancherURL = "https://" + host
	w.doneMessage = "Rancher answers at https://" + host
	return true, nil
}

// chartInstalled checks one HelmChart: applied by K3s's deploy controller with the spec k3strap
// rendered, and its helm-install job complete. A failed job is a Failure with its log tail.
func (w *rancherWatch) chartInstalled(ctx context.Context, kc *kube.API, objs []kube.Object, ch chartRef) (bool, error) {
	manifest := plan.RancherManifestPath(ch.name + ".yaml")
	o := kube.Find(objs, "HelmChart", rancher.HelmChartNamespace, ch.name)
	if o == nil {
		w.wait(fmt.Sprintf("K3s to apply %s (HelmChart kube-system/%s)", manifest, ch.name))
		return false, nil
	}
	if ch.want != nil {
		var got struct {
			Spec chartSpec `json:"spec"`
		}
		if err := o.Decode(&got); err != nil {
			return false, err
		}
		if got.Spec != *ch.want {
			w.wait(fmt.Sprintf("K3s to apply the changed %s (HelmChart kube-system/%s still has the previous spec)", manifest, ch.name))
			return false, nil
		}
	}
	jobName := "helm-install-" + ch.name
	jo := kube.Find(objs, "Job", rancher.HelmChartNamespace, jobName)
	if jo == nil {
		w.wait(fmt.Sprintf("K3s's helm-controller to start job kube-system/%s", jobName))
		return false, nil
	}
	var job batchv1.Job
	if err := jo.Decode(&job); err != nil {
		return false, err
	}
	state, why := kube.JobStatus(&job)
	switch state {
	case kube.JobFailed:
		ev := []string{fmt.Sprintf("job kube-system/%s: %s", jobName, why)}
		ev = append(ev, w.jobLog(ctx, kc, jobName)...)
		return false, w.failure(fmt.Sprintf("the helm install of %s failed (job kube-system/%s)", ch.name, jobName),
			fmt.Sprintf("read the job's log above (all of it: k3s kubectl -n kube-system logs job/%s); correct the chart version, repository or values in spec.rancher.install", jobName), ev)
	case kube.JobComplete:
		w.milestone(ch.milestone, fmt.Sprintf("job kube-system/%s complete", jobName))
		return true, nil
	}
	w.wait(fmt.Sprintf("the helm install of %s (job kube-system/%s, %d active, %d failed attempts)", ch.name, jobName, job.Status.Active, job.Status.Failed))
	return false, nil
}
