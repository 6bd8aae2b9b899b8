// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

// SIMULATED system-upgrade-controller (SUC) — a labelled stand-in, not SUC. It models what
// SUC v0.20.1 does with upgrade.cattle.io/v1 Plans (pkg/upgrade/job, handle_batch.go;
// templates/suc/SOURCE.md) closely enough for k3strap's watch to be tested: it runs only once
// the Deployment system-upgrade/system-upgrade-controller has an available pod; per Plan it
// selects nodes by nodeSelector, creates one Job per node not yet labelled
// plan.upgrade.cattle.io/<plan>=<hash>, at most `concurrency` at once; the Job's pod is pinned
// to its node by required node affinity and tolerates node.kubernetes.io/unschedulable plus
// the Plan's tolerations (so an untolerated taint leaves it Pending — scheduled by the
// ordinary scheduler); its init containers prepare (waits until the Plan named in
// `prepare.args: [prepare, PLAN]` is complete), cordon or drain (evictions honour
// PodDisruptionBudgets; DaemonSet pods and SUC's own pods are skipped) and its container
// upgrade. No image runs: "upgrading" sets the Node's kubeletVersion to the Plan's version and
// flips it NotReady for a moment (the host's binary is NOT replaced: a restart of the host's
// k3s reports its binary's version again). When the Job completes, the node is labelled with
// the Plan's hash and uncordoned. Plan status: latestVersion, latestHash, applying, conditions
// LatestResolved, Validated, Complete. Not modelled: channels, windows, secrets, drain
// timeouts (a blocked drain retries for ever), job backoff, exclusive plans.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

var (
	sucPlans = store.GR{Group: "upgrade.cattle.io", Resource: "plans"}
	sucPDBs  = store.GR{Group: "policy", Resource: "poddisruptionbudgets"}
)

const (
	sucNamespace  = "system-upgrade"
	sucDeployment = "system-upgrade-controller"
	sucCtlLabel   = "upgrade.cattle.io/controller"
	sucNodeLabel  = "upgrade.cattle.io/node"
	sucPlanLabel  = "upgrade.cattle.io/plan"
	// sucStageSeconds is how long (real K3s seconds, scaled) each stage of a job pod takes;
	// sucNotReadySeconds how long a node is NotReady after its K3s was "replaced".
	sucStageSeconds    = 2.0
	sucNotReadySeconds = 4.0
)

type sucPlan struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Concurrency        int64                 `json:"concurrency"`
		Version            string                `json:"version"`
		NodeSelector       *metav1.LabelSelector `json:"nodeSelector"`
		ServiceAccountName string                `json:"serviceAccountName"`
		Tolerations        []corev1.Toleration   `json:"tolerations"`
		Cordon             bool                  `json:"cordon"`
		Prepare            *sucContainer         `json:"prepare"`
		Drain              *json.RawMessage      `json:"drain"`
		Upgrade            sucContainer          `json:"upgrade"`
	} `json:"spec"`
	raw json.RawMessage
}

type sucContainer struct {
	Image string   `json:"image"`
	Args  []string `json:"args"`
}

// hash is SUC's plan hash stand-in: sha224 of the spec (a valid label value).
func (p *sucPlan) hash() string {
	var m map[string]any
	_ = json.Unmarshal(p.raw, &m)
	b, _ := json.Marshal(m["spec"])
	h := sha256.Sum224(b)
	return hex.EncodeToString(h[:])
}

func (p *sucPlan) selects(n *corev1.Node) bool {
	if p.Spec.NodeSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	return err == nil && sel.Matches(labels.Set(n.Labels))
}

func (c *Controller) sucRunning() bool {
	d, err := store.GetTyped[appsv1.Deployment](c.cfg.Store, store.Deployments, sucNamespace, sucDeployment)
	return err == nil && d.Status.AvailableReplicas > 0
}

