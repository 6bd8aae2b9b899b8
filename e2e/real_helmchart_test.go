// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// HelmCharts on the real K3s: K3s's own helm-controller runs its install Jobs with the real
// klipper-helm image (helm v4.1.4 and klipper-helm's entry script, built by mkimages real-helm;
// docs/testing-stand-ins.md), on the cluster of TestRealComponents.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/k3s"
)

// helmImagesArchive is the file name of the klipper-helm archive on the hosts.
const helmImagesArchive = "k3strap-helm-images-amd64.tar.zst"

// klipperHelmImage is the job image K3s v1.36.3+k3s1's helm-controller names (its binary's
// ldflags, chart.DefaultJobImage).
const klipperHelmImage = "docker.io/rancher/klipper-helm:v0.13.3-build20260727"

// helmImagesOnce builds the klipper-helm archive once per test binary (mkimages real-helm,
// the program cached with the other real images).
var helmImagesOnce = sync.OnceValues(func() (builtArchive, error) {
	var hi builtArchive
	var err error
	hi.archive, hi.seconds, hi.log, err = runMkimages("real-helm", helmImagesArchive)
	return hi, err
})

// probeChart returns the chart e2e/testdata/charts/k3strap-probe packed as `helm package`
// packs it (a gzipped tar whose entries lie under the chart's name), base64-encoded for a
// HelmChart's chartContent.
func probeChart(t *testing.T) string {
	t.Helper()
	root := filepath.Join(repoRoot(), "e2e", "testdata", "charts", "k3strap-probe")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if err := tw.WriteHeader(&tar.Header{Name: "k3strap-probe/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatalf("packing the probe chart: %v", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// probeHelmChart is a HelmChart (kube-system/name) of the probe chart, installed into its own
// namespace with greeting set to greeting.
func probeHelmChart(chart, name, greeting string) string {
	return fmt.Sprintf(`apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata:
  name: %[1]s
  namespace: kube-system
spec:
  chartContent: %[2]s
  targetNamespace: k3strap-%[1]s
  createNamespace: true
  valuesContent: |-
    greeting: %[3]s
`, name, chart, greeting)
}

// waitJobComplete waits for Job kube-system/name to complete and returns it; on timeout it
// fails with the Job's pods, their logs and the namespace's events.
func (c *testCluster) waitJobComplete(t *testing.T, name string, timeout time.Duration) batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var job batchv1.Job
		out, err := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "job", "-n", "kube-system", name, "-o", "json")
		if err == nil && json.Unmarshal([]byte(out), &job) == nil {
			for _, cond := range job.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return job
				}
			}
		}
		if time.Now().After(deadline) {
			pods, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "pods", "-n", "kube-system", "-l", "job-name="+name, "-o", "wide")
			logs, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "logs", "-n", "kube-system", "-l", "job-name="+name, "--tail=30")
			ev, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "events", "-n", "kube-system", "--sort-by=.lastTimestamp")
			t.Fatalf("Job kube-system/%s not complete within %s (%v)\npods:\n%s\nlogs:\n%s\nevents:\n%s", name, timeout, err, pods, logs, lastLines(ev, 20))
		}
		time.Sleep(2 * time.Second)
	}
}

// jobPods returns the pods of Job kube-system/name.
func (c *testCluster) jobPods(name string) []corev1.Pod {
	var list corev1.PodList
	c.kubectlJSON(0, &list, "get", "pods", "-n", "kube-system", "-l", "job-name="+name)
	return list.Items
}

