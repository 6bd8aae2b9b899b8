// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/kubectl/pkg/drain"
)

// lockedBuffer collects what the drain helper prints (it prints from several goroutines).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

// Drain cordons node and evicts its pods as `kubectl drain NODE --ignore-daemonsets
// --delete-emptydir-data --force --timeout=TIMEOUT` does (k8s.io/kubectl/pkg/drain, the code
// behind that command): DaemonSet pods stay, pods with emptyDir volumes and pods no controller
// manages are evicted too, PodDisruptionBudgets are honoured (an eviction they refuse is tried
// again), and it gives up after timeout with an error naming the pods left.
func (a *API) Drain(ctx context.Context, node string, timeout time.Duration) error {
	var out lockedBuffer
	h := &drain.Helper{Ctx: ctx, Client: a.Typed, Force: true, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, GracePeriodSeconds: -1, Timeout: timeout, Out: &out, ErrOut: &out}
	n, err := a.GetNode(ctx, node)
	if err != nil {
		return err
	}
	if err := drain.RunCordonOrUncordon(h, n, true); err != nil {
		return a.wrap("cordon "+node, err)
	}
	if err := drain.RunNodeDrain(h, node); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s := out.String(); s != "" {
			return fmt.Errorf("%s: drain %s: %w (%s)", a.host, node, err, lastLines(s, 5))
		}
		return a.wrap("drain "+node, err)
	}
	return nil
}

// Uncordon marks node schedulable again (`kubectl uncordon NODE`).
func (a *API) Uncordon(ctx context.Context, node string) error {
	n, err := a.GetNode(ctx, node)
	if err != nil {
		return err
	}
	cctx, cancel := call(ctx)
	defer cancel()
	h := &drain.Helper{Ctx: cctx, Client: a.Typed}
	return a.wrap("uncordon "+node, drain.RunCordonOrUncordon(h, n, false))
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "; ")
}
