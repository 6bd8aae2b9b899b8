// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/bringup"
	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/k3s"
)

// joinSelfStep joins the local host (connection: local) to a cluster whose first server it
// cannot reach over SSH (docs/edge-first-boot.md): the box's clock is compared with the API
// server's (the wait-api answer's Date; over k3s.ClockSkewError apart is refused before
// anything is written), then the box is converged with the cluster's token from the
// inventory (the seed's token file) — upload, install, enable, start, exactly as a join over
// SSH — and its node awaited through the node's own identity (the kubelet's kubeconfig: the
// node authorizer lets a node read its Node) until Ready with its declared labels and taints,
// within --timeout; a node that matches its inventory then records, as itself, the taints and
// labels the inventory declared (drift.AnnotationTaints, drift.AnnotationLabels) unless the
// record is current. A box already joined and unchanged changes nothing.
//
// Reads: the local host's plan and facts, s.join.apiDate, spec.k3s.token. Writes: s.join.token, the host's result, its node's record annotations.
type joinSelfStep struct{}

func (joinSelfStep) Phase() events.Phase { return events.PhaseJoinSelf }

func (joinSelfStep) Summary() string {
	return "this box's clock against the API's; converge with the cluster's token; its node Ready with its labels and taints (read as the node)"
}

func (j joinSelfStep) Preview(ctx context.Context, s *session) error {
	hs, err := j.prepare(s)
	if err != nil {
		return err
	}
	_, err = s.converge(ctx, hs)
	return err
}

// prepare finds the local host, checks the clock and sets the token.
func (joinSelfStep) prepare(s *session) (*hostState, error) {
	var hs *hostState
	for _, h := range s.hosts {
		if h.host.IsLocal() && h.plan != nil {
			hs = h
		}
	}
	if hs == nil {
		return nil, &Failure{Kind: KindInvalid, Phase: events.PhaseJoinSelf, Info: events.ErrorInfo{
			Message: "no local host to join: join-self runs on a box whose inventory host has connection: local",
			Fix:     "run `k3strap firstboot run` on the box its seed was written for",
		}}
	}
	if !s.join.apiDate.IsZero() {
		skew := s.join.apiLocal.Sub(s.join.apiDate)
		if skew < 0 {
			skew = -skew
		}
		// The Date header has a one-second resolution.
		if skew > k3s.ClockSkewError+time.Second {
			hs.setResult(events.StatusFailed, "clock off")
			return nil, &Failure{Kind: KindPreflight, Phase: events.PhaseJoinSelf, Step: "clock", Host: hs.host.Name, Info: events.ErrorInfo{
				Message: fmt.Sprintf("this box's clock is %s off the cluster's API server (box %s, server %s); over %s K3s certificates and etcd fail",
					skew.Round(time.Second), s.join.apiLocal.UTC().Format(time.RFC3339), s.join.apiDate.UTC().Format(time.RFC3339), k3s.ClockSkewError),
				Fix:    "set the box's clock (NTP/chrony, or timedatectl set-time) to the server's time; nothing was installed",
				Resume: "reboot the box or `systemctl restart k3strap-firstboot`",
			}}
		}
	}
	tok := s.in.cluster.Spec.K3s.Token
	if tok == "" {
		return nil, &Failure{Kind: KindInvalid, Phase: events.PhaseJoinSelf, Host: hs.host.Name, Info: events.ErrorInfo{
			Message: "a box joining by itself needs the cluster's token, and none was given",
			Fix:     "write the seed again with `k3strap firstboot seed` (it carries the token), or set spec.k3s.token / $K3STRAP_K3S_TOKEN",
		}}
	}
	s.join.token = tok
	hs.plan.SetToken(tok, false)
	return hs, nil
}

func (j joinSelfStep) Run(ctx context.Context, s *session) error {
	hs, err := j.prepare(s)
	if err != nil {
		return err
	}
	res, err := s.converge(ctx, hs)
	if err != nil {
		return err
	}
	hs.setResult(res.status(), res.describe()+"; its node was not Ready yet when the run ended")
	if err := s.waitOwnNode(ctx, hs, res); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return s.hostFailure(hs, "node", KindInstall, err)
	}
	hs.setResult(res.status(), res.describe())
	return nil
}

// ownNodeInterval is how often waitOwnNode reads the node.
const ownNodeInterval = 2 * time.Second

// waitOwnNode waits, within --timeout, until hs's node is Ready (with a heartbeat since a
// restart this run made) and, for a node this run created, carries its declared labels and
// taints and flannel's lease (bringup.NodeWait.Lacks); every 30 s it says what the node still
// lacks.
func (s *session) waitOwnNode(ctx context.Context, hs *hostState, res convergeResult) error {
	var since time.Time
	if !res.started.IsZero() {
		since = res.started.Add(-2 * time.Second)
	}
	// The node's own identity: the kubelet's kubeconfig (the node authorizer lets a node read
	// its Node); connected again after a failure (K3s may not have written it yet).
	var k *kube.API
	em := s.in.emitter(s.current)
	start := time.Now()
	deadline := start.Add(s.in.opts.Timeout)
	want := &bringup.NodeWait{
		Host: hs.host, Taints: s.in.cluster.HostTaints(hs.host), Declared: hs.fresh, Since: since,
		WantEtcd:    hs.host.EtcdMember() && len(s.in.cluster.Servers()) > 1,
		WantFlannel: hs.fresh && s.in.cluster.EmbeddedFlannel(),
	}
	why, lastBeat := "not registered yet", start
	for {
		var n *corev1.Node
		var err error
		if k == nil {
			k, err = kube.ConnectAs(ctx, func() kube.Conn { return hs.c() }, k3s.PathKubeletKubeconfig)
		}
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err = k.GetNode(rctx, hs.host.Name)
			cancel()
		}
		if err == nil {
			if why = want.Lacks(n); why == "" {
				em.Step(hs.host.Name, "node", events.StatusOK, "node Ready")
				// The record of what the inventory declared (docs/failure-modes.md F5), written
				// as the node itself — no one else here can — when the node matches its
				// inventory and the record is not current (a new node, or one a k3strap
				// without this joined); nothing is written otherwise.
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := s.recordDeclaredOn(rctx, k, hs, n); err != nil && ctx.Err() == nil {
					em.Warn(hs.host.Name, "the node could not record its declared taints and labels ("+drift.AnnotationTaints+", "+drift.AnnotationLabels+"): "+err.Error()+"; a later `k3strap apply` from a workstation records them")
				}
				cancel()
				return nil
			}
		} else if apierrors.IsNotFound(err) {
			why = "not registered yet"
		} else if ctx.Err() == nil {
			why = "its node cannot be read yet: " + err.Error()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready after %s: %s (see `journalctl -u %s`)", hs.host.Name, s.in.opts.Timeout, why, hs.plan.Service)
		}
		if time.Since(lastBeat) >= 30*time.Second {
			lastBeat = time.Now()
			em.Info(hs.host.Name, fmt.Sprintf("waiting for node %s (%s): %s", hs.host.Name, time.Since(start).Round(time.Second), why))
		}
		t := time.NewTimer(ownNodeInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
