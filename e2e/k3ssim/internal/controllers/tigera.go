// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// What the simulated tigera operator watches and creates (Calico's operator, docs/cni.md).
const (
	tigeraNamespace = "tigera-operator"
	tigeraOperator  = "tigera-operator"
	calicoNamespace = "calico-system"
)

var (
	installations  = store.GR{Group: "operator.tigera.io", Resource: "installations"}
	tigeraStatuses = store.Resource{Group: "operator.tigera.io", Version: "v1", Resource: "tigerastatuses", Singular: "tigerastatus",
		Kind: "TigeraStatus", Namespaced: false, HasStatus: true}
)

// installationSpec is the part of an Installation the simulated operator reads.
type installationSpec struct {
	CalicoNodeDaemonSet *struct {
		Spec struct {
			Template struct {
				Spec struct {
					NodeSelector map[string]string   `json:"nodeSelector"`
					Affinity     *corev1.Affinity    `json:"affinity"`
					Tolerations  []corev1.Toleration `json:"tolerations"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	} `json:"calicoNodeDaemonSet"`
	ControlPlaneTolerations []corev1.Toleration `json:"controlPlaneTolerations"`
}

// calicoNodeDefaultTolerations are calico-node's defaults: set tolerations replace them.
func calicoNodeDefaultTolerations() []corev1.Toleration {
	exists := corev1.TolerationOpExists
	return []corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: exists},
		{Operator: exists, Effect: corev1.TaintEffectNoSchedule},
		{Operator: exists, Effect: corev1.TaintEffectNoExecute},
	}
}

// tigera simulates the tigera operator's reaction to an Installation (no CNI, no Felix): once
// the operator Deployment tigera-operator/tigera-operator has a running pod and Installation
// "default" exists, it keeps DaemonSet calico-system/calico-node (host network,
// system-node-critical, nodeSelector kubernetes.io/os=linux plus the Installation's, the
// Installation's tolerations and affinity REPLACING the defaults CriticalAddonsOnly /
// NoSchedule / NoExecute Exists) and Deployment calico-system/calico-kube-controllers
// (CriticalAddonsOnly and the control-plane / master NoSchedule tolerations plus
// spec.controlPlaneTolerations), and reports TigeraStatus "calico" Available once every
// scheduled calico-node pod runs (the operator waits for all of them, projectcalico/calico#9540).
func (c *Controller) tigera() {
	raw, err := c.cfg.Store.Get(installations, "", "default")
	if err != nil {
		return
	}
	op, err := store.GetTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, tigeraNamespace, tigeraOperator)
	if err != nil || op.Status.AvailableReplicas < 1 {
		return
	}
	var inst struct {
		Spec installationSpec `json:"spec"`
	}
	if err := json.Unmarshal(raw, &inst); err != nil {
		return
	}
	c.ensureNamespace(calicoNamespace)

	labels := map[string]string{"k8s-app": "calico-node"}
	ds := &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{Kind: "DaemonSet", APIVersion: "apps/v1"}}
	ds.Name, ds.Namespace, ds.Labels = "calico-node", calicoNamespace, labels
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	ds.Spec.Template.Labels = labels
	ps := &ds.Spec.Template.Spec
	ps.HostNetwork, ps.PriorityClassName, ps.ServiceAccountName = true, "system-node-critical", "calico-node"
	ps.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	ps.Tolerations = calicoNodeDefaultTolerations()
	if o := inst.Spec.CalicoNodeDaemonSet; o != nil {
		t := o.Spec.Template.Spec
		for k, v := range t.NodeSelector {
			ps.NodeSelector[k] = v
		}
		if t.Tolerations != nil {
			ps.Tolerations = t.Tolerations
		}
		ps.Affinity = t.Affinity
	}
	ps.Containers = []corev1.Container{{Name: "calico-node", Image: "quay.io/calico/node (k3ssim)"}}
	c.applyDaemonSet(ds)

	kc := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}}
	kcLabels := map[string]string{"k8s-app": "calico-kube-controllers"}
	kc.Name, kc.Namespace, kc.Labels = "calico-kube-controllers", calicoNamespace, kcLabels
	one := int32(1)
	kc.Spec.Replicas = &one
	kc.Spec.Selector = &metav1.LabelSelector{MatchLabels: kcLabels}
	kc.Spec.Template.Labels = kcLabels
	exists := corev1.TolerationOpExists
	kc.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	kc.Spec.Template.Spec.Tolerations = append([]corev1.Toleration{
		{Key: "CriticalAddonsOnly", Operator: exists},
		{Key: "node-role.kubernetes.io/master", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Operator: exists, Effect: corev1.TaintEffectNoSchedule},
	}, inst.Spec.ControlPlaneTolerations...)
	kc.Spec.Template.Spec.Containers = []corev1.Container{{Name: "calico-kube-controllers", Image: "quay.io/calico/kube-controllers (k3ssim)"}}
	if cur, err := store.GetTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, calicoNamespace, kc.Name); err != nil {
		_, _ = store.CreateTyped(c.cfg.Store, store.Deployments, calicoNamespace, kc)
	} else if !equality.Semantic.DeepEqual(cur.Spec, kc.Spec) {
		_, _ = store.MutateTyped(c.cfg.Store, store.Deployments, calicoNamespace, kc.Name, func(x *appsv1.Deployment) bool {
			x.Spec = kc.Spec
			return true
		})
	}
	c.tigeraStatus()
}

// applyDaemonSet creates ds or replaces its spec when it differs.
func (c *Controller) applyDaemonSet(ds *appsv1.DaemonSet) {
	cur, err := store.GetTyped[appsv1.DaemonSet](c.cfg.Store, store.DaemonSets, ds.Namespace, ds.Name)
	if err != nil {
		_, _ = store.CreateTyped(c.cfg.Store, store.DaemonSets, ds.Namespace, ds)
		return
	}
	if equality.Semantic.DeepEqual(cur.Spec, ds.Spec) {
		return
	}
	_, _ = store.MutateTyped(c.cfg.Store, store.DaemonSets, ds.Namespace, ds.Name, func(x *appsv1.DaemonSet) bool {
		x.Spec = ds.Spec
		return true
	})
}

// tigeraStatus keeps TigeraStatus "calico": Available when calico-node runs on every node it
// is scheduled to, Progressing otherwise.
func (c *Controller) tigeraStatus() {
	ds, err := store.GetTyped[appsv1.DaemonSet](c.cfg.Store, store.DaemonSets, calicoNamespace, "calico-node")
	if err != nil {
		return
	}
	if _, ok := c.cfg.Store.Resource(tigeraStatuses.GR()); !ok {
		c.cfg.Store.Register(tigeraStatuses)
	}
	avail, prog, msg := "False", "True", "DaemonSet \"calico-system/calico-node\" is not available"
	if n := ds.Status.DesiredNumberScheduled; n > 0 && ds.Status.NumberAvailable == n {
		avail, prog, msg = "True", "False", "All Objects Available"
	}
	conds := []any{
		map[string]any{"type": "Available", "status": avail, "reason": "AllObjectsAvailable", "message": msg},
		map[string]any{"type": "Progressing", "status": prog, "reason": "ResourceNotReady", "message": msg},
		map[string]any{"type": "Degraded", "status": "False"},
	}
	obj := map[string]any{"apiVersion": "operator.tigera.io/v1", "kind": "TigeraStatus",
		"metadata": map[string]any{"name": "calico"}, "status": map[string]any{"conditions": conds}}
	if _, err := c.cfg.Store.Get(tigeraStatuses.GR(), "", "calico"); err != nil {
		_, _ = c.cfg.Store.Create(tigeraStatuses.GR(), "", obj)
		return
	}
	_, _ = c.cfg.Store.Mutate(tigeraStatuses.GR(), "", "calico", func(o map[string]any) (bool, error) {
		b1, _ := json.Marshal(o["status"])
		b2, _ := json.Marshal(obj["status"])
		if string(b1) == string(b2) {
			return false, nil
		}
		o["status"] = obj["status"]
		return true, nil
	})
}
