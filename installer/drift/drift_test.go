// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package drift

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/cni"
)

// fakeNodes is an API server for nodes with resourceVersions: a replace carrying a stale
// resourceVersion gets a 409 Conflict (apierrors), like the real API. concurrent, when set, runs before
// the next n replaces and writes the stored node itself (another controller), bumping its
// resourceVersion.
type fakeNodes struct {
	mu       sync.Mutex
	nodes    map[string]*corev1.Node
	rv       int
	replaces int
	// concurrentWrites is how many upcoming replaces are preceded by a concurrent write.
	concurrentWrites int
	concurrent       func(n *corev1.Node)
}

func newFakeNodes(nodes ...*corev1.Node) *fakeNodes {
	f := &fakeNodes{nodes: map[string]*corev1.Node{}}
	for _, n := range nodes {
		f.rv++
		n.ResourceVersion = strconv.Itoa(f.rv)
		f.nodes[n.Name] = n.DeepCopy()
	}
	return f
}

func (f *fakeNodes) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return n.DeepCopy(), nil
}

func (f *fakeNodes) ListNodes(context.Context) ([]corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []corev1.Node
	for _, n := range f.nodes {
		out = append(out, *n.DeepCopy())
	}
	return out, nil
}

func (f *fakeNodes) ReplaceNode(_ context.Context, n *corev1.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replaces++
	cur, ok := f.nodes[n.Name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("nodes"), n.Name)
	}
	if f.concurrentWrites > 0 {
		f.concurrentWrites--
		f.concurrent(cur)
		f.rv++
		cur.ResourceVersion = strconv.Itoa(f.rv)
	}
	if n.ResourceVersion != cur.ResourceVersion {
		return apierrors.NewConflict(corev1.Resource("nodes"), n.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	f.rv++
	c := n.DeepCopy()
	c.ResourceVersion = strconv.Itoa(f.rv)
	f.nodes[n.Name] = c
	return nil
}

func (f *fakeNodes) node(name string) *corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[name].DeepCopy()
}

func mustTaint(t *testing.T, s string) inventory.Taint {
	t.Helper()
	tt, err := inventory.ParseTaint(s)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func coreTaints(t *testing.T, ss ...string) []corev1.Taint {
	var out []corev1.Taint
	for _, s := range ss {
		out = append(out, mustTaint(t, s).Core())
	}
	return out
}

func taintStrings(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, inventory.FromCore(t).String())
	}
	return out
}

func node(name string, labels map[string]string, taints []corev1.Taint) *corev1.Node {
	n := &corev1.Node{}
	n.Name, n.Labels, n.Spec.Taints = name, labels, taints
	return n
}

func taintCluster(t *testing.T, taints ...string) (*inventory.Cluster, *inventory.Host) {
	c := &inventory.Cluster{}
	h := inventory.Host{Name: "w1", Address: "10.0.0.11", Role: inventory.RoleAgent, Labels: map[string]string{"site": "lab"}}
	for _, s := range taints {
		h.Taints = append(h.Taints, mustTaint(t, s))
	}
	c.Spec.Hosts = []inventory.Host{{Name: "cp1", Address: "10.0.0.10", Role: inventory.RoleServer}, h}
	return c, &c.Spec.Hosts[1]
}

var never = func(int, error) {}

// TestRepairRestoresRemovedTaintKeepsManaged: a declared taint removed behind k3strap's back is
// reported and restored; K3s's own taints and another controller's taint stay.
func TestRepairRestoresRemovedTaintKeepsManaged(t *testing.T) {
	c, h := taintCluster(t, "dedicated=edge:NoExecute")
	api := newFakeNodes(node("w1", map[string]string{"site": "lab"},
		coreTaints(t, "node.kubernetes.io/unschedulable:NoSchedule", "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", "other.io/x=1:NoSchedule")))
	d := DesiredFor(c, h, nil)

	drift, wrote, err := Reconcile(context.Background(), api, d, RepairCNILabel, never)
	if err != nil || wrote {
		t.Fatalf("report-only run wrote=%v err=%v", wrote, err)
	}
	if got := drift.Describe(); len(got) != 1 || got[0] != "taint dedicated=edge:NoExecute missing" {
		t.Fatalf("drift %q", got)
	}
	if len(drift.ForeignTaints) != 1 || drift.ForeignTaints[0].Key != "other.io/x" {
		t.Errorf("foreign taints %v", drift.ForeignTaints)
	}

	_, wrote, err = Reconcile(context.Background(), api, d, RepairAll, never)
	if err != nil || !wrote {
		t.Fatalf("repair wrote=%v err=%v", wrote, err)
	}
	got := strings.Join(taintStrings(api.node("w1")), " ")
	for _, want := range []string{"dedicated=edge:NoExecute", "node.kubernetes.io/unschedulable:NoSchedule", "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", "other.io/x=1:NoSchedule"} {
		if !strings.Contains(got, want) {
			t.Errorf("after repair taints %q lack %s", got, want)
		}
	}
	if a := api.node("w1").Annotations[AnnotationTaints]; a != "dedicated=edge:NoExecute" {
		t.Errorf("bookkeeping annotation %q", a)
	}
	// Converged: a further run neither drifts nor writes.
	drift, wrote, err = Reconcile(context.Background(), api, d, RepairAll, never)
	if err != nil || wrote || drift.Drifted() {
		t.Errorf("second run drift=%v wrote=%v err=%v", drift.Describe(), wrote, err)
	}
}

