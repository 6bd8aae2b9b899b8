package installer

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// rancherStep installs Rancher (cert-manager and rancher HelmCharts placed by the first
// server's plan, watched until the deployment answers) or registers the cluster in an
// existing Rancher, when the inventory asks for either (docs/rancher.md).
type rancherStep struct{}

func (rancherStep) Phase() events.Phase { return events.PhaseRancher }

func (rancherStep) Summary() string {
	return "install Rancher (watched to a working URL) or register the cluster in an existing Rancher, if asked"
}

func (rancherStep) Run(ctx context.Context, s *session) error {
	return s.rancher(ctx, s.first)
}

// Preview says what the step would do; the HelmChart manifests themselves are previewed with
// the first server's files.
func (rancherStep) Preview(ctx context.Context, s *session) error {
	r := s.in.cluster.Spec.Rancher
	em := s.in.emitter(events.PhaseRancher)
	switch {
	case r == nil || (r.Install == nil && r.Register == nil):
	case r.Install != nil:
		em.Info(s.first.host.Name, fmt.Sprintf("would install Rancher %s through K3s's helm-controller and wait until it answers", rancherVersion(r.Install.Version)))
	default:
		em.Info(s.first.host.Name, "would register the cluster in the existing Rancher and apply its import manifest")
	}
	return ctx.Err()
}

// rancherVersion is the Rancher version installed for v ("" = the default).
func rancherVersion(v string) string {
	if v == "" {
		return inventory.DefaultRancherVersion
	}
	return v
}
