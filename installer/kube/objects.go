// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Get reads one object with `kubectl get RESOURCE NAME [-n NS] -o json` into a value of type T
// (a k8s.io/api type, or any struct/map matching the JSON). ns "" means cluster-scoped (or the
// default namespace). The error wraps ErrNotFound when the object does not exist.
func Get[T any](ctx context.Context, k Kubectl, resource, ns, name string) (*T, error) {
	args := []string{"get", resource, name, "-o", "json"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	out, err := k.Run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("%s: decoding %s %s: %w", k.R.Host(), resource, name, err)
	}
	return &v, nil
}

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

// List returns the objects of one or more resource types in one round trip:
// `kubectl get RESOURCES [-n NS | -A] [-l SELECTOR] -o json`. resources is a comma-separated
// list ("jobs,deployments"); ns "" lists every namespace.
func (k Kubectl) List(ctx context.Context, resources, ns, selector string) ([]Object, error) {
	args := []string{"get", resources, "-o", "json"}
	if ns == "" {
		args = append(args, "-A")
	} else {
		args = append(args, "-n", ns)
	}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	out, err := k.Run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("%s: decoding %s: %w", k.R.Host(), resources, err)
	}
	objs := make([]Object, 0, len(l.Items))
	for _, raw := range l.Items {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: decoding %s: %w", k.R.Host(), resources, err)
		}
		objs = append(objs, Object{Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Raw: raw})
	}
	return objs, nil
}

// Find returns the object of kind in namespace ns named name from objs, or nil.
func Find(objs []Object, kind, ns, name string) *Object {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Namespace == ns && objs[i].Name == name {
			return &objs[i]
		}
	}
	return nil
}

// GetDeployment returns the Deployment ns/name.
func (k Kubectl) GetDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return Get[appsv1.Deployment](ctx, k, "deployment", ns, name)
}

// GetJob returns the Job ns/name.
func (k Kubectl) GetJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	return Get[batchv1.Job](ctx, k, "job", ns, name)
}

// Logs returns the last tail lines of a pod's or workload's log: target is a pod name or
// "job/NAME", "deployment/NAME" (kubectl logs picks a pod). tail <= 0 means 20 lines.
func (k Kubectl) Logs(ctx context.Context, ns, target string, tail int) (string, error) {
	if tail <= 0 {
		tail = 20
	}
	out, err := k.Run(ctx, nil, "logs", "-n", ns, target, "--tail", strconv.Itoa(tail))
	return strings.TrimRight(string(out), "\n"), err
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