// TestTaintChangedInInventory: node-taint applies only at registration; a taint whose value or
// effect changed in the inventory is replaced, one dropped from the inventory removed (k3strap
// recorded it), and a managed taint never removed even if recorded.
func TestTaintChangedInInventory(t *testing.T) {
	c, h := taintCluster(t, "dedicated=core:NoExecute", "gpu:NoSchedule")
	n := node("w1", map[string]string{"site": "lab", "old": "x"}, coreTaints(t, "dedicated=edge:NoExecute", "legacy=1:NoSchedule", "node.kubernetes.io/not-ready:NoExecute"))
	n.Annotations = map[string]string{AnnotationTaints: "dedicated=edge:NoExecute,legacy=1:NoSchedule,node.kubernetes.io/not-ready:NoExecute", AnnotationLabels: "old,site"}
	api := newFakeNodes(n)
	drift, _, err := Reconcile(context.Background(), api, DesiredFor(c, h, nil), RepairAll, never)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"taint dedicated=core:NoExecute missing", "taint gpu:NoSchedule missing",
		"taint dedicated=edge:NoExecute is no longer in the inventory", "taint legacy=1:NoSchedule is no longer in the inventory",
		"label old is no longer in the inventory"}
	if got := drift.Describe(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("drift\n got %q\nwant %q", got, want)
	}
	after := api.node("w1")
	if got := strings.Join(taintStrings(after), " "); got != "node.kubernetes.io/not-ready:NoExecute dedicated=core:NoExecute gpu:NoSchedule" {
		t.Errorf("taints after repair: %q", got)
	}
	if _, ok := after.Labels["old"]; ok || after.Labels["site"] != "lab" {
		t.Errorf("labels after repair: %v", after.Labels)
	}
}

// TestConflictRetriesWithoutLosingTheConcurrentWrite: a write between k3strap's read and its
// replace makes the replace fail with 409; k3strap reads again and retries, so both the
// concurrent change and the repair survive (docs/failure-modes.md F5).
func TestConflictRetriesWithoutLosingTheConcurrentWrite(t *testing.T) {
	c, h := taintCluster(t, "dedicated=edge:NoExecute")
	api := newFakeNodes(node("w1", map[string]string{"site": "lab"}, nil))
	api.concurrentWrites = 2
	api.concurrent = func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "other.io/busy", Value: strconv.Itoa(len(n.Spec.Taints)), Effect: corev1.TaintEffectNoSchedule})
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations["other.io/seen"] = "yes"
	}
	var conflicts []int
	_, wrote, err := Reconcile(context.Background(), api, DesiredFor(c, h, nil), RepairAll, func(a int, err error) {
		if !apierrors.IsConflict(err) {
			t.Errorf("onConflict got %v", err)
		}
		conflicts = append(conflicts, a)
	})
	if err != nil || !wrote {
		t.Fatalf("wrote=%v err=%v", wrote, err)
	}
	if fmt.Sprint(conflicts) != "[1 2]" || api.replaces != 3 {
		t.Errorf("conflicts %v, replaces %d: want two conflicts, then success on the third replace", conflicts, api.replaces)
	}
	after := api.node("w1")
	got := strings.Join(taintStrings(after), " ")
	if !strings.Contains(got, "dedicated=edge:NoExecute") || !strings.Contains(got, "other.io/busy=0:NoSchedule") || !strings.Contains(got, "other.io/busy=1:NoSchedule") {
		t.Errorf("taints %q: the repair or a concurrent write was lost", got)
	}
	if after.Annotations["other.io/seen"] != "yes" {
		t.Error("the concurrent annotation was lost")
	}

	// Someone who never stops writing: give up with an error that says so.
	api = newFakeNodes(node("w1", nil, nil))
	api.concurrentWrites, api.concurrent = 100, func(*corev1.Node) {}
	_, _, err = Reconcile(context.Background(), api, DesiredFor(c, h, nil), RepairAll, never)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "kept changing") {
		t.Errorf("endless conflicts: %v", err)
	}
	if api.replaces != conflictBackoff.Steps {
		t.Errorf("%d replaces, want %d attempts", api.replaces, conflictBackoff.Steps)
	}
}