func (c *Controller) listPlans() []*sucPlan {
	if _, ok := c.cfg.Store.Resource(sucPlans); !ok {
		return nil
	}
	items, _ := c.cfg.Store.List(sucPlans, "")
	var out []*sucPlan
	for _, b := range items {
		p := &sucPlan{raw: append(json.RawMessage(nil), b...)}
		if json.Unmarshal(b, p) == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// suc is the stand-in controller's pass (see the file comment).
func (c *Controller) suc(now time.Time) {
	c.disruption()
	if !c.sucRunning() {
		return
	}
	plans := c.listPlans()
	if len(plans) == 0 {
		return
	}
	nodes, _ := store.ListTyped[corev1.Node](c.cfg.Store, store.Nodes, "")
	jobs, _ := store.ListTyped[batchv1.Job](c.cfg.Store, store.Jobs, sucNamespace)
	byPlan := map[string]*sucPlan{}
	for _, p := range plans {
		byPlan[p.Metadata.Name] = p
	}
	complete := map[string]bool{}
	for _, p := range plans {
		complete[p.Metadata.Name] = c.sucPlanPass(p, nodes, jobs)
	}
	c.sucPods(now, byPlan, complete)
}

// sucPlanPass labels and uncordons nodes whose job completed, creates jobs up to the Plan's
// concurrency and writes the Plan's status. It returns whether the Plan is complete.
func (c *Controller) sucPlanPass(p *sucPlan, nodes []corev1.Node, jobs []batchv1.Job) bool {
	name, hash := p.Metadata.Name, p.hash()
	label := "plan.upgrade.cattle.io/" + name
	var pending, applying []string
	jobOf := map[string]*batchv1.Job{}
	for i := range jobs {
		j := &jobs[i]
		if j.Labels[sucPlanLabel] == name && j.Annotations["upgrade.cattle.io/plan-hash"] == hash {
			jobOf[j.Labels[sucNodeLabel]] = j
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if !p.selects(n) || n.Labels[label] == hash {
			continue
		}
		if j := jobOf[n.Name]; j != nil && jobFinished(j) {
			if jobSucceeded(j) {
				c.mutateNode(n.Name, func(x *corev1.Node) bool {
					if x.Labels == nil {
						x.Labels = map[string]string{}
					}
					x.Labels[label] = hash
					if p.Spec.Cordon || p.Spec.Drain != nil {
						x.Spec.Unschedulable = false
					}
					return true
				})
				c.cfg.Log.Infof("SIMULATED system-upgrade-controller: plan %s applied on node %s", name, n.Name)
				continue
			}
		}
		pending = append(pending, n.Name)
		if jobOf[n.Name] != nil {
			applying = append(applying, n.Name)
		}
	}
	sort.Strings(pending)
	conc := int(p.Spec.Concurrency)
	if conc < 1 {
		conc = 1
	}
	for _, node := range pending {
		if len(applying) >= conc {
			break
		}
		if jobOf[node] != nil {
			continue
		}
		c.sucCreateJob(p, hash, node)
		applying = append(applying, node)
	}
	sort.Strings(applying)
	c.sucPlanStatus(p, hash, applying, len(pending) == 0)
	return len(pending) == 0
}

func jobSucceeded(j *batchv1.Job) bool {
	for _, cd := range j.Status.Conditions {
		if cd.Type == batchv1.JobComplete && cd.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (c *Controller) sucPlanStatus(p *sucPlan, hash string, applying []string, complete bool) {
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastUpdateTime": now}
	}
	compl := cond("Complete", "False", "", "")
	if complete {
		compl = cond("Complete", "True", "", "")
	}
	want := map[string]any{
		"latestVersion": p.Spec.Version, "latestHash": hash,
		"conditions": []any{cond("LatestResolved", "True", "Version", ""), cond("Validated", "True", "PlanIsValid", ""), compl},
	}
	if len(applying) > 0 {
		a := make([]any, len(applying))
		for i, s := range applying {
			a[i] = s
		}
		want["applying"] = a
	}
	_, _ = c.cfg.Store.Mutate(sucPlans, p.Metadata.Namespace, p.Metadata.Name, func(obj map[string]any) (bool, error) {
		old, _ := obj["status"].(map[string]any)
		if sameStatus(old, want) {
			return false, nil
		}
		obj["status"] = want
		return true, nil
	})
}

// sameStatus compares two Plan statuses ignoring lastUpdateTime.
func sameStatus(a, b map[string]any) bool {
	strip := func(m map[string]any) string {
		x, _ := json.Marshal(m)
		var y map[string]any
		_ = json.Unmarshal(x, &y)
		if cs, ok := y["conditions"].([]any); ok {
			for _, cd := range cs {
				if cm, ok := cd.(map[string]any); ok {
					delete(cm, "lastUpdateTime")
				}
			}
		}
		out, _ := json.Marshal(y)
		return string(out)
	}
	return a != nil && strip(a) == strip(b)
}

func (c *Controller) sucCreateJob(p *sucPlan, hash, node string) {
	name := p.Metadata.Name
	jobName := fmt.Sprintf("apply-%s-on-%s-with-%s", name, node, hash[:8])
	if len(jobName) > 63 {
		jobName = jobName[:63]
	}
	tag := strings.ReplaceAll(p.Spec.Version, "+", "-")
	lbl := map[string]string{sucCtlLabel: sucDeployment, sucNodeLabel: node, sucPlanLabel: name, "upgrade.cattle.io/version": tag}
	tols := append([]corev1.Toleration{{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, p.Spec.Tolerations...)
	var inits []corev1.Container
	if p.Spec.Prepare != nil {
		img := p.Spec.Prepare.Image
		if !strings.Contains(img, ":") {
			img += ":" + tag
		}
		inits = append(inits, corev1.Container{Name: "prepare", Image: img, Args: p.Spec.Prepare.Args})
	}
	if p.Spec.Drain != nil {
		inits = append(inits, corev1.Container{Name: "drain", Image: "rancher/kubectl:v1.30.3", Args: []string{"drain", node, "--pod-selector", sucCtlLabel + "!=" + sucDeployment, "--ignore-daemonsets", "--delete-emptydir-data", "--force"}})
	} else if p.Spec.Cordon {
		inits = append(inits, corev1.Container{Name: "cordon", Image: "rancher/kubectl:v1.30.3", Args: []string{"cordon", node}})
	}
	img := p.Spec.Upgrade.Image
	if !strings.Contains(img, ":") {
		img += ":" + tag
	}
	zero, backoff := int64(0), int32(99)
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: sucNamespace, Labels: lbl,
			Annotations: map[string]string{"upgrade.cattle.io/plan-hash": hash}},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{
				HostIPC: true, HostPID: true, HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
				ServiceAccountName: p.Spec.ServiceAccountName, TerminationGracePeriodSeconds: &zero,
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
				Tolerations:    tols,
				InitContainers: inits,
				Containers:     []corev1.Container{{Name: "upgrade", Image: img, Args: p.Spec.Upgrade.Args}},
			}}}}
	if _, err := store.CreateTyped(c.cfg.Store, store.Jobs, sucNamespace, job); err == nil {
		c.cfg.Log.Infof("SIMULATED system-upgrade-controller: created job %s for plan %s on node %s", jobName, name, node)
	}
}

// sucPods drives the scheduled pods of SUC's jobs through their containers.
func (c *Controller) sucPods(now time.Time, plans map[string]*sucPlan, complete map[string]bool) {
	pods, _ := store.ListTyped[corev1.Pod](c.cfg.Store, store.Pods, sucNamespace)
	for i := range pods {
		p := &pods[i]
		plan := plans[p.Labels[sucPlanLabel]]
		if plan == nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		c.sucPodStep(now, p, plan, complete)
	}
}

// sucStage returns the index of the first container (init containers, then upgrade) that has
// not terminated, and since when it runs (zero when not started).
func sucStage(p *corev1.Pod) (int, time.Time) {
	for i, cs := range p.Status.InitContainerStatuses {
		if cs.State.Terminated == nil {
			if cs.State.Running != nil {
				return i, cs.State.Running.StartedAt.Time
			}
			return i, time.Time{}
		}
	}
	i := len(p.Status.InitContainerStatuses)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return i, cs.State.Running.StartedAt.Time
		}
	}
	return i, time.Time{}
}

