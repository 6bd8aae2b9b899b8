// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// drainPod is a pod on node a1 with the given controller (kind "" for none).
func drainPod(ns, name, kind, owner string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec: corev1.PodSpec{NodeName: "a1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if kind != "" {
		api := "apps/v1"
		if kind == "Job" {
			api = "batch/v1"
		}
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: api, Kind: kind, Name: owner, Controller: &yes}}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// evictions records the pods evicted and answers each eviction: 429 refusals times for the
// pods in refuse (forever when < 0), else the pod is deleted as the API server does once the
// eviction is admitted.
type evictions struct {
	mu      sync.Mutex
	evicted []string
	refuse  map[string]int
}

func (e *evictions) react(cs *fake.Clientset) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		key := a.GetNamespace() + "/" + name
		e.mu.Lock()
		defer e.mu.Unlock()
		if n := e.refuse[key]; n != 0 {
			e.refuse[key] = n - 1
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		if err := cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), name); err != nil {
			return true, nil, err
		}
		e.evicted = append(e.evicted, key)
		return true, nil, nil
	}
}

func (e *evictions) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]string(nil), e.evicted...)
	sort.Strings(out)
	return out
}

// TestDrain: kubectl drain's rules for --force --ignore-daemonsets --delete-emptydir-data —
// which pods are evicted and which stay, a PodDisruptionBudget's refusal asked again, the node
// cordoned, and a drain that cannot finish naming the pod left and the refusal.
func TestDrain(t *testing.T) {
	fast := drainTiming{retry: 10 * time.Millisecond, poll: 10 * time.Millisecond}
	ctx := context.Background()
	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a1"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "svclb"}},
		drainPod("default", "web-1", "ReplicaSet", "web"),
		drainPod("kube-system", "svclb-x", "DaemonSet", "svclb"),
		drainPod("kube-system", "orphan-ds", "DaemonSet", "gone"),
		drainPod("kube-system", "kube-vip-a1", "", "", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}),
		drainPod("default", "bare", "", ""),
		drainPod("default", "cache", "StatefulSet", "cache", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}),
		drainPod("default", "done-job", "Job", "done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	}
	cs := fake.NewClientset(objs...)
	ev := &evictions{refuse: map[string]int{"default/web-1": 2}}
	cs.PrependReactor("create", "pods", ev.react(cs))
	var selector string
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		selector = a.(k8stesting.ListAction).GetListRestrictions().Fields.String()
		return false, nil, nil
	})
	a := New("cp1", cs, nil)
	if err := a.drain(ctx, "a1", 5*time.Second, fast); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if selector != "spec.nodeName=a1" {
		t.Errorf("pods listed with field selector %q, want spec.nodeName=a1", selector)
	}
	want := []string{"default/bare", "default/cache", "default/done-job", "default/web-1", "kube-system/orphan-ds"}
	if got := ev.list(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("evicted %v, want %v (the DaemonSet's pod and the mirror pod stay)", got, want)
	}
	if ev.refuse["default/web-1"] != 0 {
		t.Errorf("web-1 was refused twice and should have been asked again: %d refusals left", ev.refuse["default/web-1"])
	}
	n, err := a.GetNode(ctx, "a1")
	if err != nil || !n.Spec.Unschedulable {
		t.Fatalf("node after the drain: %v %v, want cordoned", n, err)
	}
	if err := a.Uncordon(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.GetNode(ctx, "a1"); n.Spec.Unschedulable {
		t.Error("uncordon left the node unschedulable")
	}

	// A budget that never allows the eviction: the drain ends at its timeout, naming the pod
	// and the refusal; the other pod is evicted.
	cs = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a1"}},
		drainPod("default", "db-0", "StatefulSet", "db"), drainPod("default", "web-2", "ReplicaSet", "web"))
	ev = &evictions{refuse: map[string]int{"default/db-0": -1}}
	cs.PrependReactor("create", "pods", ev.react(cs))
	a = New("cp1", cs, nil)
	err = a.drain(ctx, "a1", 200*time.Millisecond, fast)
	if err == nil || !strings.Contains(err.Error(), "cp1: drain a1: 1 of 2 pods not evicted within 200ms: default/db-0: timed out waiting for the eviction") ||
		!strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("blocked drain: %v, want the pod left and the budget's refusal", err)
	}
	if got := ev.list(); len(got) != 1 || got[0] != "default/web-2" {
		t.Errorf("blocked drain evicted %v, want default/web-2", got)
	}

	// A pod evicted but still terminating: the drain waits for it, and ends with it gone.
	cs = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a1"}}, drainPod("default", "slow", "ReplicaSet", "slow"))
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "slow")
		}()
		return true, nil, nil
	})
	a = New("cp1", cs, nil)
	start := time.Now()
	if err := a.drain(ctx, "a1", 5*time.Second, fast); err != nil {
		t.Errorf("terminating pod: %v", err)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("the drain ended after %s, before the evicted pod was gone", el)
	}

	// No such node: a NotFound the caller tells apart; Ctrl-C: the context's error.
	if err := a.Drain(ctx, "nope", time.Second); !apierrors.IsNotFound(err) {
		t.Errorf("missing node: %v, want NotFound", err)
	}
	cs = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a1"}}, drainPod("default", "db-0", "StatefulSet", "db"))
	cs.PrependReactor("create", "pods", (&evictions{refuse: map[string]int{"default/db-0": -1}}).react(cs))
	a = New("cp1", cs, nil)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := a.drain(cctx, "a1", time.Minute, fast); err != context.Canceled {
		t.Errorf("cancelled drain: %v, want context.Canceled", err)
	}
}

func TestEvictable(t *testing.T) {
	for _, c := range []struct {
		pod   *corev1.Pod
		evict bool
		ds    string
	}{
		{drainPod("d", "rs", "ReplicaSet", "x"), true, ""},
		{drainPod("d", "bare", "", ""), true, ""},
		{drainPod("d", "ds", "DaemonSet", "agent"), false, "agent"},
		{drainPod("d", "ds-done", "DaemonSet", "agent", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), true, ""},
		{drainPod("d", "mirror", "", "", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "h"} }), false, ""},
	} {
		evict, ds := evictable(*c.pod)
		if evict != c.evict || ds != c.ds {
			t.Errorf("%s: evictable = %v %q, want %v %q", c.pod.Name, evict, ds, c.evict, c.ds)
		}
	}
}
