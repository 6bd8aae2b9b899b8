// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Object is one item of a mixed list (`kubectl get jobs,deployments -o json`): its kind and
// name, and the raw JSON to decode with Decode.
type Object struct {
	Kind      string
	Namespace string
	Name      string
	Raw       json.RawMessage
}

// Decode unmarshals the object into v.
func (o Object) Decode(v any) error { return json.Unmarshal(o.Raw, v) }

// Find returns the object of kind in namespace ns named name from objs, or nil.
func Find(objs []Object, kind, ns, name string) *Object {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Namespace == ns && objs[i].Name == name {
			return &objs[i]
		}
	}
	return nil
}

// DeploymentAvailable reports whether d has its Available condition True and every desired
// replica available (appsv1 DeploymentAvailable, as `kubectl rollout status` judges it).
func DeploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.AvailableReplicas < want {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// JobState is how far a Job got.
type JobState int

// Job states.
const (
	JobRunning JobState = iota
	JobComplete
	JobFailed
)

// JobStatus returns whether j completed, failed (condition Failed, e.g. BackoffLimitExceeded)
// or is still running, and the reason/message of a failure.
func JobStatus(j *batchv1.Job) (JobState, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return JobComplete, ""
		case batchv1.JobFailed:
			return JobFailed, strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return JobRunning, ""
}

// PodProblems describes why pods selected by labels in ns are not running: unschedulable
// messages (untolerated taints), waiting reasons (ImagePullBackOff, CrashLoopBackOff) and
// restart counts, one line per pod, for evidence in errors. It returns nil when every pod
// runs or none exists.
func PodProblems(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		msg := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg += ": " + strings.TrimSpace(c.Reason+" "+c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				msg += fmt.Sprintf(": container %s %s %s", cs.Name, w.Reason, w.Message)
			}
			if cs.RestartCount > 0 {
				msg += fmt.Sprintf(" (%d restarts)", cs.RestartCount)
			}
		}
		out = append(out, fmt.Sprintf("pod %s/%s %s", p.Namespace, p.Name, strings.TrimSpace(msg)))
	}
	return out
}
