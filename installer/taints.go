package installer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/cni"
)

// ExitDrift is the exit code of `k3strap check` when a node's taints or labels differ from
// the inventory (issue 4).
const ExitDrift ExitCode = 6

// Annotations k3strap keeps on each node to remember what it manages (issue 4, docs/failure-modes.md F5).
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

// nodeAPI is what node reconciliation needs from the cluster (kube.Kubectl implements it).
type nodeAPI interface {
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

// DesiredNode is what the inventory says one node should carry.
type DesiredNode struct {
	// Name is the node (= inventory host) name.
	Name string
	// Taints are the declared taints (spec.hosts[].taints plus node-taint of the K3s config).
	Taints []inventory.Taint
	// Labels are the declared labels (spec.hosts[].labels plus node-label of the K3s config).
	Labels map[string]string
	// cniLabel is the expectation for cni.ExcludedLabel.
	cniLabel cniLabelWant
}

// desiredNode returns what c declares for h. excluded says whether kernelPolicy exclude keeps
// h out of the CNI; nil when unknown (no facts).
func desiredNode(c *inventory.Cluster, h *inventory.Host, excluded *bool) DesiredNode {
	d := DesiredNode{Name: h.Name, Taints: cni.HostTaints(c, h), Labels: map[string]string{}}
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

// NodeDrift is how one node differs from the inventory (docs/failure-modes.md F5).
type NodeDrift struct {
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
func (d NodeDrift) Drifted() bool {
	return !d.Registered || len(d.MissingTaints) > 0 || len(d.StaleTaints) > 0 || len(d.Labels) > 0 ||
		len(d.StaleLabels) > 0 || d.CNIExcluded != ""
}

// Describe returns one human line per difference, foreign taints last (as notes).
func (d NodeDrift) Describe() []string {
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
func Diff(n *corev1.Node, d DesiredNode) NodeDrift {
	out := NodeDrift{Node: d.Name, Registered: n != nil}
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
func (d DesiredNode) record() (taints, labels string) {
	var ts []string
	for _, t := range d.Taints {
		ts = append(ts, t.String())
	}
	sort.Strings(ts)
	return strings.Join(ts, ","), strings.Join(slices.Sorted(maps.Keys(d.Labels)), ",")
}

// repairMode says how much of a node's drift reconcile changes.
type repairMode int

const (
	// repairCNILabel changes only cni.ExcludedLabel (always done by apply: the CNI depends on
	// it), plus the bookkeeping annotations when the node otherwise matches.
	repairCNILabel repairMode = iota
	// repairAll also fixes taints and labels (apply --reconcile-taints).
	repairAll
)

// Repair changes n towards d (in place) and reports whether anything changed. With
// repairAll it adds missing taints (replacing the value of a taint with the same key and
// effect), removes stale ones (never a managed node.kubernetes.io/* or
// node.cloudprovider.kubernetes.io/* taint), sets declared labels and removes stale ones.
// cni.ExcludedLabel is always brought in line. The bookkeeping annotations are written when
// the node matches the inventory afterwards.
func Repair(n *corev1.Node, d DesiredNode, mode repairMode) bool {
	drift := Diff(n, d)
	changed := false
	if mode == repairAll {
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

// reconcileNode brings node d.Name in line with d by read-modify-write: GET the node, change
// it, and replace it carrying the metadata.resourceVersion it was read with; on 409 Conflict
// (someone wrote in between) read it again and retry (conflictBackoff), so no concurrent
// update is lost and spec.taints is never written as a bare list patch (docs/failure-modes.md F5). It
// returns the drift found before the change (on the last read) and whether it wrote.
// onConflict is called for each conflict with the attempt number.
func reconcileNode(ctx context.Context, api nodeAPI, d DesiredNode, mode repairMode, onConflict func(attempt int, err error)) (NodeDrift, bool, error) {
	var drift NodeDrift
	wrote := false
	attempt := 0
	err := retry.OnError(conflictBackoff, func(err error) bool { return errors.Is(err, kube.ErrConflict) && ctx.Err() == nil }, func() error {
		attempt++
		n, err := api.GetNode(ctx, d.Name)
		if errors.Is(err, kube.ErrNotFound) {
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
			if errors.Is(err, kube.ErrConflict) && onConflict != nil {
				onConflict(attempt, err)
			}
			return err
		}
		wrote = true
		return nil
	})
	if err != nil && errors.Is(err, kube.ErrConflict) {
		err = fmt.Errorf("node %s kept changing while k3strap updated it (%d attempts, each got 409 Conflict): %w", d.Name, attempt, err)
	}
	return drift, wrote, err
}

// reconcileNodes runs after bring-up on every apply (issue 4): it labels the nodes that
// kernelPolicy exclude keeps out of the CNI (and says so loudly), compares every selected
// node's taints and labels with the inventory, repairs the drift with --reconcile-taints (or
// reports it with the command that repairs it), and waits for the CNI DaemonSet to run on
// every node it should.
func (s *session) reconcileNodes(ctx context.Context, first *hostState) error {
	if first == nil || first.c() == nil {
		return nil
	}
	c := s.in.cluster
	em := s.in.emitter("nodes")
	excluded := s.cniExcluded()
	mode := repairCNILabel
	if s.in.opts.ReconcileTaints {
		mode = repairAll
	}
	var drifted []string
	for _, hs := range s.hosts {
		if hs.plan == nil && hs != first {
			continue // not worked on in this run (unreachable, or failed before planning)
		}
		var ex *bool
		if hs.facts != nil {
			_, isEx := excluded[hs.host.Name]
			ex = &isEx
		}
		d := desiredNode(c, hs.host, ex)
		var drift NodeDrift
		var wrote bool
		// Transport failures reconnect and start over (s.retry): every attempt re-reads the
		// node and writes only with the resourceVersion it read, so a replace whose answer
		// was lost is harmless.
		err := s.retry(ctx, first, "reconciling node "+hs.host.Name, func(ctx context.Context) error {
			var err error
			drift, wrote, err = reconcileNode(ctx, kube.Kubectl{R: first.c()}, d, mode, func(attempt int, err error) {
				em.Info(hs.host.Name, fmt.Sprintf("node %s changed since it was read (409 Conflict on attempt %d: a concurrent write); reading it again and retrying, so that write is kept", hs.host.Name, attempt))
			})
			return err
		})
		if err != nil {
			return s.hostFailure(hs, "nodes", ExitInstall, err)
		}
		lines := drift.Describe()
		switch {
		case !drift.Registered:
			em.Warn(hs.host.Name, lines[0])
		case mode == repairAll && drift.Drifted():
			em.Step(hs.host.Name, "taints", events.StatusChanged, "repaired: "+strings.Join(lines, "; "))
			hs.note(events.StatusChanged, "taints/labels repaired")
		case drift.Drifted():
			rest := withoutCNILabel(drift)
			if rest.Drifted() {
				drifted = append(drifted, hs.host.Name)
				em.Warn(hs.host.Name, "drift: "+strings.Join(rest.Describe(), "; ")+" — repair with `k3strap apply --reconcile-taints`")
			}
			if drift.CNIExcluded != "" {
				em.Step(hs.host.Name, "cni-label", events.StatusChanged, map[string]string{"add": "labelled", "remove": "unlabelled"}[drift.CNIExcluded]+" "+cni.ExcludedLabel)
			}
		case wrote:
			em.Debug(hs.host.Name, "recorded the declared taints and labels in "+AnnotationTaints+" / "+AnnotationLabels)
		}
		for _, t := range drift.ForeignTaints {
			em.Info(hs.host.Name, "taint "+t.String()+" is not in the inventory and was not put there by k3strap: left alone")
		}
	}
	s.reportExcluded(excluded)
	if len(drifted) > 0 {
		em.Warn("", fmt.Sprintf("%d node(s) differ from the inventory: %s; run `k3strap apply --reconcile-taints` to repair, `k3strap check` to see", len(drifted), strings.Join(drifted, ", ")))
	}
	return s.waitCNI(ctx, first, excluded)
}

// withoutCNILabel is drift minus the CNI label (which apply always fixes).
func withoutCNILabel(d NodeDrift) NodeDrift {
	d.CNIExcluded = ""
	return d
}

func appendMsg(msg, add string) string {
	if msg == "" {
		return add
	}
	return msg + "; " + add
}

// Check compares every node's taints and labels with the inventory through the first server
// and reports drift per node, changing nothing (`k3strap check`, issue 4). It returns a
// Failure with ExitDrift when any node differs. Without gathered facts it cannot tell which
// hosts kernelPolicy exclude keeps out of the CNI, so cni.ExcludedLabel is only judged under
// strict (where it must be absent).
func (in *Installer) Check(ctx context.Context) error {
	start := time.Now()
	s := in.newSession()
	s.command = "check"
	defer s.close()
	err := s.finish(ctx, s.check(ctx))
	s.summary("check", start, err, "")
	return err
}

func (s *session) check(ctx context.Context) error {
	c := s.in.cluster
	first := c.FirstServer()
	if first == nil {
		return &Failure{Code: ExitInvalid, Phase: "check", Info: events.ErrorInfo{Message: "the inventory has no server", Fix: "give at least one host role: server"}}
	}
	fs := &hostState{host: first}
	s.hosts = []*hostState{fs}
	s.connect(ctx)
	if fs.connErr != nil {
		return s.hostFailure(fs, "connect", ExitInstall, fs.connErr)
	}
	s.hosts = nil
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		if h.Name == first.Name {
			s.hosts = append(s.hosts, fs)
			continue
		}
		s.hosts = append(s.hosts, &hostState{host: h})
	}
	sel := map[string]bool{}
	for _, n := range s.in.opts.Hosts {
		sel[n] = true
	}
	em := s.in.emitter("check")
	em.Started(fmt.Sprintf("comparing the taints and labels of %d nodes with %s", len(s.hosts), orFile(c.Source)))
	var nodes []corev1.Node
	err := s.retry(ctx, fs, "listing nodes", func(ctx context.Context) error {
		var err error
		nodes, err = kube.Kubectl{R: fs.c()}.ListNodes(ctx)
		return err
	})
	if err != nil {
		return s.hostFailure(fs, "check", ExitInstall, fmt.Errorf("listing nodes: %w", err))
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	var drifted []string
	for _, hs := range s.hosts {
		if len(sel) > 0 && !sel[hs.host.Name] {
			hs.setResult(events.StatusSkipped, "not selected")
			continue
		}
		drift := Diff(byName[hs.host.Name], desiredNode(c, hs.host, nil))
		for _, t := range drift.ForeignTaints {
			em.Info(hs.host.Name, "taint "+t.String()+" is not in the inventory and was not put there by k3strap (left alone)")
		}
		if !drift.Drifted() {
			em.Step(hs.host.Name, "drift", events.StatusOK, "taints and labels match the inventory")
			hs.setResult(events.StatusOK, "no drift")
			continue
		}
		drifted = append(drifted, hs.host.Name)
		msg := "drift: " + strings.Join(drift.Describe(), "; ")
		em.Step(hs.host.Name, "drift", events.StatusFailed, msg)
		hs.setResult(events.StatusFailed, msg)
	}
	if len(drifted) == 0 {
		em.Finished(events.StatusOK, "no drift")
		return nil
	}
	em.Finished(events.StatusFailed, fmt.Sprintf("%d node(s) differ from the inventory", len(drifted)))
	return &Failure{Code: ExitDrift, Phase: "check", Info: events.ErrorInfo{
		Message: fmt.Sprintf("%d node(s) differ from the inventory: %s", len(drifted), strings.Join(drifted, ", ")),
		Fix:     "run `k3strap apply --reconcile-taints -f " + orFile(c.Source) + "` to repair (read-modify-write; K3s's own node.kubernetes.io/* and node.cloudprovider.kubernetes.io/* taints are never touched)",
		Resume:  "then `k3strap check` again",
	}}
}

func orFile(p string) string {
	if p == "" {
		return "FILE"
	}
	return p
}
