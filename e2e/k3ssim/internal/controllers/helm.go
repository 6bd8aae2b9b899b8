// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// helmChart is the part of a helm.cattle.io/v1 HelmChart the simulator reads.
type helmChart struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Chart           string         `json:"chart"`
		Repo            string         `json:"repo,omitempty"`
		Version         string         `json:"version,omitempty"`
		TargetNamespace string         `json:"targetNamespace,omitempty"`
		CreateNamespace bool           `json:"createNamespace,omitempty"`
		Set             map[string]any `json:"set,omitempty"`
		ValuesContent   string         `json:"valuesContent,omitempty"`
		Bootstrap       bool           `json:"bootstrap,omitempty"`
		ChartContent    string         `json:"chartContent,omitempty"`
	} `json:"spec"`
	Status map[string]any `json:"status,omitempty"`
}

const (
	labelChart     = "helmcharts.helm.cattle.io/chart"
	annConfigHash  = "helmcharts.helm.cattle.io/configHash"
	annReleaseName = "meta.helm.sh/release-name"
	annReleaseNS   = "meta.helm.sh/release-namespace"
	releaseAux     = "helm/releases" // map "ns/name" -> config hash of the installed release
)

// helmJobTolerations are the tolerations helm-controller gives install jobs
// (k3s-io/helm-controller v0.17.7 pkg/controllers/chart/chart.go job(); K3s sets no
// JobTolerations): only a bootstrap chart's job tolerates anything — the not-ready,
// network-unavailable and uninitialized NoSchedule taints, CriticalAddonsOnly, etcd NoExecute
// and control-plane NoSchedule. Seen on the real K3s v1.36.3: a chart's Job has none.
func helmJobTolerations(bootstrap bool) []corev1.Toleration {
	if !bootstrap {
		return nil
	}
	exists := corev1.TolerationOpExists
	return []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/network-unavailable", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "CriticalAddonsOnly", Operator: exists},
		{Key: "node-role.kubernetes.io/etcd", Operator: exists, Effect: corev1.TaintEffectNoExecute},
		{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
	}
}

func chartHash(hc *helmChart) string {
	b, _ := json.Marshal(hc.Spec)
	sum := sha256.Sum256(b)
	return "SHA256=" + strings.ToUpper(fmt.Sprintf("%x", sum[:]))
}

func (hc *helmChart) target() string {
	if hc.Spec.TargetNamespace != "" {
		return hc.Spec.TargetNamespace
	}
	return hc.Namespace
}

// helmCharts is K3s's helm-controller: one install Job per HelmChart (re-created when the
// chart spec changes); when the Job succeeds, the release's workloads are created.
func (c *Controller) helmCharts() {
	charts, err := store.ListTyped[helmChart](c.cfg.Store, store.HelmCharts, "")
	if err != nil {
		return
	}
	live, targets := map[string]bool{}, map[string]bool{}
	for i := range charts {
		hc := &charts[i]
		live[hc.Namespace+"/"+hc.Name] = true
		targets[hc.target()+"/"+hc.Name] = true
		jobName := "helm-install-" + hc.Name
		hash := chartHash(hc)
		job, err := store.GetTyped[batchv1.Job](c.cfg.Store, store.Jobs, hc.Namespace, jobName)
		if err == nil && job.Annotations[annConfigHash] != hash {
			_, _ = c.cfg.Store.Delete(store.Jobs, hc.Namespace, jobName)
			job, err = nil, fmt.Errorf("outdated")
		}
		if err != nil {
			c.createHelmJob(hc, jobName, hash)
		} else if jobFinished(job) && job.Status.Succeeded > 0 {
			c.installRelease(hc, hash)
		}
		if s, _ := hc.Status["jobName"].(string); s != jobName {
			_, _ = c.cfg.Store.Mutate(store.HelmCharts, hc.Namespace, hc.Name, func(obj map[string]any) (bool, error) {
				st, _ := obj["status"].(map[string]any)
				if st == nil {
					st = map[string]any{}
				}
				st["jobName"] = jobName
				obj["status"] = st
				return true, nil
			})
		}
	}
	c.uninstallReleases(live, targets)
}

