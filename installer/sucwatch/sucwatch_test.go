// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sucwatch

import (
	"maps"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/templates/suc"
)

func testNode(name string, server bool, version string, ready, cordoned bool, taints ...corev1.Taint) *Node {
	n := &Node{}
	n.Metadata.Name = name
	n.Metadata.Labels = map[string]string{}
	if server {
		n.Metadata.Labels["node-role.kubernetes.io/control-plane"] = "true"
	}
	n.Spec.Unschedulable = cordoned
	n.Spec.Taints = taints
	st := "False"
	if ready {
		st = "True"
	}
	n.Status.Conditions = append(n.Status.Conditions, struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}{Type: "Ready", Status: st, Reason: "KubeletNotReady", Message: "PLEG is not healthy"})
	n.Status.NodeInfo.KubeletVersion = version
	return n
}

func testJob(node string, complete bool) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "apply-k3s-agent-on-" + node, Namespace: "system-upgrade",
		Labels: map[string]string{sucLabelNode: node, sucLabelPlan: "k3s-agent"}}}
	if complete {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	}
	return j
}

func testPod(job string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job + "-x", Namespace: "system-upgrade", Labels: map[string]string{"job-name": job}}}
}

const oldV, newV = "v1.36.3+k3s1", "v1.36.4+k3s1"

