// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// NodeEvent is one change of a Node seen by WatchNodes. Type is ADDED, MODIFIED or DELETED.
type NodeEvent struct {
	Type string
	Node corev1.Node
}

// WatchNodes lists the Nodes and calls onEvent for each (as ADDED), then watches them from
// the list's resourceVersion and calls onEvent for every change, from one goroutine, in order.
// A watch the API server closes is resumed from the last resourceVersion seen
// (client-go's RetryWatcher), so no change is lost or seen twice. It returns nil when ctx
// ends or after maxAge, and an error when the list fails or the watch cannot be resumed
// (410 Gone: the resourceVersion is too old — list again).
func WatchNodes(ctx context.Context, a *API, maxAge time.Duration, onEvent func(NodeEvent)) error {
	ctx, cancel := context.WithTimeout(ctx, maxAge)
	defer cancel()
	lctx, lcancel := call(ctx)
	l, err := a.Typed.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	lcancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return a.wrap("list nodes", err)
	}
	for i := range l.Items {
		onEvent(NodeEvent{Type: string(watch.Added), Node: l.Items[i]})
	}
	nodes := a.Typed.CoreV1().Nodes()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, o)
		},
	})
	if err != nil {
		return a.wrap("watch nodes", err)
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if n, ok := ev.Object.(*corev1.Node); ok {
					onEvent(NodeEvent{Type: string(ev.Type), Node: *n})
				}
			case watch.Error:
				return fmt.Errorf("%s: watch nodes: %w", a.host, apierrors.FromObject(ev.Object))
			}
		}
	}
}