func (c *Controller) createHelmJob(hc *helmChart, jobName, hash string) {
	backoff := int32(1000)
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{Kind: "Job", APIVersion: "batch/v1"}}
	job.Name, job.Namespace = jobName, hc.Namespace
	job.Labels = map[string]string{labelChart: hc.Name}
	job.Annotations = map[string]string{annConfigHash: hash}
	t := true
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "helm.cattle.io/v1", Kind: "HelmChart", Name: hc.Name, UID: hc.UID, Controller: &t}}
	job.Spec.BackoffLimit = &backoff
	tmpl := &job.Spec.Template
	tmpl.Labels = map[string]string{labelChart: hc.Name}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	tmpl.Spec.ServiceAccountName = "helm-" + hc.Name
	tmpl.Spec.Tolerations = helmJobTolerations(hc.Spec.Bootstrap)
	tmpl.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	if hc.Spec.Bootstrap {
		tmpl.Spec.HostNetwork = true
		tmpl.Spec.NodeSelector["node-role.kubernetes.io/control-plane"] = "true"
	}
	tmpl.Spec.Containers = []corev1.Container{{Name: "helm", Image: "rancher/klipper-helm:v0.9.8-build20250709",
		Args: []string{"install"}, Env: []corev1.EnvVar{{Name: "NAME", Value: hc.Name}, {Name: "VERSION", Value: hc.Spec.Version},
			{Name: "REPO", Value: hc.Spec.Repo}, {Name: "TARGET_NAMESPACE", Value: hc.target()}, {Name: "CHART", Value: hc.Spec.Chart}}}}
	_, _ = store.CreateTyped(c.cfg.Store, store.Jobs, job.Namespace, job)
}

// helmJobLog returns whether the install of chart fails (knob failHelmCharts) and the tail
// of the helm install output the job's pod shows.
func (c *Controller) helmJobLog(ns, chart string) (bool, string) {
	hc, err := store.GetTyped[helmChart](c.cfg.Store, store.HelmCharts, ns, chart)
	target, chartRef := ns, chart
	if err == nil {
		target, chartRef = hc.target(), hc.Spec.Chart
	}
	head := fmt.Sprintf("if [[ ${KUBERNETES_SERVICE_HOST} =~ .*:.* ]]; then\n    KUBERNETES_SERVICE_HOST=\"[${KUBERNETES_SERVICE_HOST}]\"\nfi\n"+
		"+ helm_v3 install --namespace %s %s %s\n", target, chart, chartRef)
	if c.cfg.Knobs.FailsHelmChart(chart) {
		return true, head + fmt.Sprintf("Error: INSTALLATION FAILED: failed pre-install: timed out waiting for the condition (simulated failure of HelmChart %s/%s, k3ssim knob failHelmCharts)\n", ns, chart)
	}
	return false, head + fmt.Sprintf("NAME: %s\nLAST DEPLOYED: %s\nNAMESPACE: %s\nSTATUS: deployed\nREVISION: 1\nTEST SUITE: None\n",
		chart, time.Now().UTC().Format("Mon Jan _2 15:04:05 2006"), target)
}

// values merges valuesContent and spec.set (dotted keys) into one map.
func (hc *helmChart) values() map[string]any {
	v := map[string]any{}
	if hc.Spec.ValuesContent != "" {
		_ = yaml.Unmarshal([]byte(hc.Spec.ValuesContent), &v)
	}
	for k, val := range hc.Spec.Set {
		parts := strings.Split(k, ".")
		m := v
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = val
	}
	return v
}

type release struct {
	name        string
	replicas    int32
	tolerations []corev1.Toleration
}

