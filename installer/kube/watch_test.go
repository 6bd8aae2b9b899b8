// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func nodeRV(name, rv string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// TestWatchNodes: the listed nodes come first (ADDED), the watch starts at the list's
// resourceVersion, its events follow in order, and a watch the server closes is resumed from
// the last resourceVersion seen — nothing lost, nothing twice.
func TestWatchNodes(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []corev1.Node{*nodeRV("cp1", "9")}}, nil
	})
	var fromRV []string
	watchers := make(chan *watch.FakeWatcher, 2)
	cs.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		fromRV = append(fromRV, a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
		w := watch.NewFakeWithChanSize(10, false)
		watchers <- w
		return true, w, nil
	})
	a := New("cp1", cs, nil)
	var got []string
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{}, 10)
	go func() {
		done <- WatchNodes(ctx, a, time.Minute, func(ev NodeEvent) {
			got = append(got, ev.Type+" "+ev.Node.Name+" "+ev.Node.ResourceVersion)
			seen <- struct{}{}
		})
	}()
	<-seen // the listed node
	w := <-watchers
	w.Modify(nodeRV("a1", "12"))
	w.Delete(nodeRV("a2", "13"))
	<-seen
	<-seen
	w.Stop() // the API server ends the watch: resumed from 13
	w2 := <-watchers
	w2.Add(nodeRV("a3", "14"))
	<-seen
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a watch ended by its context: %v, want nil", err)
	}
	if want := "ADDED cp1 9|MODIFIED a1 12|DELETED a2 13|ADDED a3 14"; strings.Join(got, "|") != want {
		t.Errorf("events %q, want %q", strings.Join(got, "|"), want)
	}
	if strings.Join(fromRV, ",") != "10,13" {
		t.Errorf("watches started at resourceVersions %v, want the list's 10, then the last seen 13", fromRV)
	}
}

// TestWatchNodesGoneAndDown: a resourceVersion too old (410 Gone) ends the watch with a typed
// error (the caller lists again); a list that fails is an error naming the host; the watch
// ends on its own after maxAge.
func TestWatchNodesGoneAndDown(t *testing.T) {
	cs := fake.NewClientset(nodeRV("cp1", ""))
	cs.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(1, false)
		w.Error(&apierrors.NewResourceExpired("too old resource version: 5 (20)").ErrStatus)
		return true, w, nil
	})
	err := WatchNodes(context.Background(), New("cp1", cs, nil), time.Minute, func(NodeEvent) {})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("410 from the watch: %v, want a Gone/Expired error", err)
	}

	cs = fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("apiserver not ready")
	})
	err = WatchNodes(context.Background(), New("cp1", cs, nil), time.Minute, func(NodeEvent) {})
	if !IsAPIDown(err) || !strings.HasPrefix(err.Error(), "cp1: list nodes") {
		t.Errorf("a failing list: %v, want an API-down error naming cp1", err)
	}

	cs = fake.NewClientset(nodeRV("cp1", ""))
	start := time.Now()
	err = WatchNodes(context.Background(), New("cp1", cs, nil), 200*time.Millisecond, func(NodeEvent) {})
	if err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("a quiet watch: %v after %s, want nil after maxAge", err, time.Since(start))
	}
}
