// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/sched"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

var priorityClasses = map[string]int32{"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}

// newPod builds a pod from a template the way the workload controllers and the admission
// plugins do (default tolerations, priority, scheduler name, owner reference).
func newPod(tmpl corev1.PodTemplateSpec, ns, name string, owner metav1.OwnerReference, extraLabels map[string]string, extraTols []corev1.Toleration) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}}
	p.Name, p.Namespace = name, ns
	p.Labels = map[string]string{}
	for k, v := range tmpl.Labels {
		p.Labels[k] = v
	}
	for k, v := range extraLabels {
		p.Labels[k] = v
	}
	p.Annotations = tmpl.Annotations
	p.OwnerReferences = []metav1.OwnerReference{owner}
	p.Spec = *tmpl.Spec.DeepCopy()
	p.Spec.Tolerations = sched.DefaultTolerations(append(p.Spec.Tolerations, extraTols...))
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if p.Spec.SchedulerName == "" {
		p.Spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if p.Spec.DNSPolicy == "" {
		p.Spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = "default"
	}
	if pr, ok := priorityClasses[p.Spec.PriorityClassName]; ok {
		p.Spec.Priority = &pr
	} else if p.Spec.Priority == nil {
		zero := int32(0)
		p.Spec.Priority = &zero
	}
	if p.Spec.TerminationGracePeriodSeconds == nil {
		g := int64(30)
		p.Spec.TerminationGracePeriodSeconds = &g
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(&p.Spec)}
	return p
}

func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	for _, c := range spec.Containers {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			return corev1.PodQOSBurstable
		}
	}
	return corev1.PodQOSBestEffort
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &t, BlockOwnerDeletion: &t}
}

// owner returns the pod's top-level owner kind and name: a ReplicaSet owner is reported as
// its Deployment (the ReplicaSet is named <deployment>-<pod-template-hash>).
func owner(p *corev1.Pod) (kind, name string) {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if o.Kind == "ReplicaSet" {
			if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(o.Name, "-"+h) {
				return "Deployment", strings.TrimSuffix(o.Name, "-"+h)
			}
		}
		return o.Kind, o.Name
	}
	return "", ""
}

type podIndex map[string][]*corev1.Pod // "ns/Kind/name" -> pods

func indexPods(pods []corev1.Pod) podIndex {
	idx := podIndex{}
	for i := range pods {
		p := &pods[i]
		if k, n := owner(p); k != "" {
			key := p.Namespace + "/" + k + "/" + n
			idx[key] = append(idx[key], p)
		}
	}
	return idx
}

func (c *Controller) listPods() []corev1.Pod {
	pods, _ := store.ListTyped[corev1.Pod](c.cfg.Store, store.Pods, "")
	return pods
}

func (c *Controller) deletePod(p *corev1.Pod) {
	_, _ = c.cfg.Store.Delete(store.Pods, p.Namespace, p.Name)
	delete(c.startable, string(p.UID))
	delete(c.running, string(p.UID))
}

func (c *Controller) createPod(p *corev1.Pod) {
	_, _ = store.CreateTyped(c.cfg.Store, store.Pods, p.Namespace, p)
}

func podRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func (c *Controller) deployments() {
	deps, err := store.ListTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, "")
	if err != nil {
		return
	}
	pods := c.listPods()
	idx := indexPods(pods)
	live := map[string]bool{}
	for i := range deps {
		d := &deps[i]
		live[d.Namespace+"/"+d.Name] = true
		hash := hash10(d.Spec.Template)
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		var current []*corev1.Pod
		for _, p := range idx[d.Namespace+"/Deployment/"+d.Name] {
			if p.Labels["pod-template-hash"] != hash {
				c.deletePod(p)
				continue
			}
			current = append(current, p)
		}
		// Scale down: drop not-running pods first.
		sort.SliceStable(current, func(a, b int) bool { return podRunning(current[a]) && !podRunning(current[b]) })
		for int32(len(current)) > replicas {
			c.deletePod(current[len(current)-1])
			current = current[:len(current)-1]
		}
		for n := int32(len(current)); n < replicas; n++ {
			rs := d.Name + "-" + hash
			ref := controllerRef("apps/v1", "ReplicaSet", rs, derivedUID(string(d.UID), hash))
			p := newPod(d.Spec.Template, d.Namespace, rs+"-"+suffix5(), ref, map[string]string{"pod-template-hash": hash}, nil)
			c.createPod(p)
		}
		var ready int32
		for _, p := range current {
			if podRunning(p) {
				ready++
			}
		}
		st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: int32(len(current)),
			UpdatedReplicas: int32(len(current)), ReadyReplicas: ready, AvailableReplicas: ready}
		if replicas > ready {
			st.UnavailableReplicas = replicas - ready
		}
		avail := corev1.ConditionFalse
		reason, msg := "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
		if ready >= replicas {
			avail, reason, msg = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
		}
		progReason, progMsg := "ReplicaSetUpdated", "ReplicaSet \""+d.Name+"-"+hash+"\" is progressing."
		if ready >= replicas {
			progReason, progMsg = "NewReplicaSetAvailable", "ReplicaSet \""+d.Name+"-"+hash+"\" has successfully progressed."
		}
		st.Conditions = []appsv1.DeploymentCondition{
			depCond(d.Status.Conditions, appsv1.DeploymentAvailable, avail, reason, msg),
			depCond(d.Status.Conditions, appsv1.DeploymentProgressing, corev1.ConditionTrue, progReason, progMsg),
		}
		if !equality.Semantic.DeepEqual(st, d.Status) {
			_, _ = store.MutateTyped(c.cfg.Store, store.Deployments, d.Namespace, d.Name, func(x *appsv1.Deployment) bool {
				x.Status = st
				return true
			})
		}
	}
	for key, ps := range idx {
		parts := strings.SplitN(key, "/", 3)
		if parts[1] == "Deployment" && !live[parts[0]+"/"+parts[2]] {
			for _, p := range ps {
				c.deletePod(p)
			}
		}
	}
}

func depCond(old []appsv1.DeploymentCondition, typ appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	c := appsv1.DeploymentCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
	for _, o := range old {
		if o.Type == typ {
			if o.Status == status {
				c.LastTransitionTime = o.LastTransitionTime
			}
			if o.Status == status && o.Reason == reason && o.Message == msg {
				c.LastUpdateTime = o.LastUpdateTime
			}
		}
	}
	return c
}

// daemonSetEligible is the DaemonSet controller's "should run" check: node selector and
// required affinity match, and every NoSchedule/NoExecute taint is tolerated (with the
// tolerations the controller adds itself).
func daemonSetEligible(spec *corev1.PodSpec, node *corev1.Node) bool {
	if !sched.MatchesNode(spec, node) {
		return false
	}
	tols := append(append([]corev1.Toleration{}, spec.Tolerations...), sched.DaemonSetTolerations(spec.HostNetwork)...)
	return len(sched.UntoleratedTaints(node, tols)) == 0
}

func (c *Controller) daemonSets() {
	dss, err := store.ListTyped[appsv1.DaemonSet](c.cfg.Store, store.DaemonSets, "")
	if err != nil {
		return
	}
	nodes, _ := store.ListTyped[corev1.Node](c.cfg.Store, store.Nodes, "")
	pods := c.listPods()
	idx := indexPods(pods)
	live := map[string]bool{}
	for i := range dss {
		ds := &dss[i]
		live[ds.Namespace+"/"+ds.Name] = true
		hash := hash10(ds.Spec.Template)
		byNode := map[string]*corev1.Pod{}
		for _, p := range idx[ds.Namespace+"/DaemonSet/"+ds.Name] {
			if p.Labels["controller-revision-hash"] != hash || byNode[p.Spec.NodeName] != nil {
				c.deletePod(p)
				continue
			}
			byNode[p.Spec.NodeName] = p
		}
		var desired, current, ready int32
		eligible := map[string]bool{}
		for j := range nodes {
			n := &nodes[j]
			if !daemonSetEligible(&ds.Spec.Template.Spec, n) {
				continue
			}
			eligible[n.Name] = true
			desired++
			p := byNode[n.Name]
			if p == nil {
				ref := controllerRef("apps/v1", "DaemonSet", ds.Name, ds.UID)
				np := newPod(ds.Spec.Template, ds.Namespace, ds.Name+"-"+suffix5(), ref,
					map[string]string{"controller-revision-hash": hash, "pod-template-generation": "1"},
					sched.DaemonSetTolerations(ds.Spec.Template.Spec.HostNetwork))
				np.Spec.NodeName = n.Name
				c.createPod(np)
				continue
			}
			current++
			if podRunning(p) {
				ready++
			}
		}
		for node, p := range byNode {
			if !eligible[node] {
				c.deletePod(p)
			}
		}
		st := appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: desired,
			CurrentNumberScheduled: current, UpdatedNumberScheduled: current, NumberReady: ready, NumberAvailable: ready,
			NumberUnavailable: desired - ready}
		if !equality.Semantic.DeepEqual(st, ds.Status) {
			_, _ = store.MutateTyped(c.cfg.Store, store.DaemonSets, ds.Namespace, ds.Name, func(x *appsv1.DaemonSet) bool {
				x.Status = st
				return true
			})
		}
	}
	for key, ps := range idx {
		parts := strings.SplitN(key, "/", 3)
		if parts[1] == "DaemonSet" && !live[parts[0]+"/"+parts[2]] {
			for _, p := range ps {
				c.deletePod(p)
			}
		}
	}
}