func (c *Controller) installRelease(hc *helmChart, hash string) {
	key := hc.Namespace + "/" + hc.Name
	installed := map[string]string{}
	if _, err := c.cfg.Store.GetAux(releaseAux, &installed); err == nil && installed[key] == hash {
		return
	}
	vals := hc.values()
	replicas := int32(1)
	for _, k := range []string{"replicas", "replicaCount"} {
		if r, ok := vals[k]; ok {
			if n, err := strconv.Atoi(fmt.Sprint(r)); err == nil {
				replicas = int32(n)
			}
		}
	}
	var tols []corev1.Toleration
	if t, ok := vals["tolerations"]; ok {
		b, _ := json.Marshal(t)
		_ = json.Unmarshal(b, &tols)
	}
	var nodeSelector map[string]string
	if ns, ok := vals["nodeSelector"]; ok {
		b, _ := json.Marshal(ns)
		_ = json.Unmarshal(b, &nodeSelector)
	}
	target := hc.target()
	if hc.Spec.CreateNamespace {
		c.ensureNamespace(target)
	}
	exists := corev1.TolerationOpExists
	var rels []release
	chart := strings.ToLower(hc.Spec.Chart)
	switch {
	case hc.Name == "traefik-crd" || strings.HasSuffix(hc.Name, "-crd"):
	case hc.Name == "traefik":
		rels = append(rels, release{name: "traefik", replicas: 1, tolerations: append([]corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: exists},
			{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node-role.kubernetes.io/master", Operator: exists, Effect: corev1.TaintEffectNoSchedule}}, tols...)})
	case strings.Contains(chart, "cert-manager") || hc.Name == "cert-manager":
		for _, n := range []string{hc.Name, hc.Name + "-cainjector", hc.Name + "-webhook"} {
			rels = append(rels, release{name: n, replicas: 1, tolerations: tols})
		}
	case hc.Name == "rancher" || strings.HasSuffix(chart, "rancher"):
		if _, set := vals["replicas"]; !set {
			replicas = 3
		}
		rels = append(rels, release{name: hc.Name, replicas: replicas, tolerations: tols})
	default:
		rels = append(rels, release{name: hc.Name, replicas: replicas, tolerations: tols})
	}
	for _, r := range rels {
		c.applyReleaseDeployment(hc, target, r, nodeSelector)
	}
	if hc.Name == "rancher" || strings.HasSuffix(chart, "rancher") {
		c.applyRancherIngress(hc, target, vals)
	}
	if hc.Name == "traefik" && !c.disabled("servicelb") && c.cfg.EmbeddedCCM {
		c.ensureSvclb(target)
	}
	_ = c.cfg.Store.UpdateAux(releaseAux, &installed, func() error {
		installed[key] = hash
		return nil
	})
}

func (c *Controller) applyReleaseDeployment(hc *helmChart, ns string, r release, nodeSelector map[string]string) {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}}
	d.Name, d.Namespace = r.name, ns
	d.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/name": r.name,
		"app.kubernetes.io/instance": hc.Name, "app": r.name}
	d.Annotations = map[string]string{annReleaseName: hc.Name, annReleaseNS: ns}
	rep := r.replicas
	d.Spec.Replicas = &rep
	sel := map[string]string{"app.kubernetes.io/name": r.name, "app.kubernetes.io/instance": hc.Name}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	d.Spec.Template.Labels = sel
	d.Spec.Template.Spec.Tolerations = r.tolerations
	d.Spec.Template.Spec.NodeSelector = nodeSelector
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: r.name, Image: imageFor(hc, r.name)}}
	if hc.Namespace == "kube-system" && hc.Name == "traefik" {
		d.Spec.Template.Spec.PriorityClassName = "system-cluster-critical"
	}
	if _, err := store.GetTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, ns, r.name); err == nil {
		_, _ = store.MutateTyped(c.cfg.Store, store.Deployments, ns, r.name, func(x *appsv1.Deployment) bool {
			x.Labels, x.Annotations, x.Spec = d.Labels, d.Annotations, d.Spec
			return true
		})
		return
	}
	_, _ = store.CreateTyped(c.cfg.Store, store.Deployments, ns, d)
}

func imageFor(hc *helmChart, name string) string {
	v := hc.Spec.Version
	if v == "" {
		v = "latest"
	}
	return "docker.io/library/" + name + ":" + v
}

// uninstallReleases removes the workloads of HelmCharts that were deleted (as the helm
// delete job would) and forgets their installed state.
func (c *Controller) uninstallReleases(live, targets map[string]bool) {
	installed := map[string]string{}
	if ok, _ := c.cfg.Store.GetAux(releaseAux, &installed); !ok {
		return
	}
	stale := false
	for k := range installed {
		if !live[k] {
			stale = true
		}
	}
	if !stale {
		return
	}
	deps, err := store.ListTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, "")
	if err != nil {
		return
	}
	for _, d := range deps {
		rel := d.Annotations[annReleaseName]
		if rel == "" || d.Labels["app.kubernetes.io/managed-by"] != "Helm" || targets[d.Namespace+"/"+rel] {
			continue
		}
		_, _ = c.cfg.Store.Delete(store.Deployments, d.Namespace, d.Name)
	}
	_ = c.cfg.Store.UpdateAux(releaseAux, &installed, func() error {
		for k := range installed {
			if !live[k] {
				delete(installed, k)
			}
		}
		return nil
	})
}

func (c *Controller) ensureNamespace(name string) {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}}
	ns.Name = name
	ns.Labels = map[string]string{"kubernetes.io/metadata.name": name}
	ns.Status.Phase = corev1.NamespaceActive
	_, _ = store.CreateTyped(c.cfg.Store, store.Namespaces, "", ns)
}
