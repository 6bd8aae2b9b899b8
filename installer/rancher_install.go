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

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/templates/rancher"
)

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

// kubectl returns kubectl on the first server's current connection (a reconnect may have
// replaced it).
func (w *rancherWatch) kubectl() kube.Kubectl { return kube.Kubectl{R: w.first.c()} }

// look runs fn with kubectl on the first server; when the connection dropped it reconnects
// and tries again (session.retry), so a long supervision survives a flaky link.
func (w *rancherWatch) look(ctx context.Context, label string, fn func(kc kube.Kubectl) error) error {
	return w.s.retry(ctx, w.first, label, func(context.Context) error { return fn(w.kubectl()) })
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
func (hs *hostState) planned(path string) *File {
	if hs.plan == nil {
		return nil
	}
	return hs.plan.File(path)
}

func (w *rancherWatch) planned(manifest string) *chartSpec {
	f := w.first.planned(RancherManifestPath(manifest))
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
		charts = append(charts, chartRef{rancher.CertManagerRelease, MilestoneCertManagerInstalled, w.planned(ManifestCertManager)})
	}
	charts = append(charts, chartRef{rancher.RancherRelease, MilestoneRancherInstalled, w.planned(ManifestRancher)})
	w.explain = func(ectx context.Context) []string { return w.explainInstall(ectx, charts) }
	for {
		var objs []kube.Object
		err := w.look(ctx, "reading Rancher's install state", func(kc kube.Kubectl) (err error) {
			objs, err = kc.List(ctx, "helmcharts,jobs,deployments", "", "")
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
			done, err := w.installStep(ctx, w.kubectl(), objs, charts, host)
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
func (w *rancherWatch) installStep(ctx context.Context, kc kube.Kubectl, objs []kube.Object, charts []chartRef, host string) (bool, error) {
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
	w.s.rancherURL = "https://" + host
	w.doneMessage = "Rancher answers at https://" + host
	return true, nil
}

// chartInstalled checks one HelmChart: applied by K3s's deploy controller with the spec k3strap
// rendered, and its helm-install job complete. A failed job is a Failure with its log tail.
func (w *rancherWatch) chartInstalled(ctx context.Context, kc kube.Kubectl, objs []kube.Object, ch chartRef) (bool, error) {
	manifest := RancherManifestPath(ch.name + ".yaml")
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

func (w *rancherWatch) jobLog(ctx context.Context, kc kube.Kubectl, job string) []string {
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
	if err := w.look(ctx, "explaining the Rancher timeout", func(kc kube.Kubectl) error {
		_, err := kc.Run(ctx, nil, "get", "--raw", "/readyz")
		return err
	}); err != nil {
		return []string{"the cluster does not answer kubectl on " + w.first.host.Name + ": " + err.Error()}
	}
	kc := w.kubectl()
	var ev []string
	for _, ch := range charts {
		if !w.reachedMilestone(ch.milestone) {
			job := "helm-install-" + ch.name
			if pods, err := kc.ListPods(ctx, rancher.HelmChartNamespace); err == nil {
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
		pods, err := kc.ListPods(ctx, ns)
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
		if c := w.first.c(); c != nil && c.SSH() != nil {
			if conn, err := c.SSH().DialContext(ctx, "tcp", target); err == nil {
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
	p := RancherManifestPath(ManifestRancherBootstrap)
	var manifest []byte
	if f := w.first.planned(p); f != nil && w.first.facts != nil && w.first.facts.K3s.Files[p] == "" {
		manifest = f.Content // uploaded in this run
	} else {
		var b []byte
		err := w.look(ctx, "reading back Rancher's bootstrap password", func(kube.Kubectl) (err error) {
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
	local := RancherPasswordFile(w.s.kubeconfigPath())
	w.s.rancherPasswordFile = local
	if old, err := os.ReadFile(local); err == nil && strings.TrimSpace(string(old)) == pw {
		return nil
	}
	if err := writeFileAtomic(local, []byte(pw+"\n"), 0o600); err != nil {
		return w.failure("storing Rancher's bootstrap password: "+err.Error(), "choose a writable --kubeconfig-out (the password is kept next to the kubeconfig)", nil)
	}
	w.s.rancherPasswordNew = true
	w.em.Step(w.first.host.Name, "bootstrap-password", events.StatusChanged, "stored Rancher's bootstrap password in "+local+" (mode 0600)")
	return nil
}

// tolerationsFor returns the tolerations that tolerate exactly the taints ts.
func tolerationsFor(ts []inventory.Taint) []inventory.Toleration {
	var out []inventory.Toleration
	for _, t := range ts {
		out = append(out, inventory.TolerationFor(t))
	}
	return out
}