func (c *Controller) sucPodStep(now time.Time, p *corev1.Pod, plan *sucPlan, complete map[string]bool) {
	node := p.Spec.NodeName
	t := metav1.NewTime(now)
	running := func(name, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, Started: ptr(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}}}
	}
	if len(p.Status.InitContainerStatuses) == 0 && len(p.Spec.InitContainers) > 0 {
		hostIP := ""
		if n := c.node(node); n != nil {
			hostIP = nodeIP(n)
		}
		c.mutatePod(p, func(x *corev1.Pod) { // no store calls inside: the store is locked
			x.Status.Phase = corev1.PodPending
			x.Status.HostIP = hostIP
			x.Status.StartTime = &t
			for i, ic := range x.Spec.InitContainers {
				cs := corev1.ContainerStatus{Name: ic.Name, Image: ic.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
				if i == 0 {
					cs = running(ic.Name, ic.Image)
				}
				x.Status.InitContainerStatuses = append(x.Status.InitContainerStatuses, cs)
			}
			x.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "upgrade", Image: x.Spec.Containers[0].Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		})
		c.wakeAt(now.Add(c.cfg.Clock.D(sucStageSeconds)))
		return
	}
	stage, since := sucStage(p)
	if !c.due(now, since.Add(c.cfg.Clock.D(sucStageSeconds))) {
		return
	}
	finish := func(next bool) {
		c.mutatePod(p, func(x *corev1.Pod) {
			if stage < len(x.Status.InitContainerStatuses) {
				cs := &x.Status.InitContainerStatuses[stage]
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(since), FinishedAt: t}}
				cs.Ready = true
				if stage+1 < len(x.Status.InitContainerStatuses) {
					n := &x.Status.InitContainerStatuses[stage+1]
					*n = running(n.Name, n.Image)
				} else {
					x.Status.Phase = corev1.PodRunning
					x.Status.ContainerStatuses = []corev1.ContainerStatus{running("upgrade", x.Spec.Containers[0].Image)}
				}
				return
			}
			x.Status.Phase = corev1.PodSucceeded
			for i := range x.Status.ContainerStatuses {
				cs := &x.Status.ContainerStatuses[i]
				cs.Ready, cs.Started = false, ptr(false)
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(since), FinishedAt: t}}
			}
		})
		c.wakeAt(now.Add(c.cfg.Clock.D(sucStageSeconds)))
	}
	if stage < len(p.Spec.InitContainers) {
		ic := p.Spec.InitContainers[stage]
		switch ic.Name {
		case "prepare":
			// rancher/k3s-upgrade `prepare PLAN` waits until PLAN is complete.
			if len(ic.Args) >= 2 && !complete[ic.Args[1]] {
				return
			}
		case "cordon":
			c.mutateNode(node, func(x *corev1.Node) bool { x.Spec.Unschedulable = true; return true })
		case "drain":
			c.mutateNode(node, func(x *corev1.Node) bool { x.Spec.Unschedulable = true; return true })
			if msg := c.sucDrain(node); msg != "" {
				_ = c.cfg.Store.SetAux(store.PodLogKey(p.Namespace, p.Name), msg)
				c.wakeAt(now.Add(c.cfg.Clock.D(sucStageSeconds)))
				return
			}
		}
		finish(true)
		return
	}
	// The upgrade container: "replace" K3s (the node reports the new version, NotReady for a
	// moment), then succeed once the node is Ready again.
	n := c.node(node)
	if n == nil {
		return
	}
	if n.Status.NodeInfo.KubeletVersion != plan.Spec.Version {
		c.mutateNode(node, func(x *corev1.Node) bool {
			x.Status.NodeInfo.KubeletVersion = plan.Spec.Version
			x.Status.NodeInfo.KubeProxyVersion = ""
			for i := range x.Status.Conditions {
				if x.Status.Conditions[i].Type == corev1.NodeReady {
					x.Status.Conditions[i].Status = corev1.ConditionFalse
					x.Status.Conditions[i].Reason = "KubeletNotReady"
					x.Status.Conditions[i].Message = "SIMULATED: k3s restarting after its upgrade to " + plan.Spec.Version
					x.Status.Conditions[i].LastTransitionTime = t
				}
			}
			return true
		})
		c.sucUpgradedAt[node] = now
		c.wakeAt(now.Add(c.cfg.Clock.D(sucNotReadySeconds)))
		return
	}
	if at, ok := c.sucUpgradedAt[node]; ok && !c.due(now, at.Add(c.cfg.Clock.D(sucNotReadySeconds))) {
		return
	}
	if !isReady(n) {
		c.mutateNode(node, func(x *corev1.Node) bool {
			for i := range x.Status.Conditions {
				if x.Status.Conditions[i].Type == corev1.NodeReady {
					x.Status.Conditions[i].Status = corev1.ConditionTrue
					x.Status.Conditions[i].Reason = "KubeletReady"
					x.Status.Conditions[i].Message = "kubelet is posting ready status"
					x.Status.Conditions[i].LastTransitionTime = t
				}
			}
			return true
		})
		return
	}
	delete(c.sucUpgradedAt, node)
	_ = c.cfg.Store.SetAux(store.PodLogKey(p.Namespace, p.Name), fmt.Sprintf("SIMULATED k3s-upgrade: node %s now runs %s\n", node, plan.Spec.Version))
	finish(false)
}

