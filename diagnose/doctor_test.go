// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// doctorInput is a one-node cluster from the real captures: node (a fixture) gathered from host
// "vm" with the given journal fixture, evaluated an hour after the node registered.
func doctorInput(t *testing.T, nodeFile, journalFile string) Input {
	n := node(t, nodeFile)
	present := true
	f := &facts.DoctorNode{Host: facts.Host{Hostname: "vm"}, Unit: "k3s", ActiveState: "active", SubnetEnvPresent: &present,
		SubnetEnv: "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.0.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"}
	if journalFile != "" {
		f.Journal = lines(t, journalFile)
	}
	coredns := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-6d668d687-x2x8q",
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "coredns-6d668d687", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	return Input{Now: n.CreationTimestamp.Add(time.Hour), Nodes: []NodeEvidence{{Host: "vm", Node: n.Name, Facts: f}},
		View: facts.ClusterView{Nodes: []corev1.Node{*n}, Pods: []corev1.Pod{coredns}}, ViewHost: "vm"}
}

func ptr[T any](v T) *T { return &v }

func ids(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID+"@"+f.Host)
	}
	return out
}

func has(t *testing.T, fs []finding.Finding, id string) finding.Finding {
	t.Helper()
	for _, f := range fs {
		if f.ID+"@"+f.Host == id {
			return f
		}
	}
	t.Fatalf("no finding %s in %v", id, ids(fs))
	return finding.Finding{}
}

func TestDoctorF1FromRealCapture(t *testing.T) {
	fs := Findings(doctorInput(t, "node-f1.json", "log-lines-f1.txt"))
	f := has(t, fs, "F1-cloud-controller@vm")
	if f.Severity != finding.Error {
		t.Errorf("severity %s", f.Severity)
	}
	text := ""
	for _, e := range f.Evidence {
		text += e.Text + " [" + e.Source + "]\n"
	}
	for _, want := range []string{"for 1h0m0s", "cloud-provider=\"external\"", "Pending on the taint: kube-system/coredns", "restarted k3s 0 times"} {
		if !strings.Contains(text, want) {
			t.Errorf("evidence lacks %q:\n%s", want, text)
		}
	}
	// CoreDNS is blocked only by the uninitialized taint: F1's, not F3's.
	for _, x := range fs {
		if x.ID == "F3-pending-on-taint" {
			t.Errorf("F3 reported for the uninitialized taint: %+v", x)
		}
	}
	if finding.Worst(fs) != finding.Error {
		t.Errorf("worst %s", finding.Worst(fs))
	}
}

func TestDoctorGraceKeepsYoungTaint(t *testing.T) {
	in := doctorInput(t, "node-f1.json", "log-lines-f1.txt")
	in.Now = in.View.Nodes[0].CreationTimestamp.Add(10 * time.Second)
	for _, f := range Findings(in) {
		if f.ID == "F1-cloud-controller" {
			t.Fatal("F1 reported within the grace")
		}
	}
}

func TestDoctorDefaultNodeF3AndLostTaint(t *testing.T) {
	in := doctorInput(t, "node-default.json", "log-lines-default.txt")
	fs := Findings(in)
	// dedicated=edge:NoExecute (node-taint) blocks CoreDNS: F3 on vm.
	f := has(t, fs, "F3-pending-on-taint@vm")
	if !strings.Contains(f.Message, "dedicated=edge:NoExecute") || !strings.Contains(f.Title, "kube-system/coredns") {
		t.Errorf("F3: %s / %s", f.Title, f.Message)
	}
	// The taint removed after registration: F5, repairable.
	in.View.Nodes[0].Spec.Taints = nil
	delete(in.View.Nodes[0].Labels, "tier")
	fs = Findings(in)
	lost := has(t, fs, "F5-lost-taint@vm")
	if lost.Repair == nil || len(lost.Repair.Taints) != 1 || lost.Repair.Taints[0] != "dedicated=edge:NoExecute" {
		t.Errorf("repair %+v", lost.Repair)
	}
	if l := has(t, fs, "F5-lost-label@vm"); l.Repair.Labels["tier"] != "edge" {
		t.Errorf("label repair %+v", l.Repair)
	}
	// With an inventory the comparison is the inventory's.
	in.Intent = map[string]Intent{"vm": {Registered: true}}
	for _, f := range Findings(in) {
		if strings.HasPrefix(f.ID, "F5-lost") {
			t.Errorf("node-args F5 reported although the inventory declares the node: %s", f.ID)
		}
	}
}

