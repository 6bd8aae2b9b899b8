package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
)

// cniStep says loudly which hosts run without the CNI (kernelPolicy exclude, the preflight
// verdict; docs/failure-modes.md F2) and waits until the CNI k3strap deploys (Calico, standalone
// flannel) runs on every node it should, naming the nodes where it does not.
type cniStep struct{}

func (cniStep) Phase() events.Phase { return events.PhaseCNI }

func (cniStep) Summary() string {
	return "report CNI-excluded hosts; wait until the deployed CNI's DaemonSet runs on every node it should"
}

func (cniStep) Run(ctx context.Context, s *session) error {
	s.reportExcluded(s.excluded)
	return s.waitCNI(ctx, s.first, s.excluded)
}

// Preview says which CNI the step would wait for; the exclusions are reported as preflight
// judged them.
func (cniStep) Preview(ctx context.Context, s *session) error {
	s.reportExcluded(s.excluded)
	if t := s.in.cluster.Spec.CNI.Type; t != "" {
		s.in.emitter(events.PhaseCNI).Info("", "would wait until "+string(t)+" runs on every node it should")
	}
	return ctx.Err()
}