// userTolerations drops the tolerations every pod gets from the DefaultTolerationSeconds
// admission plugin (not-ready and unreachable, NoExecute, 300 s) and returns the rest as
// key:operator:value:effect, sorted.
func userTolerations(tol []corev1.Toleration) []string {
	var out []string
	for _, t := range tol {
		if (t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable") && t.Effect == corev1.TaintEffectNoExecute && t.TolerationSeconds != nil {
			continue
		}
		op := string(t.Operator)
		if op == "" {
			op = "Equal"
		}
		out = append(out, t.Key+":"+op+":"+t.Value+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}

// realHelmChart is TestRealComponents's HelmChart part (its cluster: one real server with the
// real component images):
//   - helmchart: with the klipper-helm archive imported, a HelmChart of the repository's probe
//     chart (chartContent) is installed by the real helm-controller: its Job completes with the
//     klipper-helm image (mkimages's labels), the entry script's termination message, a helm v4
//     release Secret marked deployed and the chart's ConfigMap with the value given; the Job's
//     tolerations are the ones k3s.HelmJobTolerations says a chart that is not bootstrap gets
//     (none: F3's rule, checked against the real helm-controller); doctor finds nothing.
//   - f3: with a taint on the only node that the install Job does not tolerate
//     (dedicated=edge:NoSchedule, set with kubectl), a second HelmChart's Job stays Pending
//     where F3 says, with the real scheduler's "untolerated taint(s)" message; doctor reports
//     F3-pending-on-taint naming the Job, the taint and the node; preflight, with the taint
//     declared in the inventory, refuses it (FirstNodeTaints); without the taint the Job
//     completes and doctor is clean again.
func realHelmChart(t *testing.T, c *testCluster, extra map[string]any) {
	t.Run("helmchart", func(t *testing.T) {
		hi := needImages(t, c, "real klipper-helm image", helmImagesOnce)
		t.Logf("mkimages real-helm took %.1f s:\n%s", hi.seconds, strings.TrimSpace(hi.log))
		archive, err := os.ReadFile(hi.archive)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = c.h.WriteFile(ctx, c.hosts[0].Index, "/var/lib/rancher/k3s/agent/images/"+helmImagesArchive, archive, 0o644)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n, d := c.waitImportedFile(0, "k3s", helmImagesArchive, 2*time.Minute); n != 1 {
			t.Fatalf("K3s imported %d images from %s, want 1 (klipper-helm)", n, helmImagesArchive)
		} else {
			t.Logf("K3s imported the klipper-helm archive (%d bytes) in %s", len(archive), d)
		}
		var img struct {
			Info struct {
				ImageSpec struct {
					Config struct {
						Labels map[string]string `json:"Labels"`
						User   string            `json:"User"`
					} `json:"config"`
				} `json:"imageSpec"`
			} `json:"info"`
		}
		if err := json.Unmarshal([]byte(c.exec(0, "k3s", "crictl", "inspecti", "-o", "json", klipperHelmImage)), &img); err != nil {
			t.Fatal(err)
		}
		if l := img.Info.ImageSpec.Config.Labels; l["io.k3strap.test-image.built-by"] != "k3strap e2e/cmd/mkimages" || !strings.Contains(l["io.k3strap.test-image.source-digest"], "helm.sh/helm/v4@v4.1.4") ||
			!strings.Contains(l["io.k3strap.test-image.source-digest"], "09c52422fd0654369e3c24a2a971289d1bffd5cd") {
			t.Errorf("%s: labels %v, want mkimages's, helm v4.1.4 and klipper-helm 09c5242", klipperHelmImage, l)
		}

		start := time.Now()
		chart := probeChart(t)
		c.kubectl(probeHelmChart(chart, "probe", "hello"), "apply", "-f", "-")
		job := c.waitJobComplete(t, "helm-install-probe", 4*time.Minute)
		t.Logf("HelmChart probe installed in %s", time.Since(start).Round(time.Second))
		pods := c.jobPods("helm-install-probe")
		if len(pods) == 0 {
			t.Fatal("no pod of Job helm-install-probe")
		}
		var ok bool
		for _, p := range pods {
			st := p.Status.ContainerStatuses
			if len(st) == 1 && st[0].Image == klipperHelmImage && st[0].State.Terminated != nil && st[0].State.Terminated.ExitCode == 0 {
				ok = true
				t.Logf("pod %s: %s, termination message %q", p.Name, st[0].Image, st[0].State.Terminated.Message)
				if !strings.Contains(st[0].State.Terminated.Message, "Installing helm chart") {
					t.Errorf("pod %s: termination message %q, want the entry script's \"Installing helm chart\"", p.Name, st[0].State.Terminated.Message)
				}
			}
		}
		if !ok {
			t.Errorf("no pod of Job helm-install-probe ran %s to exit 0: %+v", klipperHelmImage, pods[0].Status.ContainerStatuses)
		}
		if logs := c.kubectl("", "logs", "-n", "kube-system", "job/helm-install-probe"); !strings.Contains(logs, "STATUS: deployed") {
			t.Errorf("the install Job's log does not show helm's \"STATUS: deployed\":\n%s", lastLines(logs, 30))
		} else {
			t.Logf("install log:\n%s", lastLines(logs, 12))
		}
		if got := strings.TrimSpace(c.kubectl("", "get", "configmap", "-n", "k3strap-probe", "probe-greeting", "-o", "jsonpath={.data.greeting}")); got != "hello" {
			t.Errorf("ConfigMap k3strap-probe/probe-greeting greeting %q, want hello (the HelmChart's valuesContent)", got)
		}
		if got := strings.TrimSpace(c.kubectl("", "get", "secret", "-n", "k3strap-probe", "sh.helm.release.v1.probe.v1", "-o", "jsonpath={.metadata.labels.status}")); got != "deployed" {
			t.Errorf("helm release Secret sh.helm.release.v1.probe.v1: status label %q, want deployed", got)
		}
		// The tolerations F3's rule says a HelmChart's install Job has, against the real
		// helm-controller's Job.
		var want []string
		for _, tol := range k3s.HelmJobTolerations(false) {
			op := tol.Operator
			if op == "" {
				op = "Equal"
			}
			want = append(want, tol.Key+":"+op+":"+tol.Value+":"+tol.Effect)
		}
		slices.Sort(want)
		got := userTolerations(job.Spec.Template.Spec.Tolerations)
		t.Logf("the install Job's tolerations: %v", got)
		if !slices.Equal(got, want) {
			t.Errorf("the real helm-controller's install Job tolerates %v; k3s.HelmJobTolerations(false) says %v", got, want)
		}
		d := c.k3strap(2*time.Minute, "doctor")
		if d.code != 0 {
			d.dump(t)
			t.Errorf("doctor exited %d after a HelmChart installed", d.code)
		}
	})

	t.Run("f3", func(t *testing.T) {
		if _, err := helmImagesOnce(); err != nil {
			t.Skipf("no klipper-helm image: %v", err)
		}
		c.kubectl("", "taint", "node", "cp1", "dedicated=edge:NoSchedule")
		c.kubectl(probeHelmChart(probeChart(t), "probe2", "again"), "apply", "-f", "-")
		deadline := time.Now().Add(3 * time.Minute)
		var msg string
		for msg == "" {
			for _, p := range c.jobPods("helm-install-probe2") {
				for _, cond := range p.Status.Conditions {
					if p.Status.Phase == corev1.PodPending && cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
						msg = cond.Message
					}
				}
			}
			if msg == "" && time.Now().After(deadline) {
				t.Fatalf("no Pending pod of Job helm-install-probe2 within 3 min:\n%s", c.kubectl("", "get", "pods", "-n", "kube-system", "-o", "wide"))
			}
			time.Sleep(2 * time.Second)
		}
		t.Logf("the scheduler: %s", msg)
		// Kubernetes v1.36's scheduler counts the nodes with an untolerated taint without naming
		// the taint; doctor names it (below).
		if !strings.Contains(msg, "untolerated taint") {
			t.Errorf("unschedulable message %q, want the scheduler's untolerated taint", msg)
		}
		d := c.k3strap(2*time.Minute, "doctor")
		var f3 *events.DoctorFinding
		for _, e := range d.ofType(events.DoctorFindingType) {
			t.Logf("doctor: [%s %s] %s: %s %s", e.Doctor.Severity, e.Doctor.ID, e.Doctor.Node, e.Doctor.Title, e.Doctor.Message)
			if e.Doctor.ID == checkid.F3PendingOnTaint {
				f3 = e.Doctor
			}
		}
		if d.code == 0 || f3 == nil {
			d.dump(t)
			t.Fatalf("doctor exited %d with finding %+v, want a failure with %s", d.code, f3, checkid.F3PendingOnTaint)
		}
		all := f3.Title + " " + f3.Message
		for _, e := range f3.Evidence {
			all += " " + e.Text
		}
		for _, want := range []string{"helm-install-probe2", "dedicated=edge:NoSchedule", "cp1"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s does not name %s: %q", checkid.F3PendingOnTaint, want, all)
			}
		}
		// Preflight, with the taint declared where the inventory declares taints, refuses it
		// before a run would add it.
		c.writeInventory(realSingleServer+"      taints: [\"dedicated=edge:NoSchedule\"]\n", extra)
		p := c.k3strap(3*time.Minute, "preflight")
		if out := p.stdout + p.stderr; p.code == 0 || !strings.Contains(out, "FirstNodeTaints") || !strings.Contains(out, "dedicated=edge:NoSchedule") {
			p.dump(t)
			t.Errorf("preflight with the taint declared: exit %d, want a FirstNodeTaints refusal naming dedicated=edge:NoSchedule", p.code)
		}
		c.writeInventory(realSingleServer, extra)

		c.kubectl("", "taint", "node", "cp1", "dedicated-")
		c.waitJobComplete(t, "helm-install-probe2", 3*time.Minute)
		if got := strings.TrimSpace(c.kubectl("", "get", "configmap", "-n", "k3strap-probe2", "probe2-greeting", "-o", "jsonpath={.data.greeting}")); got != "again" {
			t.Errorf("ConfigMap k3strap-probe2/probe2-greeting greeting %q, want again", got)
		}
		if d := c.k3strap(2*time.Minute, "doctor"); d.code != 0 {
			d.dump(t)
			t.Errorf("doctor exited %d once the taint was gone", d.code)
		}
	})
}
