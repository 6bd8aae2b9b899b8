// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
	"github.com/k3strap/k3strap/templates/cni"
)

// cniStep says loudly which hosts run without the CNI (kernelPolicy exclude, the preflight
// verdict; docs/failure-modes.md F2) and waits until the CNI k3strap deploys (Calico, standalone
// flannel) runs on every node it should, naming the nodes where it does not.
//
// Reads: s.pre.excluded; hostState.plan. Writes: host notes (excluded hosts).
type cniStep struct{}

func (cniStep) Phase() events.Phase { return events.PhaseCNI }

func (cniStep) Summary() string {
	return "report CNI-excluded hosts; wait until the deployed CNI's DaemonSet runs on every node it should"
}

func (cniStep) Run(ctx context.Context, s *session) error {
	s.reportExcluded(s.pre.excluded)
	return s.waitCNI(ctx, s.first, s.pre.excluded)
}

// Preview says which CNI the step would wait for; the exclusions are reported as preflight
// judged them.
func (cniStep) Preview(ctx context.Context, s *session) error {
	s.reportExcluded(s.pre.excluded)
	if t := s.in.cluster.Spec.CNI.Type; t != "" {
		s.in.emitter(events.PhaseCNI).Info("", "would wait until "+string(t)+" runs on every node it should")
	}
	return ctx.Err()
}

// reportExcluded says loudly, per host and once for the run, which hosts run without the CNI
// (docs/failure-modes.md F2: never silently), and puts it into each host's summary line.
func (s *session) reportExcluded(excluded map[string]preflight.ExcludedHost) {
	if len(excluded) == 0 {
		return
	}
	t := s.in.cluster.Spec.CNI.Type
	em := s.in.emitter(events.PhaseCNI)
	var names []string
	for _, hs := range s.hosts {
		e, ok := excluded[hs.host.Name]
		if !ok {
			continue
		}
		names = append(names, hs.host.Name)
		em.Warn(hs.host.Name, fmt.Sprintf("EXCLUDED from %s (kernelPolicy exclude): its kernel lacks %s; node labelled %s=true, %s does not run there and pods on it get no pod network from %s",
			t, strings.Join(e.Missing, "; "), cni.ExcludedLabel, t, t))
		hs.appendNote(fmt.Sprintf("EXCLUDED from %s (kernel lacks %s)", t, featureNames(e.Missing)))
	}
	em.Warn("", fmt.Sprintf("%d host(s) EXCLUDED from %s by kernelPolicy exclude: %s (labelled %s=true). Give them a kernel with the missing features and re-run apply to include them.",
		len(names), t, strings.Join(names, ", "), cni.ExcludedLabel))
}

