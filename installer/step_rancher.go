// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/installer/rancherapi"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
	"github.com/k3strap/k3strap/templates/rancher"
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

// rancherWatch is one run of the Rancher step: the milestones reached so far and what it is
// waiting for, so that a timeout names both.
type rancherWatch struct {
	s       *session
	first   *hostState
	em      events.Emitter
	start   time.Time
	timeout time.Duration

	reached []string
	// waiting says what the step waits for now; evidence is the latest state behind it.
	waiting  string
	evidence []string
	// explain collects fresh evidence for a timeout report (nil: use evidence).
	explain func(ctx context.Context) []string
	// readErr is the last failure to read the cluster, when the latest look failed.
	readErr     error
	doneMessage string
}

// look runs fn with the first server's Kubernetes API; when the connection dropped it
// reconnects and tries again (session.retry), so a long supervision survives a flaky link.
func (w *rancherWatch) look(ctx context.Context, label string, fn func(kc *kube.API) error) error {
	return w.s.retry(ctx, w.first, label, func(ctx context.Context) error { return w.first.withAPI(ctx, fn) })
}

func (w *rancherWatch) milestone(name, detail string) {
	w.reached = append(w.reached, name)
	w.em.Milestone(w.first.host.Name, events.MilestoneInfo{Name: name, Seconds: time.Since(w.start).Seconds(), Detail: detail})
}

func (w *rancherWatch) reachedMilestone(name string) bool {
	for _, r := range w.reached {
		if r == name {
			return true
		}
	}
	return false
}

func (w *rancherWatch) last() string {
	if len(w.reached) == 0 {
		return "none yet"
	}
	return w.reached[len(w.reached)-1]
}

func (w *rancherWatch) wait(what string, evidence ...string) {
	w.waiting, w.evidence = what, evidence
}

func (w *rancherWatch) failure(msg, fix string, evidence []string) *Failure {
	return &Failure{Kind: KindInstall, Phase: events.PhaseRancher, Host: w.first.host.Name, Info: events.ErrorInfo{
		Message: msg, Fix: fix, Evidence: evidence,
		Resume: "fix the cause and re-run `k3strap apply`: the cluster stays as it is and the Rancher step starts again",
	}}
}

// timeoutFailure reports that rancher.timeout ran out, naming the last milestone reached and
// what was still awaited, with fresh evidence (ctx is the run's context, still alive).
func (w *rancherWatch) timeoutFailure(ctx context.Context) *Failure {
	ev := w.evidence
	if w.readErr != nil && ctx.Err() == nil {
		ev = append(append([]string(nil), ev...), "the last look at the cluster failed: "+w.readErr.Error())
	}
	if w.explain != nil {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if more := w.explain(ectx); len(more) > 0 {
			ev = append(append([]string(nil), ev...), more...)
		}
		cancel()
	}
	waiting := w.waiting
	if waiting == "" {
		waiting = "the first step"
	}
	return w.failure(fmt.Sprintf("Rancher was not ready within %s (rancher.timeout): last milestone reached: %s; still waiting for %s",
		w.timeout, w.last(), waiting), "look at the evidence below; raise spec.rancher.timeout if the cluster is only slow (image pulls on a slow link)", ev)
}

// pollInterval is how often the Rancher step looks at the cluster: twice the bring-up
// supervisor's period, between 0.5 s and 5 s.
func (w *rancherWatch) pollInterval() time.Duration {
	return min(max(2*w.s.in.opts.PollInterval, 500*time.Millisecond), 5*time.Second)
}

