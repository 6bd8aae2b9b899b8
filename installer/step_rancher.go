// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/inventory"
)

// rancherStep installs Rancher (cert-manager and rancher HelmCharts placed by the first
// server's plan, watched until the deployment answers) or registers the cluster in an
// existing Rancher, when the inventory asks for either (docs/rancher.md).
//
// Reads: the first server's plan and facts; s.out.kubeconfig (where the password file goes).
// Writes: s.out.rancherURL, s.out.rancherPasswordFile, s.out.rancherPasswordNew.
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

// rancher installs Rancher or registers the cluster with one, and supervises it. It
// runs after the cluster's milestones, joins and the kubeconfig; rancher.timeout bounds it.
func (s *session) rancher(ctx context.Context, first *hostState) error {
	r := s.in.cluster.Spec.Rancher
	if r == nil || (r.Install == nil && r.Register == nil) {
		return nil
	}
	timeout := r.Timeout.D()
	if timeout <= 0 {
		timeout = inventory.DefaultRancherTimeout.D()
	}
	w := &rancherWatch{s: s, first: first, em: s.in.emitter(events.PhaseRancher), start: time.Now(), timeout: timeout}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	if r.Install != nil {
		err = w.install(tctx)
	} else {
		err = w.register(tctx)
	}
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		err = w.timeoutFailure(ctx)
	}
	if err != nil {
		var f *Failure
		if !errors.As(err, &f) {
			err = w.failure(err.Error(), "", nil)
		}
		first.setResult(events.StatusFailed, "rancher: "+firstLine(err))
		w.em.Finished(events.StatusFailed, "")
		return err
	}
	w.em.Finished(events.StatusOK, w.doneMessage)
	return nil
}

// Rancher milestones, in their order. Install: the helm-controller's install jobs
// finished, the rancher Deployment available, the Rancher URL answering. Register: the
// cluster object in Rancher (API mode), the import manifest applied, the cluster agent
// available.
const (
	MilestoneCertManagerInstalled = "cert-manager-installed"
	MilestoneRancherInstalled     = "rancher-installed"
	MilestoneRancherAvailable     = "rancher-available"
	MilestoneRancherAnswers       = "rancher-url-answers"
	MilestoneRancherCluster       = "rancher-cluster-ready"
	MilestoneImportApplied        = "import-manifest-applied"
	MilestoneClusterAgent         = "cattle-cluster-agent-available"
)

// kubeconfigPath is where the kubeconfig step writes the kubeconfig (--kubeconfig-out, default
// ./<cluster name>.kubeconfig).
func (s *session) kubeconfigPath() string {
	if p := s.in.opts.KubeconfigOut; p != "" {
		return p
	}
	return s.in.cluster.Metadata.Name + ".kubeconfig"
}
