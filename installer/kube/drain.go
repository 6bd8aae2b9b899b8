// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Drain and Uncordon are `kubectl drain` and `kubectl uncordon` written on client-go's typed
// calls. k3strap used k8s.io/kubectl/pkg/drain for them; that package brings in cli-runtime,
// kustomize and, through kustomize's plugin loader, Go's plugin package (127 packages in all).
// With cgo (a plain `go build` or `go install`) the plugin package makes the linker export every
// symbol: that binary was 110 MB instead of 81, and 63 MB of it was resident in every run instead
// of 30. The release's static build went from 85 to 81 MB, 38 to 34 MB resident
// (docs/architecture.md "The Kubernetes API"). The rules below are that package's, for the
// flags k3strap passed it: remove-node (docs/day2.md "Removing nodes") and an upgrade over SSH
// (README.md "Upgrades: over SSH or with system-upgrade-controller") drain with them.

// drainTiming is how often a drain asks again: after an eviction a PodDisruptionBudget refused
// (retry) and whether an evicted pod is gone (poll).
type drainTiming struct {
	retry, poll time.Duration
}

// kubectl drain's timing: an eviction refused with 429 is asked again after 5 s (its
// EvictErrorRetryDelay), an evicted pod is looked at every second until it is gone.
const (
	drainRetry = 5 * time.Second
	drainPoll  = time.Second
)

// Drain cordons node and evicts its pods as `kubectl drain NODE --ignore-daemonsets
// --delete-emptydir-data --force --timeout=TIMEOUT` does: mirror pods and pods of a DaemonSet
// that exists stay; pods with emptyDir volumes, pods no controller manages and finished pods
// are evicted (policy/v1 Eviction, the pod's own grace period); an eviction a
// PodDisruptionBudget refuses (429) or a terminating namespace refuses is asked again; each
// evicted pod is waited for until it is gone or replaced (another UID). It gives up after
// timeout with an error naming every pod left and why. A node that does not exist is a
// NotFound error (apierrors.IsNotFound); the caller's Ctrl-C returns ctx's error.
func (a *API) Drain(ctx context.Context, node string, timeout time.Duration) error {
	return a.drain(ctx, node, timeout, drainTiming{retry: drainRetry, poll: drainPoll})
}

func (a *API) drain(ctx context.Context, node string, timeout time.Duration, t drainTiming) error {
	if err := a.setUnschedulable(ctx, node, true); err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods, err := a.podsToEvict(dctx, node)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	type outcome struct {
		pod string
		err error
	}
	out := make(chan outcome, len(pods))
	for _, p := range pods {
		go func() { out <- outcome{p.Namespace + "/" + p.Name, a.evictAndWait(dctx, p, t)} }()
	}
	var left []string
	for range pods {
		o := <-out
		if o.err != nil {
			left = append(left, o.pod+": "+o.err.Error())
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	return fmt.Errorf("%s: drain %s: %d of %d pods not evicted within %s: %s", a.host, node, len(left), len(pods), timeout, strings.Join(left, "; "))
}

// Uncordon marks node schedulable again (`kubectl uncordon NODE`).
func (a *API) Uncordon(ctx context.Context, node string) error {
	return a.setUnschedulable(ctx, node, false)
}

// setUnschedulable sets node's spec.unschedulable (cordon: true) with a JSON merge patch,
// unless it is already so.
func (a *API) setUnschedulable(ctx context.Context, node string, on bool) error {
	n, err := a.GetNode(ctx, node)
	if err != nil {
		return err
	}
	if n.Spec.Unschedulable == on {
		return nil
	}
	verb := "uncordon "
	if on {
		verb = "cordon "
	}
	cctx, cancel := call(ctx)
	defer cancel()
	body := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err = a.Typed.CoreV1().Nodes().Patch(cctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{FieldManager: FieldManager})
	return a.wrap(verb+node, err)
}

// podsToEvict lists node's pods (ListPods) and keeps those a drain evicts (evictable), asking
// whether the DaemonSet of a DaemonSet's pod still exists (GetDaemonSet).
func (a *API) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := a.ListPods(ctx, metav1.NamespaceAll, node)
	if err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range list {
		evict, ds := evictable(p)
		if ds != "" {
			_, err := a.GetDaemonSet(ctx, p.Namespace, ds)
			switch {
			case apierrors.IsNotFound(err):
				evict = true // its DaemonSet is gone: nothing would bring it back (--force)
			case err != nil:
				return nil, err
			}
		}
		if evict {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// evictable says whether a drain evicts pod, by kubectl drain's filters for --force
// --ignore-daemonsets --delete-emptydir-data: a mirror pod (the kubelet's static pod) stays; a
// running pod whose controller is a DaemonSet stays while that DaemonSet exists (daemonSet
// names it, for the caller to ask); every other pod — finished, unmanaged, with emptyDir data —
// is evicted.
func evictable(pod corev1.Pod) (evict bool, daemonSet string) {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false, ""
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true, ""
	}
	if ref := metav1.GetControllerOf(&pod); ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" {
		return false, ref.Name
	}
	return true, ""
}

// evictAndWait evicts pod, asking again while a PodDisruptionBudget or a terminating namespace
// refuses, and waits until it is gone or replaced. It ends with ctx (the drain's timeout),
// saying what it was waiting for.
func (a *API) evictAndWait(ctx context.Context, pod corev1.Pod, t drainTiming) error {
	var refused error
	for {
		cctx, cancel := call(ctx)
		err := a.Typed.PolicyV1().Evictions(pod.Namespace).Evict(cctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		cancel()
		terminatingNS := apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
		if err == nil || (terminatingNS && pod.DeletionTimestamp != nil) {
			break
		}
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsTooManyRequests(err) || terminatingNS:
			refused = err
		case ctx.Err() != nil:
			return waitErr(ctx, "the eviction", refused)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return waitErr(ctx, "the eviction", refused)
		case <-time.After(t.retry):
		}
		cctx, cancel = call(ctx)
		fresh, err := a.Typed.CoreV1().Pods(pod.Namespace).Get(cctx, pod.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			pod = *fresh
		}
	}
	for {
		cctx, cancel := call(ctx)
		p, err := a.Typed.CoreV1().Pods(pod.Namespace).Get(cctx, pod.Name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return waitErr(ctx, "it to terminate after its eviction", err)
		case <-time.After(t.poll):
		}
	}
}

// waitErr says what a pod's drain was still waiting for when ctx ended, with the last refusal
// or error seen (nil: none).
func waitErr(ctx context.Context, what string, last error) error {
	msg := "timed out waiting for " + what
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "stopped waiting for " + what
	}
	if last != nil {
		msg += " (last answer: " + last.Error() + ")"
	}
	return errors.New(msg)
}
