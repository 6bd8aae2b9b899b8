// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sucwatch follows an upgrade system-upgrade-controller runs (`k3strap upgrade --via
// suc`, docs/day2.md): what a look at the cluster says about each node's progress through its
// SUC Plan (Tracker), and why a stalled node is stuck (DiagnoseNode, DiagnoseDrain). The
// suc-watch step reads the cluster (Read, DrainView) and emits; this package only judges.
package sucwatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/suc"
)

// Labels system-upgrade-controller puts on its Jobs and their pods (pkg/upgrade/job).
const (
	sucLabelNode = "upgrade.cattle.io/node"
	sucLabelPlan = "upgrade.cattle.io/plan"
)

// sucNode is what the watch reads of a Node (a slim decode: at 500 nodes a poll stays small).
type Node struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool           `json:"unschedulable"`
		Taints        []corev1.Taint `json:"taints"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		NodeInfo struct {
			KubeletVersion string `json:"kubeletVersion"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

func (n *Node) ready() (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True", strings.TrimSpace(c.Reason + " " + c.Message)
		}
	}
	return false, "no Ready condition"
}

func (n *Node) server() bool {
	_, ok := n.Metadata.Labels[k3s.LabelControlPlane]
	return ok
}

// sucPlanStatus is what the watch reads of a Plan.
type PlanStatus struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		// NodeSelector picks the Plan's nodes (nil: every node).
		NodeSelector *metav1.LabelSelector `json:"nodeSelector"`
	} `json:"spec"`
	Status struct {
		LatestHash string   `json:"latestHash"`
		Applying   []string `json:"applying"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

// sucPoll is one look at the cluster: the nodes, and SUC's Plans, Jobs and pods in its
// namespace.
type Poll struct {
	nodes map[string]*Node
	plans map[string]*PlanStatus
	jobs  []batchv1.Job
	pods  []corev1.Pod
}

// jobFor returns the newest Job of node (nil when SUC made none).
func (p *Poll) jobFor(node string) *batchv1.Job {
	var best *batchv1.Job
	for i := range p.jobs {
		j := &p.jobs[i]
		if j.Labels[sucLabelNode] != node {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&j.CreationTimestamp) {
			best = j
		}
	}
	return best
}

// podFor returns the newest pod of job.
func (p *Poll) podFor(job *batchv1.Job) *corev1.Pod {
	var best *corev1.Pod
	for i := range p.pods {
		pod := &p.pods[i]
		if pod.Labels["job-name"] != job.Name && pod.Labels["batch.kubernetes.io/job-name"] != job.Name {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&pod.CreationTimestamp) {
			best = pod
		}
	}
	return best
}

// planApplied reports whether the node carries a plan's latest hash: SUC labels a node so when
// the plan's Job on it completed, and creates a Job on every selected node without it — also on
// a node already on the plan's version (the upgrade image then changes nothing). A plan the
// controller has not resolved yet (no latestHash) is applied nowhere.
func (p *Poll) planApplied(n *Node) bool {
	for name, pl := range p.plans {
		if v, ok := n.Metadata.Labels[suc.PlanLabelPrefix+name]; ok && pl.Status.LatestHash != "" && v == pl.Status.LatestHash {
			return true
		}
	}
	return false
}

// LeftOut says why SUC applies none of the Plans to node n: "" when some Plan selects it and
// does not leave it out. SUC's selection (pkg/upgrade/plan/plan.go SelectConcurrentNodes): a
// Plan's nodeSelector (k3strap's exclude nodes labelled k3s-upgrade=disabled or false), and a
// node labelled plan.upgrade.cattle.io/<plan>=disabled is never selected by that Plan. With no
// Plan read yet, "".
func (p *Poll) LeftOut(n *Node) string {
	if len(p.plans) == 0 || n == nil {
		return ""
	}
	var disabled []string
	for _, name := range slices.Sorted(maps.Keys(p.plans)) {
		pl := p.plans[name]
		if pl.Spec.NodeSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(pl.Spec.NodeSelector)
			if err != nil || !sel.Matches(labels.Set(n.Metadata.Labels)) {
				continue
			}
		}
		if n.Metadata.Labels[suc.PlanLabelPrefix+name] != "disabled" {
			return ""
		}
		disabled = append(disabled, suc.PlanLabelPrefix+name+"=disabled")
	}
	if len(disabled) > 0 {
		return "labelled " + strings.Join(disabled, ", ") + ": system-upgrade-controller leaves it out"
	}
	if v := n.Metadata.Labels[suc.OptOutLabel]; v != "" {
		return "labelled " + suc.OptOutLabel + "=" + v + ": the Plans leave it out"
	}
	return "no Plan selects it"
}

func jobDone(j *batchv1.Job) (complete, failed bool, msg string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			complete = true
		case batchv1.JobFailed:
			failed, msg = true, strings.TrimSpace(c.Reason+": "+c.Message)
		}
	}
	return
}

// initDone reports whether pod's init container name terminated successfully.
func initDone(pod *corev1.Pod, name string) bool {
	if pod == nil {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == name && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
			return true
		}
	}
	return false
}

// sucSteps returns the steps a node goes through (servers are cordoned, not drained).
func sucSteps(server bool) []string {
	if server {
		return []string{events.SUCStepJob, events.SUCStepCordon, events.SUCStepUpgrade, events.SUCStepReady, events.SUCStepUncordon}
	}
	return []string{events.SUCStepJob, events.SUCStepCordon, events.SUCStepDrain, events.SUCStepUpgrade, events.SUCStepReady, events.SUCStepUncordon}
}

// sucLevel returns how many of the node's steps the poll shows done (0..len(sucSteps)).
func sucLevel(p *Poll, n *Node, version string) int {
	server := n.server()
	job := p.jobFor(n.Metadata.Name)
	var pod *corev1.Pod
	if job != nil {
		pod = p.podFor(job)
	}
	if job == nil && !p.planApplied(n) {
		// SUC has not reached the node yet: it will make a Job for it even when the node is
		// on the version already, so nothing counts as done before that Job.
		return 0
	}
	onVersion := n.Status.NodeInfo.KubeletVersion == version
	ready, _ := n.ready()
	done := map[string]bool{}
	done[events.SUCStepJob] = job != nil
	done[events.SUCStepCordon] = job != nil && n.Spec.Unschedulable
	done[events.SUCStepDrain] = job != nil && (initDone(pod, "drain") || jobCompleteOf(job))
	// A node on the version counts as upgraded only once its Job is past cordon (and drain),
	// or done: on a node already on the version the Job still cordons and drains it first.
	pastDrain := job == nil || jobCompleteOf(job) || (n.Spec.Unschedulable && (server || done[events.SUCStepDrain]))
	done[events.SUCStepUpgrade] = onVersion && pastDrain
	done[events.SUCStepReady] = done[events.SUCStepUpgrade] && ready
	done[events.SUCStepUncordon] = done[events.SUCStepReady] && !n.Spec.Unschedulable && (job == nil || jobCompleteOf(job) || p.planApplied(n))
	steps := sucSteps(server)
	// The furthest step reached counts, with everything before it (a fast step may fall
	// between two polls).
	level := 0
	for i, st := range steps {
		if done[st] {
			level = i + 1
		}
	}
	return level
}

func jobCompleteOf(j *batchv1.Job) bool {
	c, _, _ := jobDone(j)
	return c
}

// sucStepMessage says what reaching step means for node n.
func sucStepMessage(step string, p *Poll, n *Node, version string) string {
	switch step {
	case events.SUCStepJob:
		if j := p.jobFor(n.Metadata.Name); j != nil {
			return "SUC created job " + j.Name
		}
		return "SUC created the upgrade job"
	case events.SUCStepCordon:
		return "cordoned"
	case events.SUCStepDrain:
		return "drained"
	case events.SUCStepUpgrade:
		return "kubelet reports " + version
	case events.SUCStepReady:
		return "Ready on " + version
	case events.SUCStepUncordon:
		return "uncordoned: upgraded to " + version
	}
	return step
}

// sucStall is a diagnosed stall of one node.
type Stall struct {
	Node      string
	Diagnosis string
	Message   string
	Fix       string
	Evidence  []string
	// NeedsDrainView says the node is stuck draining: the caller fetches the node's pods and
	// the PodDisruptionBudgets and calls diagnoseDrain.
	NeedsDrainView bool
}

// diagnoseNode says why node n has not progressed (nil when the poll shows nothing wrong
// with it, e.g. it waits for a Plan's concurrency slot).
func DiagnoseNode(p *Poll, n *Node, version string) *Stall {
	name := n.Metadata.Name
	st := &Stall{Node: name}
	job := p.jobFor(name)
	onVersion := n.Status.NodeInfo.KubeletVersion == version
	if ready, why := n.ready(); onVersion && !ready {
		st.Diagnosis = checkid.SUCNodeNotBack
		st.Message = fmt.Sprintf("%s runs %s but is not Ready", name, version)
		st.Evidence = []string{"node " + name + " Ready=False: " + why, "kubelet version " + n.Status.NodeInfo.KubeletVersion}
		st.Fix = "look at K3s on the host (journalctl -u k3s or k3s-agent); SUC's job waits for the node; fix the host or roll it back with `k3strap upgrade --via ssh --host " + name + "`"
		return st
	}
	if job == nil {
		return nil
	}
	if _, failed, msg := jobDone(job); failed {
		st.Diagnosis, st.Message = checkid.SUCJobFailed, fmt.Sprintf("SUC job %s for %s failed: %s", job.Name, name, msg)
		st.Evidence = []string{"job " + job.Namespace + "/" + job.Name + ": " + msg}
		st.Fix = "kubectl -n " + suc.Namespace + " logs job/" + job.Name + " --all-containers shows why; SUC retries with a new job once the cause is fixed"
		return st
	}
	pod := p.podFor(job)
	if pod == nil {
		return nil
	}
	if d := diagnosePod(pod, n); d != nil {
		d.Node = name
		return d
	}
	if !n.server() && n.Spec.Unschedulable && !initDone(pod, "drain") && podInitRunning(pod, "drain") {
		st.NeedsDrainView = true
		st.Diagnosis = checkid.SUCDrainSlow
		st.Message = fmt.Sprintf("draining %s does not finish", name)
		st.Fix = "look at the pods left on " + name + " (kubectl get pods -A --field-selector spec.nodeName=" + name + "); SUC's drain gives up after drain.timeout and retries"
		return st
	}
	return nil
}

func podInitRunning(pod *corev1.Pod, name string) bool {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == name {
			return cs.State.Running != nil
		}
	}
	return false
}

// diagnosePod recognises a SUC pod that cannot run: not schedulable (an untolerated taint of
// node n, F3) or an image it cannot pull.
func diagnosePod(pod *corev1.Pod, n *Node) *Stall {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		st := &Stall{Message: fmt.Sprintf("SUC's pod %s/%s is Pending: %s", pod.Namespace, pod.Name, c.Message)}
		st.Evidence = append(st.Evidence, "pod "+pod.Namespace+"/"+pod.Name+" PodScheduled=False: "+c.Message)
		if strings.Contains(c.Message, "untolerated taint") && n != nil {
			st.Diagnosis = checkid.SUCUntoleratedTaint
			var untol []string
			for _, t := range n.Spec.Taints {
				if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
					continue
				}
				if !toleratedBy(pod.Spec.Tolerations, t) {
					untol = append(untol, t.ToString())
				}
			}
			if len(untol) > 0 {
				st.Evidence = append(st.Evidence, "node "+n.Metadata.Name+" has taints the Plan does not tolerate: "+strings.Join(untol, ", "))
				st.Message = fmt.Sprintf("SUC's job for %s never runs: the node's taint %s is not tolerated by the Plan (F3)", n.Metadata.Name, strings.Join(untol, ", "))
			}
			st.Fix = "declare the taint in the inventory (spec.hosts[].taints) and re-run `k3strap upgrade --via suc`: the rendered Plans tolerate every declared taint"
		} else {
			st.Diagnosis = checkid.SUCUnschedulable
			st.Fix = "make the node schedulable for SUC's job (node selector, affinity, resources), or upgrade it with `k3strap upgrade --via ssh`"
		}
		return st
	}
	all := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range all {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return &Stall{Diagnosis: checkid.SUCImagePull,
				Message:  fmt.Sprintf("SUC's pod %s/%s cannot pull image %s (%s)", pod.Namespace, pod.Name, cs.Image, w.Reason),
				Evidence: []string{"container " + cs.Name + " waiting: " + w.Reason + ": " + w.Message},
				Fix:      "make the image reachable from the node (registry mirror, registries.yaml), or for airgap name mirrored images in spec.k3s.upgrade.suc (upgradeImage, kubectlImage, controllerImage)"}
		}
	}
	return nil
}

// toleratedBy is core/v1's Toleration.ToleratesTaint over a list.
func toleratedBy(tols []corev1.Toleration, t corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// diagnoseDrain names the PodDisruptionBudgets that keep pods on node (evicting them would
// violate the budget: status.disruptionsAllowed 0). pods are the pods on the node.
func DiagnoseDrain(st *Stall, node string, pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget) {
	var blocked []string
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName != node || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if ownedBy(pod, "DaemonSet") || pod.Labels["upgrade.cattle.io/controller"] != "" || pod.Labels[sucLabelPlan] != "" {
			continue
		}
		for j := range pdbs {
			b := &pdbs[j]
			if b.Namespace != pod.Namespace || b.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if b.Status.DisruptionsAllowed > 0 {
				continue
			}
			rule := ""
			if b.Spec.MinAvailable != nil {
				rule = "minAvailable " + b.Spec.MinAvailable.String()
			} else if b.Spec.MaxUnavailable != nil {
				rule = "maxUnavailable " + b.Spec.MaxUnavailable.String()
			}
			name := b.Namespace + "/" + b.Name
			st.Evidence = append(st.Evidence, fmt.Sprintf("pod %s/%s on %s is covered by PodDisruptionBudget %s (%s, %d healthy of %d expected, disruptions allowed %d)",
				pod.Namespace, pod.Name, node, name, rule, b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DisruptionsAllowed))
			if !slices.Contains(blocked, name) {
				blocked = append(blocked, name)
			}
		}
	}
	if len(blocked) == 0 {
		return
	}
	sort.Strings(blocked)
	st.Diagnosis = checkid.SUCDrainBlocked
	st.Message = fmt.Sprintf("draining %s is blocked by PodDisruptionBudget %s: evicting its pods would violate the budget", node, strings.Join(blocked, ", "))
	st.Fix = "let the budget allow one disruption (more replicas, a lower minAvailable or a higher maxUnavailable) or move the pods; SUC keeps retrying the drain until drain.timeout (spec.k3s.upgrade.suc.drainTimeout)"
}

func ownedBy(pod *corev1.Pod, kind string) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// sucTracker follows every watched node through its steps and emits each step once, in order.
type Tracker struct {
	version string
	em      events.Emitter
	nodes   map[string]*sucNodeProgress
	order   []string
	// lastProgress is when any node last reached a step.
	lastProgress time.Time
}

type sucNodeProgress struct {
	level     int
	steps     []string
	done      bool
	unchanged bool
}

func NewTracker(version string, em events.Emitter, names []string, now time.Time) *Tracker {
	t := &Tracker{version: version, em: em, nodes: map[string]*sucNodeProgress{}, order: names, lastProgress: now}
	for _, n := range names {
		t.nodes[n] = &sucNodeProgress{}
	}
	return t
}

// observe applies one poll: it emits the steps each node reached since the last poll and
// returns how many nodes are done. Nodes finishing are emitted before nodes starting, so that
// events show SUC's concurrency faithfully.
func (t *Tracker) Observe(p *Poll, now time.Time) (done int) {
	type adv struct {
		name  string
		from  int
		to    int
		first bool
	}
	var finishing, starting []adv
	for _, name := range t.order {
		np := t.nodes[name]
		n := p.nodes[name]
		if np.done || n == nil {
			continue
		}
		if np.steps == nil {
			np.steps = sucSteps(n.server())
			// Done before the watch started: without a job (SUC's label says its plan was
			// applied, the Job since deleted) it was on the version already; with a completed
			// one SUC upgraded it while nobody watched.
			if lvl := sucLevel(p, n, t.version); lvl == len(np.steps) {
				np.done, np.level = true, lvl
				if p.jobFor(name) == nil {
					np.unchanged = true
					t.em.Step(name, events.SUCStepUpgrade, events.StatusUnchanged, "already on "+t.version)
				} else {
					t.em.Step(name, events.SUCStepUncordon, events.StatusOK, "upgraded to "+t.version+" (before this watch started)")
				}
				continue
			}
		}
		lvl := sucLevel(p, n, t.version)
		if lvl <= np.level {
			continue
		}
		a := adv{name: name, from: np.level, to: lvl}
		if lvl == len(np.steps) {
			finishing = append(finishing, a)
		} else {
			starting = append(starting, a)
		}
	}
	for _, a := range append(finishing, starting...) {
		np := t.nodes[a.name]
		for i := a.from; i < a.to; i++ {
			st := np.steps[i]
			t.em.Step(a.name, st, events.StatusOK, sucStepMessage(st, p, p.nodes[a.name], t.version))
		}
		np.level = a.to
		np.done = a.to == len(np.steps)
		t.lastProgress = now
	}
	for _, np := range t.nodes {
		if np.done {
			done++
		}
	}
	return done
}

// pending returns the names of the nodes not done, in order.
func (t *Tracker) Pending() []string {
	var out []string
	for _, n := range t.order {
		if !t.nodes[n].done {
			out = append(out, n)
		}
	}
	return out
}

// PollInterval grows with the fleet so that a poll's size and rate stay reasonable.
func PollInterval(nodes int) time.Duration {
	d := time.Second + time.Duration(nodes)*4*time.Millisecond
	return min(d, 5*time.Second)
}

// Read looks at the cluster once through k: the nodes, and SUC's Plans, Jobs and pods.
func Read(ctx context.Context, k *kube.API) (*Poll, error) {
	nodes, err := k.List(ctx, "nodes", "", "")
	if err != nil {
		return nil, err
	}
	p := &Poll{nodes: map[string]*Node{}, plans: map[string]*PlanStatus{}}
	for _, o := range nodes {
		var n Node
		if err := o.Decode(&n); err != nil {
			return nil, fmt.Errorf("decoding node %s: %w", o.Name, err)
		}
		p.nodes[n.Metadata.Name] = &n
	}
	objs, err := k.List(ctx, "plans.upgrade.cattle.io,jobs.batch,pods", suc.Namespace, "")
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		switch o.Kind {
		case "Plan":
			var pl PlanStatus
			if o.Decode(&pl) == nil {
				p.plans[pl.Metadata.Name] = &pl
			}
		case "Job":
			var j batchv1.Job
			if o.Decode(&j) == nil {
				p.jobs = append(p.jobs, j)
			}
		case "Pod":
			var pod corev1.Pod
			if o.Decode(&pod) == nil {
				p.pods = append(p.pods, pod)
			}
		}
	}
	return p, nil
}

// DrainView fetches the pods on node and every PodDisruptionBudget.
func DrainView(ctx context.Context, k *kube.API, node string) ([]corev1.Pod, []policyv1.PodDisruptionBudget, error) {
	pods, err := k.ListPods(ctx, "", node)
	if err != nil {
		return nil, nil, err
	}
	pdbs, err := k.ListPDBs(ctx)
	return pods, pdbs, err
}

// Node returns the node called name as of the poll (nil when the cluster has none).
func (p *Poll) Node(name string) *Node { return p.nodes[name] }

// HasPlans reports whether SUC's namespace holds any Plan.
func (p *Poll) HasPlans() bool { return len(p.plans) > 0 }

// Nodes returns the watched nodes in order.
func (t *Tracker) Nodes() []string { return t.order }

// Unchanged reports whether node was on the version before the watch started (no job).
func (t *Tracker) Unchanged(node string) bool { return t.nodes[node] != nil && t.nodes[node].unchanged }

// LastProgress is when any node last reached a step.
func (t *Tracker) LastProgress() time.Time { return t.lastProgress }
