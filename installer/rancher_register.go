// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/rancherapi"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// register registers the cluster with an existing Rancher: the import manifest from
// importURL, or — API mode — the cluster object created through Rancher's v3 API with the
// agent tolerations the first server's custom taints need (F3) and its registration token's
// manifest; the manifest is applied on the first server with a server-side apply through the API, then
// cattle-cluster-agent must become available.
func (w *rancherWatch) register(ctx context.Context) error {
	c := w.s.in.cluster
	r := c.Spec.Rancher.Register
	hc, err := rancherapi.HTTPClient(r.Insecure, c.ResolvePath(r.CACertFile))
	if err != nil {
		return w.failure(err.Error(), "", nil)
	}
	custom := c.FirstServerCustomTaints()
	var manifestURL, rancherURL string
	if r.APIMode() {
		token := r.APIToken
		if r.APITokenEnv != "" {
			token = inventory.Secret(os.Getenv(r.APITokenEnv))
			if token == "" {
				return w.failure(fmt.Sprintf("rancher.register.apiTokenEnv names %s, which is not set", r.APITokenEnv),
					"export "+r.APITokenEnv+" with a Rancher API key (account > API Keys) and re-run", nil)
			}
		}
		rancherURL = strings.TrimRight(r.URL, "/")
		api := &rancherapi.Client{Base: rancherURL, Token: token, HTTP: hc}
		name := c.RancherClusterName()
		w.em.Started(fmt.Sprintf("registering with Rancher at %s as cluster %s", rancherURL, name))
		w.wait("Rancher's API at " + rancherURL)
		if v, err := api.ServerVersion(ctx); err != nil {
			return w.failure(err.Error(), "check rancher.register.url, the API token and insecure/caCertFile", nil)
		} else if fixed, known := preflight.RancherHasAgentTaintFix(v); known && !fixed && len(custom) > 0 {
			w.em.Warn(w.first.host.Name, fmt.Sprintf("Rancher %s lacks the fix for rancher/rancher#49981 (cattle-cluster-agent Pending on a tainted first node): k3strap sets appendTolerations, but upgrade to %s", v, preflight.RancherAgentTaintFixedIn))
		}
		clusterTols := inventory.AppendTolerations(rancherapi.TolerationsFor(custom), r.ClusterAgentTolerations...)
		fleetTols := inventory.AppendTolerations(rancherapi.TolerationsFor(custom), r.FleetAgentTolerations...)
		cl, created, updated, err := api.EnsureCluster(ctx, name, clusterTols, fleetTols)
		if err != nil {
			return w.failure(err.Error(), "check that the API token may create clusters", nil)
		}
		what := "found"
		switch {
		case created:
			what = "created"
		case updated:
			what = "updated"
		}
		w.milestone(MilestoneRancherCluster, fmt.Sprintf("cluster %s (%s) %s with %d cluster-agent and %d fleet-agent appendTolerations",
			name, cl.ID, what, len(clusterTols), len(fleetTols)))
		w.wait("Rancher's registration token for cluster " + cl.ID)
		if manifestURL, err = api.ImportManifestURL(ctx, cl.ID); err != nil {
			return w.failure(err.Error(), "", nil)
		}
		rancherURL += "/dashboard/c/" + cl.ID
	} else {
		manifestURL = r.ImportURL.Reveal()
		rancherURL = rancherapi.Origin(manifestURL)
		w.em.Started("registering with the Rancher at " + rancherURL + " (import manifest)")
	}

	w.wait("the import manifest from " + rancherapi.RedactURL(manifestURL))
	manifest, err := rancherapi.FetchImportManifest(ctx, hc, manifestURL)
	if err != nil {
		return w.failure(err.Error(), "check the import URL and, for a self-signed Rancher, set rancher.register.insecure: true or caCertFile", nil)
	}
	if missing, err := rancherapi.AgentMissingTolerations(manifest, custom); err != nil {
		return w.failure("the import manifest from "+rancherapi.RedactURL(manifestURL)+" is not usable: "+err.Error(), "", nil)
	} else if len(missing) > 0 {
		return w.failure(fmt.Sprintf("the import manifest's %s does not tolerate the first server %s's taint(s) %s: it would stay Pending (docs/failure-modes.md F3, rancher/rancher#49981)",
			rancherapi.ClusterAgent, w.first.host.Name, rancherapi.JoinTaints(missing)),
			"in Rancher, edit the cluster: Cluster Configuration > Cluster Agent > Tolerations (clusterAgentDeploymentCustomization.appendTolerations) and Fleet Agent (fleetAgentDeploymentCustomization.appendTolerations) — add "+rancherapi.JoinTaints(missing)+" — then copy the import URL again; or use rancher.register.url with an API token and k3strap sets them",
			nil)
	}
	w.wait("the server-side apply of the import manifest")
	var out string
	err = w.look(ctx, "applying the import manifest", func(kc *kube.API) (err error) {
		out, err = kc.Apply(ctx, manifest)
		return err
	})
	if err != nil {
		return w.failure("applying the import manifest on "+w.first.host.Name+": "+err.Error(), "", nil)
	}
	w.milestone(MilestoneImportApplied, fmt.Sprintf("%d objects applied (server-side apply)", rancherapi.CountLines(out)))

	w.explain = func(ectx context.Context) []string {
		var ev []string
		_ = w.first.withAPI(ectx, func(kc *kube.API) error {
			if pods, err := kc.ListPods(ectx, "cattle-system", ""); err == nil {
				ev = append(ev, kube.PodProblems(pods)...)
			}
			if l, err := kc.Logs(ectx, "cattle-system", "deployment/"+rancherapi.ClusterAgent, 10); err == nil && l != "" {
				for _, line := range strings.Split(l, "\n") {
					ev = append(ev, "log: "+line)
				}
			}
			return nil
		})
		return ev
	}
	for {
		var d *appsv1.Deployment
		err := w.look(ctx, "reading "+rancherapi.ClusterAgent, func(kc *kube.API) (err error) {
			d, err = kc.GetDeployment(ctx, "cattle-system", rancherapi.ClusterAgent)
			return err
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case apierrors.IsNotFound(err):
			w.wait("deployment cattle-system/" + rancherapi.ClusterAgent + " to appear")
		case err != nil:
			w.wait("deployment cattle-system/"+rancherapi.ClusterAgent+" to become available", "reading it: "+err.Error())
		case kube.DeploymentAvailable(d):
			w.milestone(MilestoneClusterAgent, fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, replicasOf(d)))
			w.s.out.rancherURL = rancherURL
			w.doneMessage = "registered with Rancher: " + rancherURL
			return nil
		default:
			w.wait("deployment cattle-system/"+rancherapi.ClusterAgent+" to become available (it connects to Rancher)", deploymentState(d))
		}
		if err := w.sleep(ctx); err != nil {
			return err
		}
	}
}