// sleep waits one poll interval; it returns ctx's error when ctx ends first.
func (w *rancherWatch) sleep(ctx context.Context) error {
	t := time.NewTimer(w.pollInterval())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// kubeconfigPath is where the kubeconfig step writes the kubeconfig (--kubeconfig-out, default
// ./<cluster name>.kubeconfig).
func (s *session) kubeconfigPath() string {
	if p := s.in.opts.KubeconfigOut; p != "" {
		return p
	}
	return s.in.cluster.Metadata.Name + ".kubeconfig"
}

// chartSpec is the part of a HelmChart the Rancher step compares with what it rendered.
type chartSpec struct {
	Version       string `yaml:"version" json:"version"`
	ChartContent  string `yaml:"chartContent" json:"chartContent"`
	ValuesContent string `yaml:"valuesContent" json:"valuesContent"`
}

// chartRef is one HelmChart the install waits for.
type chartRef struct {
	name      string // HelmChart name = release
	milestone string
	want      *chartSpec // the rendered spec (nil when unknown)
}

// planned returns the file the first server's plan has at path, or nil.
func (hs *hostState) planned(path string) *plan.File {
	if hs.plan == nil {
		return nil
	}
	return hs.plan.File(path)
}

func (w *rancherWatch) planned(manifest string) *chartSpec {
	f := w.first.planned(plan.RancherManifestPath(manifest))
	if f == nil {
		return nil
	}
	var doc struct {
		Spec chartSpec `yaml:"spec"`
	}
	if err := yaml.Unmarshal(f.Content, &doc); err != nil {
		return nil
	}
	return &doc.Spec
}

// install supervises the Rancher install: HelmChart install jobs finished (a failed
// one reports the job's log tail) → deployment cattle-system/rancher available → the Rancher
// URL answers.
func (w *rancherWatch) install(ctx context.Context) error {
	c := w.s.in.cluster
	in := c.Spec.Rancher.Install
	host := c.RancherHostname()
	url := "https://" + host
	replicas := fmt.Sprintf("%d replicas", c.RancherReplicas())
	if c.RancherReplicas() == 1 {
		replicas = "1 replica"
	}
	w.em.Started(fmt.Sprintf("installing Rancher %s at %s (%s)", in.RancherVersion(), url, replicas))
	if err := w.bootstrapPassword(ctx); err != nil {
		return err
	}
	var charts []chartRef
	if in.EffectiveTLSSource().NeedsCertManager() {
		charts = append(charts, chartRef{rancher.CertManagerRelease, MilestoneCertManagerInstalled, w.planned(plan.ManifestCertManager)})
	}
	charts = append(charts, chartRef{rancher.RancherRelease, MilestoneRancherInstalled, w.planned(plan.ManifestRancher)})
	w.explain = func(ectx context.Context) []string { return w.explainInstall(ectx, charts) }
	for {
		var objs []kube.Object
		var kc *kube.API
		err := w.look(ctx, "reading Rancher's install state", func(a *kube.API) (err error) {
			kc = a
			objs, err = a.List(ctx, "helmcharts.helm.cattle.io,jobs.batch,deployments.apps", "", "")
			return err
		})
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// The API may be briefly away (a K3s restart); the next look tries again.
			w.readErr = err
		default:
			w.readErr = nil
			done, err := w.installStep(ctx, kc, objs, charts, host)
			if err != nil || done {
				return err
			}
		}
		if err := w.sleep(ctx); err != nil {
			return err
		}
	}
}

// installStep looks once; it reports done when the URL answered.
func (w *rancherWatch) installStep(ctx context.Context, kc *kube.API, objs []kube.Object, charts []chartRef, host string) (bool, error) {
	for _, ch := range charts {
		if w.reachedMilestone(ch.milestone) {
			continue
		}
		ok, err := w.chartInstalled(ctx, kc, objs, ch)
		if err != nil || !ok {
			return false, err
		}
	}
	if !w.reachedMilestone(MilestoneRancherAvailable) {
		o := kube.Find(objs, "Deployment", rancher.RancherNamespace, rancher.RancherRelease)
		if o == nil {
			w.wait("deployment cattle-system/rancher to be created by the rancher chart")
			return false, nil
		}
		var d appsv1.Deployment
		if err := o.Decode(&d); err != nil {
			return false, err
		}
		if !kube.DeploymentAvailable(&d) {
			w.wait("deployment cattle-system/rancher to become available", deploymentState(&d))
			return false, nil
		}
		w.milestone(MilestoneRancherAvailable, fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, replicasOf(&d)))
	}
	detail, err := w.probeURL(ctx, host)
	if err != nil {
		w.wait("https://"+host+" to answer", "GET https://"+host+"/ping: "+err.Error())
		return false, nil
	}
	w.milestone(MilestoneRancherAnswers, detail)
	w.s.out.rancherURL = "https://" + host
	w.doneMessage = "Rancher answers at https://" + host
	return true, nil
}

// chartInstalled checks one HelmChart: applied by K3s's deploy controller with the spec k3strap
// rendered, and its helm-install job complete. A failed job is a Failure with its log tail.
func (w *rancherWatch) chartInstalled(ctx context.Context, kc *kube.API, objs []kube.Object, ch chartRef) (bool, error) {
	manifest := plan.RancherManifestPath(ch.name + ".yaml")
	o := kube.Find(objs, "HelmChart", rancher.HelmChartNamespace, ch.name)
	if o == nil {
		w.wait(fmt.Sprintf("K3s to apply %s (HelmChart kube-system/%s)", manifest, ch.name))
		return false, nil
	}
	if ch.want != nil {
		var got struct {
			Spec chartSpec `json:"spec"`
		}
		if err := o.Decode(&got); err != nil {
			return false, err
		}
		if got.Spec != *ch.want {
			w.wait(fmt.Sprintf("K3s to apply the changed %s (HelmChart kube-system/%s still has the previous spec)", manifest, ch.name))
			return false, nil
		}
	}
	jobName := "helm-install-" + ch.name
	jo := kube.Find(objs, "Job", rancher.HelmChartNamespace, jobName)
	if jo == nil {
		w.wait(fmt.Sprintf("K3s's helm-controller to start job kube-system/%s", jobName))
		return false, nil
	}
	var job batchv1.Job
	if err := jo.Decode(&job); err != nil {
		return false, err
	}
	state, why := kube.JobStatus(&job)
	switch state {
	case kube.JobFailed:
		ev := []string{fmt.Sprintf("job kube-system/%s: %s", jobName, why)}
		ev = append(ev, w.jobLog(ctx, kc, jobName)...)
		return false, w.failure(fmt.Sprintf("the helm install of %s failed (job kube-system/%s)", ch.name, jobName),
			fmt.Sprintf("read the job's log above (all of it: k3s kubectl -n kube-system logs job/%s); correct the chart version, repository or values in spec.rancher.install", jobName), ev)
	case kube.JobComplete:
		w.milestone(ch.milestone, fmt.Sprintf("job kube-system/%s complete", jobName))
		return true, nil
	}
	w.wait(fmt.Sprintf("the helm install of %s (job kube-system/%s, %d active, %d failed attempts)", ch.name, jobName, job.Status.Active, job.Status.Failed))
	return false, nil
}