// TestSUCTracker: each node's steps are emitted once and in order even when a poll skips
// some; a node SUC's label says the plan was applied to is reported unchanged; a node on the
// version without that label waits for the Job SUC will still make for it (seen on the real
// controller: a watch started before the Jobs existed called every node "already on").
func TestSUCTracker(t *testing.T) {
	rec := &events.Recorder{}
	tr := NewTracker(newV, events.Emitter{Sink: rec, Phase: events.PhaseSUCWatch}, []string{"cp1", "a1", "a2"}, time.Now())
	plan := &PlanStatus{}
	plan.Status.LatestHash = "h2"
	p := &Poll{plans: map[string]*PlanStatus{"k3s-agent": plan}, nodes: map[string]*Node{
		"cp1": testNode("cp1", true, newV, true, false), "a1": testNode("a1", false, oldV, true, false), "a2": testNode("a2", false, newV, true, false)}}
	p.nodes["cp1"].Metadata.Labels[suc.PlanLabelPrefix+"k3s-agent"] = "h2"
	p.nodes["a2"].Metadata.Labels[suc.PlanLabelPrefix+"k3s-agent"] = "h1" // an earlier plan's
	if done := tr.Observe(p, time.Now()); done != 1 {
		t.Fatalf("done %d, want 1 (cp1 labelled with the plan's hash; a2 on the version, but not labelled with it)", done)
	}
	p.jobs = []batchv1.Job{testJob("a1", false), testJob("a2", false)}
	p.nodes["a1"].Spec.Unschedulable = true
	tr.Observe(p, time.Now())
	p.nodes["a1"] = testNode("a1", false, newV, true, false)
	p.jobs = []batchv1.Job{testJob("a1", true), testJob("a2", true)}
	if done := tr.Observe(p, time.Now()); done != 3 {
		t.Fatalf("done %d, want 3", done)
	}
	var got []string
	for _, e := range rec.Events() {
		got = append(got, e.Host+":"+e.Step+":"+string(e.Status))
	}
	want := "cp1:upgrade:unchanged a1:job:ok a1:cordon:ok a2:job:ok " +
		"a1:drain:ok a1:upgrade:ok a1:ready:ok a1:uncordon:ok a2:cordon:ok a2:drain:ok a2:upgrade:ok a2:ready:ok a2:uncordon:ok"
	if strings.Join(got, " ") != want {
		t.Errorf("events\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestSUCDiagnoses(t *testing.T) {
	taint := corev1.Taint{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	n := testNode("a1", false, oldV, true, false, taint)
	job := testJob("a1", false)
	pod := testPod(job.Name)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 node(s) didn't match Pod's node affinity/selector."}}
	p := &Poll{nodes: map[string]*Node{"a1": n}, jobs: []batchv1.Job{job}, pods: []corev1.Pod{pod}}
	st := DiagnoseNode(p, n, newV)
	if st == nil || st.Diagnosis != checkid.SUCUntoleratedTaint || !strings.Contains(st.Message, "gpu=yes:NoSchedule") {
		t.Errorf("untolerated taint: %+v", st)
	}

	pod.Status.Conditions = nil
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "prepare", Image: "rancher/k3s-upgrade:v1.36.4-k3s1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
	p.pods = []corev1.Pod{pod}
	if st := DiagnoseNode(p, n, newV); st == nil || st.Diagnosis != checkid.SUCImagePull || !strings.Contains(st.Message, "rancher/k3s-upgrade:v1.36.4-k3s1") {
		t.Errorf("image pull: %+v", st)
	}

	n.Spec.Unschedulable = true
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "drain", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	p.pods = []corev1.Pod{pod}
	st = DiagnoseNode(p, n, newV)
	if st == nil || !st.NeedsDrainView {
		t.Fatalf("drain: %+v", st)
	}
	web := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "a1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	one := intstr.FromInt32(1)
	pdb := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}}
	DiagnoseDrain(st, "a1", []corev1.Pod{web}, []policyv1.PodDisruptionBudget{pdb})
	if st.Diagnosis != checkid.SUCDrainBlocked || !strings.Contains(st.Message, "default/web") || len(st.Evidence) != 1 {
		t.Errorf("blocked drain: %+v", st)
	}

	back := testNode("a2", false, newV, false, true)
	if st := DiagnoseNode(&Poll{nodes: map[string]*Node{"a2": back}}, back, newV); st == nil || st.Diagnosis != checkid.SUCNodeNotBack {
		t.Errorf("node not back: %+v", st)
	}
}

// TestSUCLeftOut: the nodes SUC leaves out of k3strap's Plans (their own node selectors, as
// rendered, and plan.upgrade.cattle.io/<plan>=disabled) are told apart from those a Plan
// selects; the watch skips them instead of waiting for a Job that never comes.
func TestSUCLeftOut(t *testing.T) {
	docs, err := suc.Plans(suc.Options{K3sVersion: newV})
	if err != nil {
		t.Fatal(err)
	}
	p := &Poll{plans: map[string]*PlanStatus{}}
	for _, doc := range strings.Split(string(docs), "\n---\n") {
		var pl PlanStatus
		if err := yaml.Unmarshal([]byte(doc), &pl); err != nil || pl.Metadata.Name == "" {
			continue
		}
		p.plans[pl.Metadata.Name] = &pl
	}
	if len(p.plans) != 2 || p.plans[suc.ServerPlan].Spec.NodeSelector == nil || p.plans[suc.AgentPlan].Spec.NodeSelector == nil {
		t.Fatalf("rendered Plans %v: want both with a node selector", p.plans)
	}
	node := func(server bool, labels map[string]string) *Node {
		n := testNode("n", server, oldV, true, false)
		maps.Copy(n.Metadata.Labels, labels)
		return n
	}
	for _, c := range []struct {
		name   string
		n      *Node
		reason string
	}{
		{"server", node(true, nil), ""},
		{"agent", node(false, nil), ""},
		{"opted out", node(false, map[string]string{suc.OptOutLabel: "disabled"}), "labelled k3s-upgrade=disabled: the Plans leave it out"},
		{"server Plan disabled on a server", node(true, map[string]string{suc.PlanLabelPrefix + suc.ServerPlan: "disabled"}), "labelled plan.upgrade.cattle.io/k3s-server=disabled: system-upgrade-controller leaves it out"},
		{"agent Plan disabled on an agent", node(false, map[string]string{suc.PlanLabelPrefix + suc.AgentPlan: "disabled"}), "labelled plan.upgrade.cattle.io/k3s-agent=disabled: system-upgrade-controller leaves it out"},
		{"agent Plan disabled on a server", node(true, map[string]string{suc.PlanLabelPrefix + suc.AgentPlan: "disabled"}), ""},
		{"a Plan's hash", node(false, map[string]string{suc.PlanLabelPrefix + suc.AgentPlan: "h1"}), ""},
	} {
		if got := p.LeftOut(c.n); got != c.reason {
			t.Errorf("%s: LeftOut %q, want %q", c.name, got, c.reason)
		}
	}
	if got := (&Poll{}).LeftOut(node(false, map[string]string{suc.OptOutLabel: "disabled"})); got != "" {
		t.Errorf("no Plans read yet: %q, want \"\"", got)
	}
}