func TestDoctorPodNetworkAndF4(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	absent := false
	in.Nodes[0].Facts.SubnetEnvPresent = &absent
	in.View.Nodes[0].Spec.Taints = append(in.View.Nodes[0].Spec.Taints, corev1.Taint{Key: "node-role.kubernetes.io/master", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	in.View.DaemonSets = []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-flannel", Name: "kube-flannel-ds"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}}}}
	web := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{NodeName: "vm"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	in.View.Pods = append(in.View.Pods, web)
	in.View.Events = []corev1.Event{{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, Type: "Warning", Reason: "FailedCreatePodSandBox",
		Message: `Failed to create pod sandbox: plugin type="flannel" failed (add): failed to load flannel 'subnet.env' file: open /run/flannel/subnet.env: no such file or directory`}}
	fs := Findings(in)
	pn := has(t, fs, "no-pod-network@vm")
	if !strings.Contains(pn.Message, "default/web") {
		t.Errorf("no-pod-network does not name the stuck pod: %s", pn.Message)
	}
	has(t, fs, "F4-cni-toleration@vm")
}

func TestDoctorCrashLoopLeadsWithFatal(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	f := in.Nodes[0].Facts
	f.ActiveState, f.SubState, f.Restarts = "activating", "auto-restart", 12
	f.Journal = journal(t, "journal-crashloop-readonly-sysctl.txt")
	c := has(t, Findings(in), "crash-loop@vm")
	if !fatalRE.MatchString(c.Evidence[0].Text) {
		t.Errorf("crash-loop evidence does not lead with the fatal line: %q", c.Evidence[0].Text)
	}
}

func TestDoctorCertsSkewEtcdDiskClock(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	f := in.Nodes[0].Facts
	f.Certs = []facts.Cert{{Path: "/var/lib/rancher/k3s/server/tls/serving-kube-apiserver.crt", Subject: "kube-apiserver", NotAfter: in.Now.Add(30 * 24 * time.Hour)}}
	f.DiskPath, f.DiskUsedPercent, f.DiskFreeKiB, f.DiskTotalKiB = "/var/lib/rancher", 91, 1000, 100000
	f.RemoteClock = in.Now
	in.Nodes[0].ClockSkew = 2 * time.Minute
	second := in.View.Nodes[0].DeepCopy()
	second.Name = "vm2"
	second.Status.NodeInfo.KubeletVersion = "v1.35.1+k3s1"
	in.View.Nodes[0].Labels[k3s.LabelEtcd] = "true"
	second.Labels[k3s.LabelEtcd] = "true"
	second.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}
	in.View.Nodes = append(in.View.Nodes, *second)
	fs := Findings(in)
	for _, id := range []string{"cert-expiring@vm", "disk-pressure@vm", "clock-skew@vm", "version-skew@vm2", "node-not-ready@vm2", "etcd-quorum@"} {
		has(t, fs, id)
	}
	if has(t, fs, "etcd-quorum@").Severity != finding.Error {
		t.Error("1 of 2 etcd members up is lost quorum")
	}
}

// An agent unit activating with no restart is K3s before READY (docs/k3s.md "Readiness of the
// unit"), not a crash loop, even when the journal is full of image pull errors; after slowStart
// without READY it is a slow start (warning) whose evidence is no pull error.
func TestDoctorActivatingIsNotCrashLoop(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	f := in.Nodes[0].Facts
	f.Unit, f.ActiveState, f.SubState, f.Restarts = "k3s-agent", "activating", "start", 0
	f.StartedAt = in.Now.Add(-55 * time.Second)
	f.Journal = []string{
		`Nov 25 19:44:01 h2 k3s[412]: E1125 19:44:01.123456     412 log.go:32] "PullImage from image service failed" err="rpc error: code = Unknown desc = failed to pull image \"rancher/mirrored-pause:3.10.2\""`,
		`Nov 25 19:44:02 h2 k3s[412]: time="2026-11-25T19:44:02Z" level=info msg="Annotations and labels have been set successfully on node: h2"`,
	}
	for _, x := range Findings(in) {
		if x.ID == "crash-loop" || x.ID == "slow-start" {
			t.Errorf("55 s activating without restart reported as %s: %s", x.ID, x.Message)
		}
	}
	f.StartedAt = in.Now.Add(-12 * time.Minute)
	slow := has(t, Findings(in), "slow-start@vm")
	if slow.Severity != finding.Warning {
		t.Errorf("slow start severity %s", slow.Severity)
	}
	for _, e := range slow.Evidence {
		if imagePullRE.MatchString(e.Text) {
			t.Errorf("slow-start evidence is an image pull error: %q", e.Text)
		}
	}
	// Restarts make it a crash loop; image pull errors are never its evidence.
	f.SubState, f.Restarts = "auto-restart", 3
	c := has(t, Findings(in), "crash-loop@vm")
	for _, e := range c.Evidence {
		if imagePullRE.MatchString(e.Text) {
			t.Errorf("crash-loop evidence is an image pull error: %q", e.Text)
		}
	}
}

// Inside the grace the uninitialized taint is not judged, but doctor says it is there and since
// when (info, no change of exit code).
func TestDoctorYoungTaintSaysSinceWhen(t *testing.T) {
	in := doctorInput(t, "node-f1.json", "log-lines-f1.txt")
	in.Now = in.View.Nodes[0].CreationTimestamp.Add(55 * time.Second)
	in.TaintGrace = time.Minute
	fs := Findings(in)
	f := has(t, fs, "uninitialized-taint@vm")
	if f.Severity != finding.Info || !strings.Contains(f.Message, "since "+in.View.Nodes[0].CreationTimestamp.UTC().Format(time.RFC3339)) ||
		!strings.Contains(f.Message, "55s ago") {
		t.Errorf("young taint: %s %q", f.Severity, f.Message)
	}
	if finding.Worst(fs) == finding.Error {
		t.Errorf("a young taint made the verdict an error: %v", ids(fs))
	}
}

// A finding judges the present: sandbox events about a missing subnet.env that are older than
// the subnet.env the same run read on the host are history; newer ones are evidence.
func TestDoctorPodNetworkJudgesThePresent(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	written := in.Now.Add(-2 * time.Minute)
	in.Nodes[0].Facts.SubnetEnvWritten = written
	in.Nodes[0].Facts.StartedAt = in.Now.Add(-3 * time.Minute)
	web := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{NodeName: "vm"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	in.View.Pods = append(in.View.Pods, web)
	ev := corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}, Type: "Warning", Reason: "FailedCreatePodSandBox",
		Message:       `Failed to create pod sandbox: plugin type="flannel" failed (add): failed to load flannel 'subnet.env' file: open /run/flannel/subnet.env: no such file or directory`,
		LastTimestamp: metav1.NewTime(written.Add(-30 * time.Second))}
	in.View.Events = []corev1.Event{ev}
	for _, f := range Findings(in) {
		if f.ID == "no-pod-network" {
			t.Errorf("an event older than subnet.env made a finding: %s", f.Message)
		}
	}
	// Without the file's time, a valid subnet.env read by this run still wins.
	in.Nodes[0].Facts.SubnetEnvWritten = time.Time{}
	in.Nodes[0].Facts.StartedAt = time.Time{}
	for _, f := range Findings(in) {
		if f.ID == "no-pod-network" {
			t.Errorf("a finding contradicts the subnet.env this run read: %s", f.Message)
		}
	}
	// An event after the file was written is the present.
	in.Nodes[0].Facts.SubnetEnvWritten = written
	in.View.Events[0].LastTimestamp = metav1.NewTime(written.Add(30 * time.Second))
	has(t, Findings(in), "no-pod-network@vm")
}

// Pods that cannot pull their images (the sandbox's pause image on an airgap host without the
// images archive, the real K3s v1.36.3 message) are named with the images and the airgap fix;
// pods that run, and events from before the unit's last start, are not.
func TestDoctorImagePull(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	in.Nodes[0].Facts.StartedAt = in.Now.Add(-10 * time.Minute)
	coredns := &in.View.Pods[0]
	coredns.Spec.NodeName = "vm"
	msg := `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to pull image "rancher/mirrored-pause:3.10.2": failed to pull and unpack image "docker.io/rancher/mirrored-pause:3.10.2": failed to resolve reference "docker.io/rancher/mirrored-pause:3.10.2": failed to do request: Head "https://registry-1.docker.io/v2/rancher/mirrored-pause/manifests/3.10.2": dial tcp: lookup registry-1.docker.io: Temporary failure in name resolution`
	old := corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: coredns.Name}, Type: "Warning", Reason: "FailedCreatePodSandBox",
		Message: msg, LastTimestamp: metav1.NewTime(in.Now.Add(-20 * time.Minute))}
	in.View.Events = []corev1.Event{old}
	for _, f := range Findings(in) {
		if f.ID == "image-pull" {
			t.Fatalf("an event from before the unit's start made a finding: %s", f.Message)
		}
	}
	recent := old
	recent.LastTimestamp = metav1.NewTime(in.Now.Add(-time.Minute))
	in.View.Events = []corev1.Event{recent}
	f := has(t, Findings(in), "image-pull@vm")
	if f.Severity != finding.Error || !strings.Contains(f.Message, "rancher/mirrored-pause:3.10.2") || !strings.Contains(f.Message, "kube-system/coredns") ||
		!strings.Contains(strings.Join(f.Fixes, "\n"), "/var/lib/rancher/k3s/agent/images/") {
		t.Errorf("image-pull: %s %q fixes %q", f.Severity, f.Message, f.Fixes)
	}
	coredns.Status.Phase = corev1.PodRunning
	for _, f := range Findings(in) {
		if f.ID == "image-pull" {
			t.Errorf("a running pod made an image-pull finding: %s", f.Message)
		}
	}
}

// One restart is systemd recovering from one exit (a SIGKILL, the OOM killer): the unit
// starting again is not a crash loop but a restart worth a warning; a second restart makes it
// one (k3s.CrashLoop, the rule the bring-up supervisor uses too), as does an exit waiting for
// its restart after a restart.
func TestDoctorOneRestartIsNotACrashLoop(t *testing.T) {
	in := doctorInput(t, "node-default.json", "")
	f := in.Nodes[0].Facts
	f.ActiveState, f.SubState, f.Restarts = "activating", "start", 1
	f.StartedAt = in.Now.Add(-20 * time.Second)
	f.Journal = journal(t, "journal-crashloop-readonly-sysctl.txt")
	for _, x := range Findings(in) {
		if x.ID == "crash-loop" {
			t.Fatalf("one restart reported as a crash loop: %s", x.Message)
		}
	}
	if w := has(t, Findings(in), "service-restarts@vm"); w.Severity != finding.Warning {
		t.Errorf("one restart: severity %s", w.Severity)
	}
	for _, st := range []struct {
		sub      string
		restarts int
	}{{"start", 2}, {"auto-restart", 1}} {
		f.SubState, f.Restarts = st.sub, st.restarts
		has(t, Findings(in), "crash-loop@vm")
	}
}
