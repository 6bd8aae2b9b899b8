// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/templates/rancher"
)

// bootstrapPassword keeps a generated bootstrap password on the workstation, 0600, next to
// the kubeconfig: taken from the manifest uploaded in this run, or read back from the first
// server when the server already had one (never regenerated, like the cluster token). The
// password reaches no event, log or error; the summary names the file, and a terminal
// front-end shows the password once when this run wrote the file.
func (w *rancherWatch) bootstrapPassword(ctx context.Context) error {
	in := w.s.in.cluster.Spec.Rancher.Install
	if in.BootstrapPassword != "" {
		return nil // the user chose it and knows it
	}
	p := plan.RancherManifestPath(plan.ManifestRancherBootstrap)
	var manifest []byte
	if f := w.first.planned(p); f != nil && w.first.facts != nil && w.first.facts.K3s.Files[p] == "" {
		manifest = f.Content // uploaded in this run
	} else {
		var b []byte
		err := w.s.retry(ctx, w.first, "reading back Rancher's bootstrap password", func(ctx context.Context) (err error) {
			b, err = w.first.c().ReadFile(ctx, p)
			return err
		})
		if err != nil {
			return w.failure("reading back Rancher's bootstrap password: "+err.Error(), "", nil)
		}
		manifest = b
	}
	pw, err := rancher.ParseBootstrapSecret(manifest)
	if err != nil {
		return w.failure(fmt.Sprintf("%s on %s: %v", p, w.first.host.Name, err), "remove the file on the server and re-run apply to generate a new password", nil)
	}
	local := plan.RancherPasswordFile(w.s.kubeconfigPath())
	w.s.out.rancherPasswordFile = local
	if old, err := os.ReadFile(local); err == nil && strings.TrimSpace(string(old)) == pw {
		return nil
	}
	if err := writeFileAtomic(local, []byte(pw+"\n"), 0o600); err != nil {
		return w.failure("storing Rancher's bootstrap password: "+err.Error(), "choose a writable --kubeconfig-out (the password is kept next to the kubeconfig)", nil)
	}
	w.s.out.rancherPasswordNew = true
	w.em.Step(w.first.host.Name, "bootstrap-password", events.StatusChanged, "stored Rancher's bootstrap password in "+local+" (mode 0600)")
	return nil
}
