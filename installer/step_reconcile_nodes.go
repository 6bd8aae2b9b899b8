// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/drift"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/templates/cni"
	corev1 "k8s.io/api/core/v1"
)

// reconcileNodesStep keeps the nodes true to the inventory after bring-up, on every apply: it labels
// the nodes that kernelPolicy exclude keeps out of the CNI (and says so loudly), compares every
// node of the run with the inventory (taints and labels), repairs the drift with
// --reconcile-taints by read-modify-write (or reports it with the command that repairs it).
// See docs/failure-modes.md (F5).
//
// Reads: hostState.plan, s.pre.excluded; the cluster's nodes. Writes: node taints, labels and
// annotations (read-modify-write); host notes.
type reconcileNodesStep struct{}

func (reconcileNodesStep) Phase() events.Phase { return events.PhaseReconcileNodes }

func (reconcileNodesStep) Summary() string {
	return "compare node taints and labels with the inventory; label CNI-excluded nodes; repair drift with --reconcile-taints"
}

func (reconcileNodesStep) Run(ctx context.Context, s *session) error {
	if s.first == nil || s.first.c() == nil {
		return nil
	}
	// One view of the nodes serves both: the nodes no longer in the inventory, and the first
	// read of each node to reconcile (a write carries that read's resourceVersion; a conflict
	// reads again). Unreadable, each node is read on its own.
	byName, err := s.currentNodes(ctx)
	if err != nil {
		byName = nil
	}
	if err := s.reportOrPrune(ctx, byName); err != nil { // nodes no longer in the inventory
		return err
	}
	return s.reconcileNodes(ctx, s.first, byName)
}

// Preview reports the drift of every node of the run and what apply would write.
func (reconcileNodesStep) Preview(ctx context.Context, s *session) error {
	em := s.in.emitter(events.PhaseReconcileNodes)
	if s.first.facts == nil || !s.first.facts.K3s.Installed() || s.first.c() == nil {
		em.Info("", "the cluster does not exist yet: nodes get their taints and labels from node-taint / node-label when they register")
		return nil
	}
	byName, err := s.nodesByName(ctx)
	if err != nil {
		return s.hostFailure(s.first, "nodes", KindInstall, err)
	}
	if err := s.reportOrPrune(ctx, byName); err != nil { // nodes no longer in the inventory
		return err
	}
	for _, hs := range s.hosts {
		if hs.plan == nil {
			continue
		}
		nd := drift.Diff(byName[hs.host.Name], s.desired(hs))
		switch {
		case !nd.Registered:
			em.Info(hs.host.Name, "not registered yet: gets its taints and labels when it registers")
		case !nd.Drifted():
			em.Step(hs.host.Name, "taints", events.StatusUnchanged, "taints and labels match the inventory")
		default:
			rest := withoutCNILabel(nd)
			if nd.CNIExcluded != "" {
				c := events.Change{Kind: events.ChangeNode, Action: nd.CNIExcluded, Detail: nd.CNIExcluded + " label " + cni.ExcludedLabel}
				hs.addChange(c)
				em.Emit(events.Event{Type: events.Info, Host: hs.host.Name, Message: "would " + c.Detail, Change: &c})
			}
			if rest.Drifted() {
				verb, action := "would report (repair needs --reconcile-taints)", "report"
				if s.in.opts.ReconcileTaints {
					verb, action = "would repair", "repair"
				}
				c := events.Change{Kind: events.ChangeNode, Action: action, Detail: strings.Join(rest.Describe(), "; ")}
				hs.addChange(c)
				em.Emit(events.Event{Type: events.Info, Host: hs.host.Name, Message: verb + ": " + c.Detail, Change: &c})
			}
		}
	}
	return nil
}

// desired is what the inventory declares for hs's node, with the CNI-exclusion verdict of
// preflight when the host's facts were gathered.
func (s *session) desired(hs *hostState) drift.Desired {
	var ex *bool
	if hs.facts != nil && s.pre.excluded != nil {
		_, isEx := s.pre.excluded[hs.host.Name]
		ex = &isEx
	}
	return drift.DesiredFor(s.in.cluster, hs.host, ex)
}

// reconcileNodes is the nodes step on the cluster reached through first. listed is the
// cluster's node list by name, each node's first read (nil: every node is read on its own).
func (s *session) reconcileNodes(ctx context.Context, first *hostState, listed map[string]*corev1.Node) error {
	if first == nil || first.c() == nil {
		return nil
	}
	em := s.in.emitter(events.PhaseReconcileNodes)
	mode := drift.RepairCNILabel
	if s.in.opts.ReconcileTaints {
		mode = drift.RepairAll
	}
	var drifted []string
	for _, hs := range s.hosts {
		if hs.plan == nil && hs != first {
			continue // not worked on in this run (unreachable, or failed before planning)
		}
		d := s.desired(hs)
		var nd drift.Node
		var wrote bool
		// Transport failures reconnect and start over (s.retry): every attempt re-reads the
		// node and writes only with the resourceVersion it read, so a replace whose answer
		// was lost is harmless.
		read := listed[hs.host.Name]
		err := s.retry(ctx, first, "reconciling node "+hs.host.Name, func(ctx context.Context) error {
			node := read
			read = nil // an attempt after a transport failure reads the node again
			return first.withAPI(ctx, func(a *kube.API) (err error) {
				nd, wrote, err = drift.ReconcileFrom(ctx, a, d, mode, node, func(attempt int, err error) {
					em.Info(hs.host.Name, fmt.Sprintf("node %s changed since it was read (409 Conflict on attempt %d: a concurrent write); reading it again and retrying, so that write is kept", hs.host.Name, attempt))
				})
				return err
			})
		})
		if err != nil {
			return s.hostFailure(hs, "nodes", KindInstall, err)
		}
		lines := nd.Describe()
		switch {
		case !nd.Registered:
			em.Warn(hs.host.Name, lines[0])
		case mode == drift.RepairAll && nd.Drifted():
			em.Step(hs.host.Name, "taints", events.StatusChanged, "repaired: "+strings.Join(lines, "; "))
			hs.note(events.StatusChanged, "taints/labels repaired")
		case nd.Drifted():
			rest := withoutCNILabel(nd)
			if rest.Drifted() {
				drifted = append(drifted, hs.host.Name)
				em.Warn(hs.host.Name, "drift: "+strings.Join(rest.Describe(), "; ")+" — repair with `k3strap apply --reconcile-taints`")
			}
			if nd.CNIExcluded != "" {
				em.Step(hs.host.Name, "cni-label", events.StatusChanged, map[string]string{"add": "labelled", "remove": "unlabelled"}[nd.CNIExcluded]+" "+cni.ExcludedLabel)
			}
		case wrote:
			em.Debug(hs.host.Name, "recorded the declared taints and labels in "+drift.AnnotationTaints+" / "+drift.AnnotationLabels)
		}
		for _, t := range nd.ForeignTaints {
			em.Info(hs.host.Name, "taint "+t.String()+" is not in the inventory and was not put there by k3strap: left alone")
		}
	}
	if len(drifted) > 0 {
		em.Warn("", fmt.Sprintf("%d node(s) differ from the inventory: %s; run `k3strap apply --reconcile-taints` to repair, `k3strap check` to see", len(drifted), strings.Join(drifted, ", ")))
	}
	return nil
}

// withoutCNILabel is drift minus the CNI label (which apply always fixes).
func withoutCNILabel(d drift.Node) drift.Node {
	d.CNIExcluded = ""
	return d
}
