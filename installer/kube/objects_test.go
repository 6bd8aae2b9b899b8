// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/installer/remote"
)

// fakeRunner answers kubectl command lines from a table (key: the args after "kubectl").
type fakeRunner struct {
	answers map[string]remote.Result
	seen    []string
}

func (f *fakeRunner) Host() string { return "cp1" }

func (f *fakeRunner) Run(_ context.Context, cmd remote.Cmd) (*remote.Result, error) {
	key := strings.Join(cmd.Args[2:], " ")
	f.seen = append(f.seen, key)
	if r, ok := f.answers[key]; ok {
		return &r, nil
	}
	return &remote.Result{ExitCode: 1, Stderr: []byte("error: unexpected " + key)}, nil
}

func TestListGetLogs(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"helm-install-rancher","namespace":"kube-system"},
  "status":{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded","message":"Job has reached the specified backoff limit"}]}},
 {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"rancher","namespace":"cattle-system"},"spec":{"replicas":2},
  "status":{"availableReplicas":2,"conditions":[{"type":"Available","status":"True"}]}}]}`
	f := &fakeRunner{answers: map[string]remote.Result{
		"get jobs,deployments -o json -A":                       {Stdout: []byte(list)},
		"get deployment missing -o json -n cattle-system":       {ExitCode: 1, Stderr: []byte(`Error from server (NotFound): deployments.apps "missing" not found`)},
		"logs -n kube-system job/helm-install-rancher --tail 5": {Stdout: []byte("+ helm install\nError: INSTALLATION FAILED: boom\n")},
	}}
	k := Kubectl{R: f}
	ctx := context.Background()
	objs, err := k.List(ctx, "jobs,deployments", "", "")
	if err != nil || len(objs) != 2 {
		t.Fatalf("List: %v %v", objs, err)
	}
	jo := Find(objs, "Job", "kube-system", "helm-install-rancher")
	var job batchv1.Job
	if jo == nil || jo.Decode(&job) != nil {
		t.Fatal("job not found")
	}
	if st, why := JobStatus(&job); st != JobFailed || !strings.Contains(why, "BackoffLimitExceeded") {
		t.Errorf("JobStatus %v %q", st, why)
	}
	var d appsv1.Deployment
	if err := Find(objs, "Deployment", "cattle-system", "rancher").Decode(&d); err != nil || !DeploymentAvailable(&d) {
		t.Errorf("deployment available: %v", err)
	}
	d.Status.AvailableReplicas = 1
	if DeploymentAvailable(&d) {
		t.Error("1 of 2 replicas counts as available")
	}
	if Find(objs, "Job", "kube-system", "other") != nil {
		t.Error("Find found a missing object")
	}
	if _, err := k.GetDeployment(ctx, "cattle-system", "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetDeployment of a missing one: %v", err)
	}
	if l, err := k.Logs(ctx, "kube-system", "job/helm-install-rancher", 5); err != nil || !strings.HasSuffix(l, "boom") {
		t.Errorf("Logs %q %v", l, err)
	}
}

func TestPodProblems(t *testing.T) {
	pods := []corev1.Pod{
		{Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) had untolerated taint(s)."}}}},
	}
	pods[1].Namespace, pods[1].Name = "cattle-system", "rancher-abc"
	got := PodProblems(pods)
	if len(got) != 1 || !strings.Contains(got[0], "cattle-system/rancher-abc Pending: Unschedulable 0/1 nodes") {
		t.Errorf("%v", got)
	}
}