// TestCNIExcludedLabel: the label follows the kernel policy verdict; apply fixes it even
// without --reconcile-taints; check (no facts) does not judge it under exclude.
func TestCNIExcludedLabel(t *testing.T) {
	c, h := taintCluster(t)
	c.Spec.CNI = inventory.CNI{Type: inventory.CNICalico, KernelPolicy: inventory.KernelPolicyExclude}
	api := newFakeNodes(node("w1", map[string]string{"site": "lab"}, nil))
	yes, no := true, false
	if _, _, err := Reconcile(context.Background(), api, DesiredFor(c, h, &yes), RepairCNILabel, never); err != nil {
		t.Fatal(err)
	}
	if api.node("w1").Labels[cni.ExcludedLabel] != "true" {
		t.Fatalf("labels %v", api.node("w1").Labels)
	}
	if d := Diff(api.node("w1"), DesiredFor(c, h, nil)); d.Drifted() {
		t.Errorf("check without facts judges the label: %v", d.Describe())
	}
	if _, _, err := Reconcile(context.Background(), api, DesiredFor(c, h, &no), RepairCNILabel, never); err != nil {
		t.Fatal(err)
	}
	if _, ok := api.node("w1").Labels[cni.ExcludedLabel]; ok {
		t.Error("label kept on a host whose kernel is fine now")
	}
	// strict: the label must not be there, check says so.
	c.Spec.CNI.KernelPolicy = inventory.KernelPolicyStrict
	n := api.node("w1")
	n.Labels[cni.ExcludedLabel] = "true"
	if d := Diff(n, DesiredFor(c, h, nil)); d.CNIExcluded != "remove" {
		t.Errorf("strict with the label: %+v", d)
	}
	// not registered
	if d := Diff(nil, DesiredFor(c, h, nil)); d.Registered || !d.Drifted() || !strings.Contains(d.Describe()[0], "no node w1") {
		t.Errorf("unregistered: %+v", d)
	}
}

// countingNodes counts the GETs of a fakeNodes.
type countingNodes struct {
	*fakeNodes
	gets int
}

func (c *countingNodes) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	c.gets++
	return c.fakeNodes.GetNode(ctx, name)
}

// TestReconcileFromList: a node from a fresh list is reconciled without reading it again; a
// listed node changed since the list is not overwritten (its stale resourceVersion gets 409)
// but read again, and the change made in between is kept. The listed node is not modified.
func TestReconcileFromList(t *testing.T) {
	c, h := taintCluster(t, "dedicated=edge:NoExecute")
	api := &countingNodes{fakeNodes: newFakeNodes(node("w1", map[string]string{"site": "lab"}, nil))}
	listed, err := api.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, wrote, err := ReconcileFrom(context.Background(), api, DesiredFor(c, h, nil), RepairAll, &listed[0], never)
	if err != nil || !wrote || api.gets != 0 || api.replaces != 1 {
		t.Fatalf("fresh list: wrote=%v err=%v gets=%d replaces=%d, want one replace and no GET", wrote, err, api.gets, api.replaces)
	}
	if len(listed[0].Spec.Taints) != 0 {
		t.Errorf("the listed node was modified: %v", listed[0].Spec.Taints)
	}

	// Listed, then changed by someone else before the replace.
	api = &countingNodes{fakeNodes: newFakeNodes(node("w1", map[string]string{"site": "lab"}, nil))}
	listed, _ = api.ListNodes(context.Background())
	api.concurrentWrites = 1
	api.concurrent = func(n *corev1.Node) { n.Labels["other.io/seen"] = "yes" }
	var conflicts int
	_, wrote, err = ReconcileFrom(context.Background(), api, DesiredFor(c, h, nil), RepairAll, &listed[0], func(int, error) { conflicts++ })
	if err != nil || !wrote || conflicts != 1 || api.gets != 1 {
		t.Fatalf("stale list: wrote=%v err=%v conflicts=%d gets=%d, want one conflict then a GET", wrote, err, conflicts, api.gets)
	}
	after := api.node("w1")
	if after.Labels["other.io/seen"] != "yes" || !strings.Contains(strings.Join(taintStrings(after), " "), "dedicated=edge:NoExecute") {
		t.Errorf("after the retry: labels %v taints %v, want both the concurrent label and the repair", after.Labels, taintStrings(after))
	}
}