func (c *Controller) node(name string) *corev1.Node {
	n, err := store.GetTyped[corev1.Node](c.cfg.Store, store.Nodes, "", name)
	if err != nil {
		return nil
	}
	return n
}

// sucDrain evicts the node's pods as `kubectl drain --ignore-daemonsets --force` does through
// the eviction API: a pod whose PodDisruptionBudget allows no disruption stays. It returns
// kubectl's retry lines for the pods left ("" once drained).
func (c *Controller) sucDrain(node string) string {
	pods := c.listPods()
	pdbs, _ := store.ListTyped[policyv1.PodDisruptionBudget](c.cfg.Store, sucPDBs, "")
	allowed := map[string]int32{}
	for _, b := range pdbs {
		allowed[b.Namespace+"/"+b.Name] = b.Status.DisruptionsAllowed
	}
	var lines []string
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if kind, _ := owner(p); kind == "DaemonSet" {
			continue
		}
		if p.Labels[sucCtlLabel] == sucDeployment {
			continue
		}
		var blocking string
		for _, b := range pdbs {
			if b.Namespace != p.Namespace || b.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if allowed[b.Namespace+"/"+b.Name] <= 0 {
				blocking = b.Name
				break
			}
			allowed[b.Namespace+"/"+b.Name]--
		}
		if blocking != "" {
			lines = append(lines, fmt.Sprintf("evicting pod %s/%s\nerror when evicting pods/%q -n %q (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.", p.Namespace, p.Name, p.Name, p.Namespace))
			continue
		}
		c.deletePod(p)
	}
	return strings.Join(lines, "\n")
}

