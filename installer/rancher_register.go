package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// clusterAgent is the Deployment Rancher's import manifest runs (cattle-system).
const clusterAgent = "cattle-cluster-agent"

// register registers the cluster with an existing Rancher: the import manifest from
// importURL, or — API mode — the cluster object created through Rancher's v3 API with the
// agent tolerations the first server's custom taints need (F3) and its registration token's
// manifest; the manifest is applied on the first server with `k3s kubectl apply -f -`, then
// cattle-cluster-agent must become available.
func (w *rancherWatch) register(ctx context.Context) error {
	c := w.s.in.cluster
	r := c.Spec.Rancher.Register
	hc, err := rancherHTTPClient(r.Insecure, c.ResolvePath(r.CACertFile))
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
		api := &rancherAPI{base: rancherURL, token: token, http: hc}
		name := c.RancherClusterName()
		w.em.Started(fmt.Sprintf("registering with Rancher at %s as cluster %s", rancherURL, name))
		w.wait("Rancher's API at " + rancherURL)
		if v, err := api.serverVersion(ctx); err != nil {
			return w.failure(err.Error(), "check rancher.register.url, the API token and insecure/caCertFile", nil)
		} else if fixed, known := preflight.RancherHasAgentTaintFix(v); known && !fixed && len(custom) > 0 {
			w.em.Warn(w.first.host.Name, fmt.Sprintf("Rancher %s lacks the fix for rancher/rancher#49981 (cattle-cluster-agent Pending on a tainted first node): k3strap sets appendTolerations, but upgrade to %s", v, preflight.RancherAgentTaintFixedIn))
		}
		clusterTols := inventory.AppendTolerations(tolerationsFor(custom), r.ClusterAgentTolerations...)
		fleetTols := inventory.AppendTolerations(tolerationsFor(custom), r.FleetAgentTolerations...)
		cl, created, updated, err := api.ensureCluster(ctx, name, clusterTols, fleetTols)
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
		if manifestURL, err = api.importManifestURL(ctx, cl.ID); err != nil {
			return w.failure(err.Error(), "", nil)
		}
		rancherURL += "/dashboard/c/" + cl.ID
	} else {
		manifestURL = r.ImportURL.Reveal()
		rancherURL = originOf(manifestURL)
		w.em.Started("registering with the Rancher at " + rancherURL + " (import manifest)")
	}

	w.wait("the import manifest from " + redactURL(manifestURL))
	manifest, err := fetchImportManifest(ctx, hc, manifestURL)
	if err != nil {
		return w.failure(err.Error(), "check the import URL and, for a self-signed Rancher, set rancher.register.insecure: true or caCertFile", nil)
	}
	if missing, err := agentMissingTolerations(manifest, custom); err != nil {
		return w.failure("the import manifest from "+redactURL(manifestURL)+" is not usable: "+err.Error(), "", nil)
	} else if len(missing) > 0 {
		return w.failure(fmt.Sprintf("the import manifest's %s does not tolerate the first server %s's taint(s) %s: it would stay Pending (docs/failure-modes.md F3, rancher/rancher#49981)",
			clusterAgent, w.first.host.Name, joinTaints(missing)),
			"in Rancher, edit the cluster: Cluster Configuration > Cluster Agent > Tolerations (clusterAgentDeploymentCustomization.appendTolerations) and Fleet Agent (fleetAgentDeploymentCustomization.appendTolerations) — add "+joinTaints(missing)+" — then copy the import URL again; or use rancher.register.url with an API token and k3strap sets them",
			nil)
	}
	w.wait("`k3s kubectl apply` of the import manifest")
	var out string
	err = w.look(ctx, "applying the import manifest", func(kc kube.Kubectl) (err error) {
		out, err = kc.Apply(ctx, manifest)
		return err
	})
	if err != nil {
		return w.failure("applying the import manifest on "+w.first.host.Name+": "+err.Error(), "", nil)
	}
	w.milestone(MilestoneImportApplied, fmt.Sprintf("%d objects applied with k3s kubectl apply", countLines(out)))

	w.explain = func(ectx context.Context) []string {
		kc := w.kubectl()
		var ev []string
		if pods, err := kc.ListPods(ectx, "cattle-system"); err == nil {
			ev = append(ev, kube.PodProblems(pods)...)
		}
		if l, err := kc.Logs(ectx, "cattle-system", "deployment/"+clusterAgent, 10); err == nil && l != "" {
			for _, line := range strings.Split(l, "\n") {
				ev = append(ev, "log: "+line)
			}
		}
		return ev
	}
	for {
		var d *appsv1.Deployment
		err := w.look(ctx, "reading "+clusterAgent, func(kc kube.Kubectl) (err error) {
			d, err = kc.GetDeployment(ctx, "cattle-system", clusterAgent)
			return err
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, kube.ErrNotFound):
			w.wait("deployment cattle-system/" + clusterAgent + " to appear")
		case err != nil:
			w.wait("deployment cattle-system/"+clusterAgent+" to become available", "reading it: "+err.Error())
		case kube.DeploymentAvailable(d):
			w.milestone(MilestoneClusterAgent, fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, replicasOf(d)))
			w.s.rancherURL = rancherURL
			w.doneMessage = "registered with Rancher: " + rancherURL
			return nil
		default:
			w.wait("deployment cattle-system/"+clusterAgent+" to become available (it connects to Rancher)", deploymentState(d))
		}
		if err := w.sleep(ctx); err != nil {
			return err
		}
	}
}

// originOf returns scheme://host of u.
func originOf(u string) string {
	s := redactURL(u)
	if i := strings.Index(s, "/v3/"); i >= 0 {
		return s[:i]
	}
	return s
}

func joinTaints(ts []inventory.Taint) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

func countLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// agentMissingTolerations finds the cattle-cluster-agent Deployment in an import manifest
// (multi-document YAML) and returns the taints of ts its pod template does not tolerate. A
// manifest without that Deployment is an error.
func agentMissingTolerations(manifest []byte, ts []inventory.Taint) ([]inventory.Taint, error) {
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("it has no Deployment %s", clusterAgent)
		}
		if err != nil {
			return nil, fmt.Errorf("it is not YAML: %v", err)
		}
		md, _ := doc["metadata"].(map[string]any)
		if doc["kind"] != "Deployment" || md == nil || md["name"] != clusterAgent {
			continue
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		var d appsv1.Deployment
		if err := sigsyaml.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("its Deployment %s does not decode: %v", clusterAgent, err)
		}
		var missing []inventory.Taint
		for _, t := range ts {
			if !t.ToleratedBy(d.Spec.Template.Spec.Tolerations) {
				missing = append(missing, t)
			}
		}
		return missing, nil
	}
}