// featureNames shortens "ip_set (not in ...)" entries to their names.
func featureNames(missing []string) string {
	var out []string
	for _, m := range missing {
		name, _, _ := strings.Cut(m, " (")
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}

// cniPollInterval is how often waitCNI looks at the CNI DaemonSet.
const cniPollInterval = time.Second

// waitCNI waits (up to Options.Timeout) until the CNI DaemonSet (calico-node created by the
// tigera operator, or kube-flannel-ds) has a running pod on every node of the run that is not
// excluded, and no pod on an excluded one. On timeout it names each node without a running
// pod and why (the pod's scheduling message, or the taints the DaemonSet does not tolerate).
func (s *session) waitCNI(ctx context.Context, first *hostState, excluded map[string]preflight.ExcludedHost) error {
	w, ok := cni.NodeDaemonSet(s.in.cluster.Spec.CNI.Type)
	if !ok {
		return nil
	}
	em := s.in.emitter(events.PhaseCNI)
	var want []string
	for _, hs := range s.hosts {
		if _, ex := excluded[hs.host.Name]; !ex && (hs.plan != nil || hs.facts != nil) {
			want = append(want, hs.host.Name)
		}
	}
	em.Started(fmt.Sprintf("waiting for %s %s/%s on %d node(s)", w.Kind, w.Namespace, w.Name, len(want)))
	deadline := s.waitDeadline()
	for {
		var st *cniSnapshot
		err := s.retry(ctx, first, "reading "+w.Namespace+"/"+w.Name, func(ctx context.Context) error {
			return first.withAPI(ctx, func(a *kube.API) (err error) {
				st, err = cniState(ctx, a, w)
				return err
			})
		})
		if err == nil {
			missing := st.missing(want)
			if st.ds != nil && len(missing) == 0 {
				msg := fmt.Sprintf("%s/%s runs on %d node(s)", w.Namespace, w.Name, len(want))
				if len(excluded) > 0 {
					msg += fmt.Sprintf(", %d excluded", len(excluded))
				}
				em.Finished(events.StatusOK, msg)
				return nil
			}
			if deadline.Passed(time.Now()) {
				return s.cniTimeout(w, st, missing)
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			return s.hostFailure(first, "cni", KindInstall, fmt.Errorf("reading %s/%s: %w", w.Namespace, w.Name, err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cniPollInterval):
		}
	}
}

// cniSnapshot is the CNI DaemonSet and its pods by node.
type cniSnapshot struct {
	ds    *appsv1.DaemonSet
	pods  map[string]*corev1.Pod // node name -> the DaemonSet's pod
	nodes map[string]*corev1.Node
}

func cniState(ctx context.Context, api *kube.API, w cni.Workload) (*cniSnapshot, error) {
	st := &cniSnapshot{pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}
	ds, err := api.GetDaemonSet(ctx, w.Namespace, w.Name)
	switch {
	case apierrors.IsNotFound(err):
		return st, nil // the operator has not created it yet
	case err != nil:
		return nil, err
	}
	st.ds = ds
	pods, err := api.ListPods(ctx, w.Namespace, "")
	if err != nil {
		return nil, err
	}
	for i := range pods {
		p := &pods[i]
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && o.Name == w.Name && p.DeletionTimestamp == nil {
				st.pods[p.Spec.NodeName] = p
			}
		}
	}
	nodes, err := api.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		st.nodes[nodes[i].Name] = &nodes[i]
	}
	return st, nil
}

// missing returns the nodes of want without a running DaemonSet pod.
func (st *cniSnapshot) missing(want []string) []string {
	var out []string
	for _, n := range want {
		if p := st.pods[n]; p == nil || p.Status.Phase != corev1.PodRunning {
			out = append(out, n)
		}
	}
	return out
}

// cniTimeout explains which nodes lack the CNI pod and why.
func (s *session) cniTimeout(w cni.Workload, st *cniSnapshot, missing []string) error {
	if st.ds == nil {
		what := "the tigera operator did not create it: check `kubectl -n tigera-operator logs deploy/tigera-operator` and `kubectl get tigerastatus`"
		if s.in.cluster.Spec.CNI.Type == inventory.CNIFlannelStandalone {
			what = "K3s did not apply the manifest: check `kubectl -n kube-system get addon " + strings.TrimSuffix(plan.ManifestPrefix+cni.FileFlannel, ".yaml") + " -o yaml`"
		}
		return &Failure{Kind: KindInstall, Phase: events.PhaseCNI, Info: events.ErrorInfo{
			Message: fmt.Sprintf("%s %s/%s does not exist after %s: %s", w.Kind, w.Namespace, w.Name, s.in.opts.Timeout, what),
			Resume:  "re-run `k3strap apply` once it runs",
		}}
	}
	var ev []string
	sort.Strings(missing)
	for _, n := range missing {
		p := st.pods[n]
		switch {
		case p != nil:
			why := string(p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
					why += ": " + c.Message
				}
			}
			ev = append(ev, fmt.Sprintf("%s: pod %s %s", n, p.Name, why))
		case st.nodes[n] == nil:
			ev = append(ev, n+": no such node")
		default:
			var un []string
			for _, t := range st.nodes[n].Spec.Taints {
				it := inventory.FromCore(t)
				if it.Blocks() && !it.ToleratedBy(st.ds.Spec.Template.Spec.Tolerations) {
					un = append(un, it.String())
				}
			}
			if len(un) > 0 {
				ev = append(ev, fmt.Sprintf("%s: no pod; the DaemonSet does not tolerate taint(s) %s", n, strings.Join(un, ", ")))
			} else {
				ev = append(ev, n+": no pod (node selector or affinity does not match)")
			}
		}
	}
	return &Failure{Kind: KindInstall, Phase: events.PhaseCNI, Info: events.ErrorInfo{
		Message:  fmt.Sprintf("%s %s/%s does not run on %d node(s) after %s: %s", w.Kind, w.Namespace, w.Name, len(missing), s.in.opts.Timeout, strings.Join(missing, ", ")),
		Fix:      "see the evidence per node; a kernel lacking what the CNI needs is excluded with spec.cni.kernelPolicy: exclude",
		Evidence: ev,
		Resume:   "re-run `k3strap apply`",
	}}
}