func (c *Controller) jobs(now time.Time) {
	jobs, err := store.ListTyped[batchv1.Job](c.cfg.Store, store.Jobs, "")
	if err != nil {
		return
	}
	idx := indexPods(c.listPods())
	live := map[string]bool{}
	for i := range jobs {
		j := &jobs[i]
		live[j.Namespace+"/"+j.Name] = true
		ps := idx[j.Namespace+"/Job/"+j.Name]
		var active, succeeded, failed int32
		for _, p := range ps {
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				succeeded++
			case corev1.PodFailed:
				failed++
			default:
				active++
			}
		}
		done := jobFinished(j)
		if len(ps) == 0 && !done {
			ref := controllerRef("batch/v1", "Job", j.Name, j.UID)
			labels := map[string]string{"job-name": j.Name, "batch.kubernetes.io/job-name": j.Name,
				"controller-uid": string(j.UID), "batch.kubernetes.io/controller-uid": string(j.UID)}
			c.createPod(newPod(j.Spec.Template, j.Namespace, j.Name+"-"+suffix5(), ref, labels, nil))
			active++
		}
		st := *j.Status.DeepCopy()
		st.Active, st.Succeeded, st.Failed = active, succeeded, failed
		var readyPods int32
		for _, p := range ps {
			if podRunning(p) {
				readyPods++
			}
		}
		st.Ready = ptr(readyPods)
		if st.StartTime == nil {
			t := metav1.NewTime(now.UTC().Truncate(time.Second))
			st.StartTime = &t
		}
		t := metav1.NewTime(now.UTC().Truncate(time.Second))
		if succeeded > 0 && !done {
			st.CompletionTime = &t
			st.Conditions = append(st.Conditions,
				batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: t, LastTransitionTime: t},
				batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: t, LastTransitionTime: t})
		} else if failed > 0 && !done {
			st.Conditions = append(st.Conditions,
				batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: t, LastTransitionTime: t},
				batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: t, LastTransitionTime: t})
		}
		if !equality.Semantic.DeepEqual(st, j.Status) {
			_, _ = store.MutateTyped(c.cfg.Store, store.Jobs, j.Namespace, j.Name, func(x *batchv1.Job) bool {
				x.Status = st
				return true
			})
		}
	}
	for key, ps := range idx {
		parts := strings.SplitN(key, "/", 3)
		if parts[1] == "Job" && !live[parts[0]+"/"+parts[2]] {
			for _, p := range ps {
				c.deletePod(p)
			}
		}
	}
}

func jobFinished(j *batchv1.Job) bool {
	for _, cd := range j.Status.Conditions {
		if (cd.Type == batchv1.JobComplete || cd.Type == batchv1.JobFailed) && cd.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// derivedUID returns a stable UUID-shaped uid for an object the simulator does not store
// (e.g. a Deployment's ReplicaSet).
func derivedUID(parts ...string) types.UID {
	h := sha256.Sum256([]byte(strings.Join(parts, "/")))
	x := hex.EncodeToString(h[:16])
	return types.UID(x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32])
}

func metaName(b []byte) string {
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(b, &o)
	return o.Metadata.Name
}