func (w *rancherWatch) jobLog(ctx context.Context, kc *kube.API, job string) []string {
	out, err := kc.Logs(ctx, rancher.HelmChartNamespace, "job/"+job, 15)
	if err != nil || strings.TrimSpace(out) == "" {
		return nil
	}
	var ev []string
	for _, l := range strings.Split(out, "\n") {
		ev = append(ev, "log: "+l)
	}
	return ev
}

// explainInstall gathers evidence for a timeout: the log tail of an unfinished install job and
// the pods of cert-manager and cattle-system that do not run (untolerated taints, image pulls).
func (w *rancherWatch) explainInstall(ctx context.Context, charts []chartRef) []string {
	// One look (reconnecting when the connection dropped) to be sure kubectl answers.
	var kc *kube.API
	if err := w.look(ctx, "explaining the Rancher timeout", func(a *kube.API) error {
		kc = a
		return a.Ready(ctx)
	}); err != nil {
		return []string{"the cluster's API does not answer on " + w.first.host.Name + ": " + err.Error()}
	}
	var ev []string
	for _, ch := range charts {
		if !w.reachedMilestone(ch.milestone) {
			job := "helm-install-" + ch.name
			if pods, err := kc.ListPods(ctx, rancher.HelmChartNamespace, ""); err == nil {
				var mine []corev1.Pod
				for _, p := range pods {
					if p.Labels["job-name"] == job || p.Labels["batch.kubernetes.io/job-name"] == job {
						mine = append(mine, p)
					}
				}
				if probs := kube.PodProblems(mine); len(probs) > 0 {
					ev = append(ev, probs...)
				} else if len(mine) > 0 {
					ev = append(ev, fmt.Sprintf("pod %s/%s of job %s is %s (helm is still installing: a slow chart download or image pull?)",
						mine[0].Namespace, mine[0].Name, job, mine[0].Status.Phase))
				}
			}
			ev = append(ev, w.jobLog(ctx, kc, job)...)
			break
		}
	}
	for _, ns := range []string{rancher.CertManagerNamespace, rancher.RancherNamespace} {
		pods, err := kc.ListPods(ctx, ns, "")
		if err == nil {
			ev = append(ev, kube.PodProblems(pods)...)
		}
	}
	return ev
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

func deploymentState(d *appsv1.Deployment) string {
	return fmt.Sprintf("deployment %s/%s: %d/%d replicas available, %d ready", d.Namespace, d.Name, d.Status.AvailableReplicas, replicasOf(d), d.Status.ReadyReplicas)
}

// probeURL asks https://host/ping (Rancher answers "pong") through the cluster's ingress on
// the first server's port 443. The connection goes through the first server's SSH connection
// (direct-tcpip: no port but SSH has to be reachable from the workstation); when
// the server refuses TCP forwarding it is made directly. The TLS certificate is not verified:
// it may come from Rancher's own CA or a Let's Encrypt order still in progress, and nothing
// secret is sent.
func (w *rancherWatch) probeURL(ctx context.Context, host string) (string, error) {
	target := net.JoinHostPort(w.first.host.Address, "443")
	via := "through " + w.first.host.Name + "'s SSH connection"
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		if c := w.first.c(); c != nil {
			if conn, err := c.DialContext(ctx, "tcp", target); err == nil {
				return conn, nil
			}
		}
		via = "directly"
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}
	tr := &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}, //nolint:gosec // liveness probe, see above
		DisableKeepAlives: true, TLSHandshakeTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/ping", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "pong" {
		return "", fmt.Errorf("HTTP %d %q", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return fmt.Sprintf("GET https://%s/ping answered pong (via %s:443, %s)", host, w.first.host.Address, via), nil
}

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

// register registers the cluster with an existing Rancher: the import manifest from
// importURL, or — API mode — the cluster object created through Rancher's v3 API with the
// agent tolerations the first server's custom taints need (F3) and its registration token's
// manifest; the manifest is applied on the first server with `k3s kubectl apply -f -`, then
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
