// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package drift compares a node's taints and labels with what the inventory declares and
// repairs the difference by read-modify-write (docs/failure-modes.md F5): `apply` (the
// reconcile-nodes step), `check` and `doctor --fix` share it. It talks to the cluster only
// through API (*kube.API implements it).
package drift

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/cni"
)

// Annotations k3strap keeps on each node to remember what it manages (docs/failure-modes.md F5).
// K3s applies node-taint and node-label only when a node registers, and its k3s.io/node-args
// annotation follows the current config, so neither says which taints k3strap put on a node
// earlier; without this record a taint dropped from the inventory could not be told apart
// from one another controller added.
const (
	// AnnotationTaints lists the taints (key[=value]:Effect, comma-separated, sorted) the
	// inventory declared the last time the node matched it.
	AnnotationTaints = "k3strap.io/taints"
	// AnnotationLabels lists the label keys (comma-separated, sorted) the inventory declared
	// the last time the node matched it.
	AnnotationLabels = "k3strap.io/labels"
)

// API is what node reconciliation needs from the cluster (*kube.API implements it).
type API interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	ListNodes(ctx context.Context) ([]corev1.Node, error)
	ReplaceNode(ctx context.Context, n *corev1.Node) error
}

// cniLabelWant says what k3strap expects of a node's cni.ExcludedLabel.
type cniLabelWant int

const (
	cniLabelUnjudged cniLabelWant = iota // not known (check without facts): left alone
	cniLabelAbsent                       // must not be there (strict policy, or kernel fine)
	cniLabelPresent                      // must be "true" (excluded by kernelPolicy exclude)
)

// Desired is what the inventory says one node should carry.
type Desired struct {
	// Name is the node (= inventory host) name.
	Name string
	// Taints are the declared taints (inventory.Cluster.HostTaints).
	Taints []inventory.Taint
	// Labels are the declared labels (spec.hosts[].labels plus node-label of the K3s config).
	Labels map[string]string
	// cniLabel is the expectation for cni.ExcludedLabel.
	cniLabel cniLabelWant
}

// DesiredFor returns what c declares for h. excluded says whether kernelPolicy exclude keeps
// h out of the CNI; nil when unknown (no facts).
func DesiredFor(c *inventory.Cluster, h *inventory.Host, excluded *bool) Desired {
	d := Desired{Name: h.Name, Taints: c.HostTaints(h), Labels: map[string]string{}}
	for _, l := range c.HostConfig(h).NodeLabel {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && k != "" {
			d.Labels[k] = v
		}
	}
	switch {
	case c.Spec.CNI.KernelPolicy != inventory.KernelPolicyExclude || !cni.Excludable(c.Spec.CNI.Type):
		d.cniLabel = cniLabelAbsent
	case excluded == nil:
		d.cniLabel = cniLabelUnjudged
	case *excluded:
		d.cniLabel = cniLabelPresent
	default:
		d.cniLabel = cniLabelAbsent
	}
	return d
}

// LabelChange is a declared label whose value on the node differs (Have "" and Missing true
// when absent).
type LabelChange struct {
	Key, Want, Have string
	Missing         bool
}

// Node is how one node differs from the inventory (docs/failure-modes.md F5).
type Node struct {
	// Node is the node name.
	Node string
	// Registered is false when the cluster has no Node of that name.
	Registered bool
	// MissingTaints are declared taints the node lacks (absent, or the same key and effect with
	// another value).
	MissingTaints []inventory.Taint
	// StaleTaints are undeclared taints that are k3strap's to remove: the inventory declared
	// them before (AnnotationTaints) or declares their key with another value or effect now.
	// Never a K3s / Kubernetes managed taint (node.kubernetes.io/*,
	// node.cloudprovider.kubernetes.io/*).
	StaleTaints []inventory.Taint
	// ForeignTaints are undeclared taints k3strap did not put there (another controller's);
	// reported, never removed, not drift.
	ForeignTaints []inventory.Taint
	// Labels are declared labels that are missing or have another value.
	Labels []LabelChange
	// StaleLabels are label keys the inventory declared before (AnnotationLabels) but no longer.
	StaleLabels []string
	// CNIExcluded is "add" or "remove" when cni.ExcludedLabel must change, else "".
	CNIExcluded string
}