// disruption is kube-controller-manager's disruption controller for PodDisruptionBudgets:
// expectedPods, currentHealthy, desiredHealthy and disruptionsAllowed from the matching pods.
func (c *Controller) disruption() {
	pdbs, err := store.ListTyped[policyv1.PodDisruptionBudget](c.cfg.Store, sucPDBs, "")
	if err != nil || len(pdbs) == 0 {
		return
	}
	pods := c.listPods()
	for i := range pdbs {
		b := &pdbs[i]
		var expected, healthy int32
		if b.Spec.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err == nil && !sel.Empty() {
				for j := range pods {
					p := &pods[j]
					if p.Namespace != b.Namespace || p.DeletionTimestamp != nil || !sel.Matches(labels.Set(p.Labels)) {
						continue
					}
					expected++
					if podRunning(p) {
						healthy++
					}
				}
			}
		}
		desired := int32(0)
		switch {
		case b.Spec.MinAvailable != nil:
			v, _ := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(expected), true)
			desired = int32(v)
		case b.Spec.MaxUnavailable != nil:
			v, _ := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(expected), true)
			desired = max(expected-int32(v), 0)
		}
		st := policyv1.PodDisruptionBudgetStatus{ObservedGeneration: b.Generation, ExpectedPods: expected,
			CurrentHealthy: healthy, DesiredHealthy: desired, DisruptionsAllowed: max(healthy-desired, 0)}
		if equality.Semantic.DeepEqual(st.ExpectedPods, b.Status.ExpectedPods) && st.CurrentHealthy == b.Status.CurrentHealthy &&
			st.DesiredHealthy == b.Status.DesiredHealthy && st.DisruptionsAllowed == b.Status.DisruptionsAllowed && b.Status.ObservedGeneration == b.Generation {
			continue
		}
		_, _ = c.cfg.Store.Mutate(sucPDBs, b.Namespace, b.Name, func(obj map[string]any) (bool, error) {
			m, err := store.ToMap(st)
			if err != nil {
				return false, err
			}
			obj["status"] = m
			return true, nil
		})
	}
}