// Drifted reports whether the node differs from the inventory (foreign taints do not count).
func (d Node) Drifted() bool {
	return !d.Registered || len(d.MissingTaints) > 0 || len(d.StaleTaints) > 0 || len(d.Labels) > 0 ||
		len(d.StaleLabels) > 0 || d.CNIExcluded != ""
}

// Describe returns one human line per difference, foreign taints last (as notes).
func (d Node) Describe() []string {
	if !d.Registered {
		return []string{"no node " + d.Node + " in the cluster (not joined yet?)"}
	}
	var out []string
	for _, t := range d.MissingTaints {
		out = append(out, "taint "+t.String()+" missing")
	}
	for _, t := range d.StaleTaints {
		out = append(out, "taint "+t.String()+" is no longer in the inventory")
	}
	for _, l := range d.Labels {
		if l.Missing {
			out = append(out, fmt.Sprintf("label %s=%s missing", l.Key, l.Want))
		} else {
			out = append(out, fmt.Sprintf("label %s is %q, the inventory says %q", l.Key, l.Have, l.Want))
		}
	}
	for _, k := range d.StaleLabels {
		out = append(out, "label "+k+" is no longer in the inventory")
	}
	switch d.CNIExcluded {
	case "add":
		out = append(out, fmt.Sprintf("label %s=true missing (kernelPolicy exclude excludes this host)", cni.ExcludedLabel))
	case "remove":
		out = append(out, fmt.Sprintf("label %s must go (the CNI must run here)", cni.ExcludedLabel))
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func sameTaint(a inventory.Taint, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// Diff compares node n with d. n may be nil (not registered).
func Diff(n *corev1.Node, d Desired) Node {
	out := Node{Node: d.Name, Registered: n != nil}
	if n == nil {
		return out
	}
	declaredKeys := map[string]bool{}
	for _, t := range d.Taints {
		declaredKeys[t.Key] = true
		found := false
		for _, nt := range n.Spec.Taints {
			if sameTaint(t, nt) {
				found = true
			}
		}
		if !found {
			out.MissingTaints = append(out.MissingTaints, t)
		}
	}
	before := map[string]bool{}
	for _, s := range splitList(n.Annotations[AnnotationTaints]) {
		before[s] = true
	}
	for _, nt := range n.Spec.Taints {
		t := inventory.FromCore(nt)
		if slices.ContainsFunc(d.Taints, func(x inventory.Taint) bool { return sameTaint(x, nt) }) {
			continue
		}
		switch {
		case t.Managed():
			// K3s's and Kubernetes' own (not-ready, unschedulable, uninitialized, ...).
		case before[t.String()] || declaredKeys[t.Key]:
			out.StaleTaints = append(out.StaleTaints, t)
		default:
			out.ForeignTaints = append(out.ForeignTaints, t)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.Labels)) {
		want := d.Labels[k]
		have, ok := n.Labels[k]
		if !ok || have != want {
			out.Labels = append(out.Labels, LabelChange{Key: k, Want: want, Have: have, Missing: !ok})
		}
	}
	for _, k := range splitList(n.Annotations[AnnotationLabels]) {
		if _, declared := d.Labels[k]; !declared {
			if _, present := n.Labels[k]; present {
				out.StaleLabels = append(out.StaleLabels, k)
			}
		}
	}
	sort.Strings(out.StaleLabels)
	v, has := n.Labels[cni.ExcludedLabel]
	switch d.cniLabel {
	case cniLabelPresent:
		if v != "true" {
			out.CNIExcluded = "add"
		}
	case cniLabelAbsent:
		if has {
			out.CNIExcluded = "remove"
		}
	}
	return out
}

// record returns the bookkeeping annotations for d.
func (d Desired) record() (taints, labels string) {
	var ts []string
	for _, t := range d.Taints {
		ts = append(ts, t.String())
	}
	sort.Strings(ts)
	return strings.Join(ts, ","), strings.Join(slices.Sorted(maps.Keys(d.Labels)), ",")
}

// RepairMode says how much of a node's drift reconcile changes.
type RepairMode int

const (
	// RepairCNILabel changes only cni.ExcludedLabel (always done by apply: the CNI depends on
	// it), plus the bookkeeping annotations when the node otherwise matches.
	RepairCNILabel RepairMode = iota
	// RepairAll also fixes taints and labels (apply --reconcile-taints).
	RepairAll
)

// Repair changes n towards d (in place) and reports whether anything changed. With
// RepairAll it adds missing taints (replacing the value of a taint with the same key and
// effect), removes stale ones (never a managed node.kubernetes.io/* or
// node.cloudprovider.kubernetes.io/* taint), sets declared labels and removes stale ones.
// cni.ExcludedLabel is always brought in line. The bookkeeping annotations are written when
// the node matches the inventory afterwards.
func Repair(n *corev1.Node, d Desired, mode RepairMode) bool {
	drift := Diff(n, d)
	changed := false
	if mode == RepairAll {
		var keep []corev1.Taint
		for _, nt := range n.Spec.Taints {
			stale := slices.ContainsFunc(drift.StaleTaints, func(t inventory.Taint) bool { return sameTaint(t, nt) })
			if stale && !inventory.FromCore(nt).Managed() {
				changed = true
				continue
			}
			keep = append(keep, nt)
		}
		for _, t := range drift.MissingTaints {
			replaced := false
			for i := range keep {
				if keep[i].Key == t.Key && keep[i].Effect == t.Effect && !inventory.FromCore(keep[i]).Managed() {
					keep[i].Value, replaced = t.Value, true
				}
			}
			if !replaced {
				keep = append(keep, t.Core())
			}
			changed = true
		}
		n.Spec.Taints = keep
		for _, l := range drift.Labels {
			setLabel(n, l.Key, l.Want)
			changed = true
		}
		for _, k := range drift.StaleLabels {
			delete(n.Labels, k)
			changed = true
		}
	}
	switch drift.CNIExcluded {
	case "add":
		setLabel(n, cni.ExcludedLabel, "true")
		changed = true
	case "remove":
		delete(n.Labels, cni.ExcludedLabel)
		changed = true
	}
	if !Diff(n, d).Drifted() {
		taints, labels := d.record()
		if n.Annotations[AnnotationTaints] != taints || n.Annotations[AnnotationLabels] != labels {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationTaints], n.Annotations[AnnotationLabels] = taints, labels
			changed = true
		}
	}
	return changed
}

func setLabel(n *corev1.Node, k, v string) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
}

// conflictBackoff is the retry schedule after 409 Conflict: 6 attempts, 100 ms doubling.
var conflictBackoff = wait.Backoff{Steps: 6, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2}

// Reconcile brings node d.Name in line with d by read-modify-write: GET the node, change
// it, and replace it carrying the metadata.resourceVersion it was read with; on 409 Conflict
// (someone wrote in between) read it again and retry (conflictBackoff), so no concurrent
// update is lost and spec.taints is never written as a bare list patch (docs/failure-modes.md F5). It
// returns the drift found before the change (on the last read) and whether it wrote.
// onConflict is called for each conflict with the attempt number.
func Reconcile(ctx context.Context, api API, d Desired, mode RepairMode, onConflict func(attempt int, err error)) (Node, bool, error) {
	return ReconcileFrom(ctx, api, d, mode, nil, onConflict)
}

// ReconcileFrom is Reconcile whose first attempt starts from read, the node as a list just
// returned it (not modified; nil: GET it); the replace carries read's resourceVersion, so a
// node changed since the list gets 409 Conflict and the next attempt GETs it.
func ReconcileFrom(ctx context.Context, api API, d Desired, mode RepairMode, read *corev1.Node, onConflict func(attempt int, err error)) (Node, bool, error) {
	var drift Node
	wrote := false
	attempt := 0
	err := retry.OnError(conflictBackoff, func(err error) bool { return apierrors.IsConflict(err) && ctx.Err() == nil }, func() error {
		attempt++
		n, err := read.DeepCopy(), error(nil)
		read = nil
		if n == nil {
			n, err = api.GetNode(ctx, d.Name)
		}
		if apierrors.IsNotFound(err) {
			drift = Diff(nil, d)
			return nil
		}
		if err != nil {
			return err
		}
		drift = Diff(n, d)
		if !Repair(n, d, mode) {
			return nil
		}
		if err := api.ReplaceNode(ctx, n); err != nil {
			if apierrors.IsConflict(err) && onConflict != nil {
				onConflict(attempt, err)
			}
			return err
		}
		wrote = true
		return nil
	})
	if err != nil && apierrors.IsConflict(err) {
		err = fmt.Errorf("node %s kept changing while k3strap updated it (%d attempts, each got 409 Conflict): %w", d.Name, attempt, err)
	}
	return drift, wrote, err
}
