// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// The real system-upgrade-controller on the real K3s: e2e/cmd/mkimages real-suc builds SUC
// from a git directory of its source (the module proxy refuses the module) and a
// rancher/k3s-upgrade image holding the K3s binary and k3s-upgrade's own script; this test's cluster imports that archive
// beside the stand-ins and `k3strap upgrade --via suc` deploys the real controller
// (docs/testing-stand-ins.md).

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/templates/suc"
)

// sucImagesArchive is the file name of the SUC images archive on the hosts.
const sucImagesArchive = "k3strap-suc-images-amd64.tar.zst"

// builtArchive is an images archive mkimages built for this test binary (real-suc, real-helm):
// its path, references, how long the build took and its output.
type builtArchive struct {
	archive string
	refs    []string
	seconds float64
	log     string
}

// sucImagesOnce builds the SUC images archive once per test binary, caching the programs in
// the directory given by the first caller (the harness directory's real-images/, shared with
// `mkimages real`); errRealImagesMissing when a build input is missing here (mkimages exit 3).
var sucImagesOnce = sync.OnceValues(func() (builtArchive, error) {
	var si builtArchive
	var err error
	if si.archive, si.seconds, si.log, err = runMkimages("real-suc", sucImagesArchive); err != nil {
		return si, err
	}
	for _, l := range strings.Split(si.log, "\n") {
		// "mkimages: REF: RECIPE, N bytes, ..." (writeArchive's line per image)
		if ref, ok := strings.CutPrefix(l, "mkimages: "); ok {
			if i := strings.Index(ref, ": "); i > 0 {
				si.refs = append(si.refs, ref[:i])
			}
		}
	}
	return si, nil
})

// needSUCImages returns the SUC images archive; it skips the test, saying why, when a build
// input is missing here (the K3s binary, the controller's source) and fails it when a build
// failed.
func needSUCImages(t *testing.T, c *testCluster) builtArchive {
	t.Helper()
	return needImages(t, c, "real system-upgrade-controller images", sucImagesOnce)
}

// realServerAgentSUC is the real lane's 1 server + 2 agents, none with a declared taint;
// Extra.sucManifest names spec.k3s.upgrade.suc.manifest.
const realServerAgentSUC = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: real
spec:
  k3s:
{{template "k3s-real" .}}
    config:
{{template "k3s-real-config" .}}
{{- with .Extra.sucManifest}}
    upgrade:
      suc:
        manifest: {{.}}
{{- end}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
      role: agent
    - name: a2
      address: {{(index .Hosts 2).Address}}
      role: agent
`

// sucStall returns the stall diagnosis (exit 4's error event) a watch run ended with.
func sucStall(t *testing.T, r run) (host string, info *events.ErrorInfo) {
	t.Helper()
	for _, e := range r.ofType(events.Error) {
		if e.Phase == events.PhaseSUCWatch && e.Error != nil && e.Error.Diagnosis != "" {
			t.Logf("stall on %s: %s: %s; evidence %q", e.Host, e.Error.Diagnosis, e.Error.Message, e.Error.Evidence)
			return e.Host, e.Error
		}
	}
	return "", nil
}

// TestRealUpgradeSUC (real K3s, 1 server + 2 agents): `k3strap upgrade --via suc` deploys the
// real system-upgrade-controller (built from its source by mkimages real-suc, with the kubectl
// and k3s-upgrade images its Jobs run) and the watch follows and diagnoses what the real
// controller's Jobs do. Only v1.36.3 exists here, so the Plans move the nodes to the release
// they run (k3s-upgrade's script then leaves the binary alone); the agent a1 carries a taint
// the inventory does not declare (dedicated=edge:NoSchedule, set with kubectl), so the
// rendered Plans do not tolerate it.
//   - images: both nodes import the SUC archive; the controller pod runs the built image
//     (mkimages's labels, commit v0.20.1-22-gd357e23) whose --version says so.
//   - jobs: the real controller creates one Job per node for the Plans k3strap applied (label
//     upgrade.cattle.io/plan, the node in upgrade.cattle.io/node), and a1's Job does not
//     tolerate dedicated=edge.
//   - image-pull: with SUC's own manifest (SYSTEM_UPGRADE_JOB_IMAGE_PULL_POLICY Always) the
//     watch stalls on cp1 with suc-image-pull naming rancher/kubectl:v1.30.3 although that
//     image is in cp1's containerd: Always asks the registry (docs/upgrade.md, Airgap).
//   - taint: after the fix docs/upgrade.md gives (a manifest pulling IfNotPresent, the
//     controller stopped, the stuck Jobs deleted, the controller started), cp1's Job
//     completes — cordoned by the real kubectl, the upgrade script finding the release in
//     place, K3s not restarted, uncordoned and labelled by the controller — and the watch
//     stalls on a1 with suc-job-untolerated-taint naming the taint, from the real
//     scheduler's message.
//   - pdb: a pod on a1 (tolerating the taint) with a PodDisruptionBudget allowing no
//     disruption; the taint removed, a1's Job drains with the real kubectl, whose evictions the
//     budget refuses: the watch stalls with suc-drain-blocked-pdb naming the budget.
//   - complete: with the budget gone, `upgrade --watch` ends with exit 0: a1 prepared (the
//     server Plan done, the control-plane nodes on the Plan's version), drained by the real
//     kubectl, its Job complete, uncordoned and labelled; then a2 the same way.
//
// The upgrade script is k3s-upgrade's own (commit e45db20).
func TestRealUpgradeSUC(t *testing.T) {
	start := time.Now()
	c := newRealCluster(t, 3)
	si := needSUCImages(t, c)
	t.Logf("mkimages real-suc took %.1f s:\n%s", si.seconds, strings.TrimSpace(si.log))
	if len(si.refs) != 3 {
		t.Fatalf("mkimages real-suc wrote %d images (%v), want the controller, kubectl and k3s-upgrade", len(si.refs), si.refs)
	}
	c.writeInventory(realServerAgentSUC, nil)
	r := c.k3strap(5*time.Minute, "apply")
	if r.code != 0 {
		r.dump(t)
		t.Fatalf("apply exited %d", r.code)
	}
	archive, err := os.ReadFile(si.archive)
	if err != nil {
		t.Fatal(err)
	}
	for i, unit := range []string{"k3s", "k3s-agent", "k3s-agent"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := c.h.WriteFile(ctx, c.hosts[i].Index, "/var/lib/rancher/k3s/agent/images/"+sucImagesArchive, archive, 0o644)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		n, d := c.waitImportedFile(i, unit, sucImagesArchive, 2*time.Minute)
		t.Logf("%s imported %d SUC images in %s", c.hosts[i].Name, n, d)
		if n != len(si.refs) {
			t.Errorf("%s imported %d images, the archive holds %d", c.hosts[i].Name, n, len(si.refs))
		}
	}
	c.exec(0, "k3s", "kubectl", "taint", "node", "a1", "dedicated=edge:NoSchedule")
	k3sUnit := c.unitState(0, "k3s")
	t.Logf("cluster up and SUC images imported after %s", time.Since(start).Round(time.Second))

	// 1. Deploy SUC and the Plans. Both nodes run the Plans' release already, but SUC still
	// makes a Job for each (neither carries the Plan's hash): the watch, started before the
	// controller made them, waits for them instead of calling the nodes unchanged, and
	// stalls on cp1's (exit 4, below).
	// --upgrade-batch 100: both agents at once, so that which agent SUC takes first (an order
	// of hashes of node UIDs) does not matter.
	r1 := c.k3strap(3*time.Minute, "upgrade", "--via", "suc", "--upgrade-batch", "100", "--stall-grace", "10s")
	defer r1.dump(t)
	if h, d := sucStall(t, r1); !(r1.code == 4 && h == "cp1" && d != nil && d.Diagnosis == "suc-image-pull") {
		t.Fatalf("upgrade --via suc: exit %d, stall on %q %+v; want 4 (cp1 suc-image-pull)", r1.code, h, d)
	}
	for _, e := range r1.ofType(events.HostStep) {
		if e.Phase == events.PhaseSUCWatch && e.Status == events.StatusUnchanged {
			t.Errorf("upgrade --via suc: %s reported unchanged (%s) while SUC still had a Job to run on it", e.Host, e.Message)
		}
	}

	t.Run("images", func(t *testing.T) {
		pods := c.waitPods("system-upgrade", "app.kubernetes.io/name=system-upgrade-controller", 1, 2*time.Minute)
		ref := "docker.io/rancher/system-upgrade-controller:v0.20.1"
		if got := pods[0].Status.ContainerStatuses[0].Image; got != ref {
			t.Errorf("controller runs %s, want %s", got, ref)
		}
		var img struct {
			Info struct {
				ImageSpec struct {
					Config struct {
						Labels map[string]string `json:"Labels"`
					} `json:"config"`
				} `json:"imageSpec"`
			} `json:"info"`
		}
		if err := json.Unmarshal([]byte(c.exec(0, "k3s", "crictl", "inspecti", "-o", "json", ref)), &img); err != nil {
			t.Fatalf("crictl inspecti %s: %v", ref, err)
		}
		l := img.Info.ImageSpec.Config.Labels
		if l["io.k3strap.test-image.built-by"] != "k3strap e2e/cmd/mkimages" || l["org.opencontainers.image.version"] != "v0.20.1-22-gd357e23" ||
			!strings.Contains(l["io.k3strap.test-image.source-digest"], "d357e2302999662071e0467b96e94f31b5c470ba") {
			t.Errorf("%s: labels %v, want mkimages's, version v0.20.1-22-gd357e23 and the commit", ref, l)
		}
		v := c.exec(0, "k3s", "kubectl", "exec", "-n", "system-upgrade", pods[0].Name, "--", "/bin/system-upgrade-controller", "--version")
		if !strings.Contains(v, "v0.20.1-22-gd357e23 (d357e23)") {
			t.Errorf("the controller's --version says %q, want v0.20.1-22-gd357e23 (d357e23)", v)
		}
	})

	t.Run("jobs", func(t *testing.T) {
		jobs := c.sucJobs(t, time.Minute, func(j map[string]batchv1.Job) bool {
			return j["cp1"].Name != "" && j["a1"].Name != "" && j["a2"].Name != ""
		})
		a1, srv := jobs["a1"], jobs["cp1"]
		if a1.Labels["upgrade.cattle.io/plan"] != "k3s-agent" || srv.Labels["upgrade.cattle.io/plan"] != "k3s-server" {
			t.Errorf("jobs' plans: a1 %q, cp1 %q; want k3s-agent and k3s-server", a1.Labels["upgrade.cattle.io/plan"], srv.Labels["upgrade.cattle.io/plan"])
		}
		for _, tol := range a1.Spec.Template.Spec.Tolerations {
			if tol.Key == "dedicated" || (tol.Key == "" && tol.Operator == "Exists") {
				t.Errorf("a1's job tolerates %+v: the undeclared taint dedicated=edge must not be tolerated", tol)
			}
		}
	})

	kubectlRef := "docker.io/rancher/kubectl:v1.30.3"
	t.Run("image-pull", func(t *testing.T) {
		if out, err := c.execErr(0, 30*time.Second, "k3s", "crictl", "inspecti", "-q", kubectlRef); err != nil || out == "" {
			t.Fatalf("cp1 has no %s: %v %s", kubectlRef, err, out)
		}
		r2 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "10s")
		defer r2.dump(t)
		h, d := sucStall(t, r2)
		if r2.code != 4 || h != "cp1" || d == nil || d.Diagnosis != "suc-image-pull" {
			t.Fatalf("upgrade --watch: exit %d, stall on %q %+v; want exit 4, cp1, suc-image-pull", r2.code, h, d)
		}
		if !strings.Contains(d.Message, "rancher/kubectl:v1.30.3") {
			t.Errorf("the diagnosis does not name SUC's kubectl image: %s", d.Message)
		}
	})

	// 2. The fix docs/upgrade.md (Airgap) gives: a manifest whose Jobs pull IfNotPresent; the
	// controller stopped, the Jobs made with Always deleted, the controller started again (it
	// reads its config map when it starts and makes the Jobs again).
	manifest := string(suc.ControllerManifests(suc.Options{}))
	always := `SYSTEM_UPGRADE_JOB_IMAGE_PULL_POLICY: "Always"`
	if !strings.Contains(manifest, always) {
		t.Fatalf("SUC's manifest no longer says %s", always)
	}
	mf := filepath.Join(c.dir, "suc-ifnotpresent.yaml")
	if err := os.WriteFile(mf, []byte(strings.Replace(manifest, always, `SYSTEM_UPGRADE_JOB_IMAGE_PULL_POLICY: "IfNotPresent"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.writeInventory(realServerAgentSUC, map[string]any{"sucManifest": mf})
	r3 := c.k3strap(3*time.Minute, "upgrade", "--via", "suc", "--upgrade-batch", "100", "--stall-grace", "10s")
	defer r3.dump(t)
	if h, d := sucStall(t, r3); r3.code != 4 || h != "cp1" || d == nil || d.Diagnosis != "suc-image-pull" {
		t.Fatalf("upgrade --via suc with the IfNotPresent manifest, before the restart: exit %d, stall on %q %+v; want the old Job's suc-image-pull on cp1", r3.code, h, d)
	}
	if pp := c.exec(0, "k3s", "kubectl", "get", "configmap", "-n", "system-upgrade", "default-controller-env", "-o", "jsonpath={.data.SYSTEM_UPGRADE_JOB_IMAGE_PULL_POLICY}"); pp != "IfNotPresent" {
		t.Fatalf("k3strap applied the manifest, yet the pull policy is %q", pp)
	}
	for _, args := range [][]string{
		{"scale", "deployment/system-upgrade-controller", "--replicas=0"},
		{"wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=system-upgrade-controller", "--timeout=50s"},
		{"delete", "jobs", "--all", "--wait=true", "--timeout=50s"},
		{"scale", "deployment/system-upgrade-controller", "--replicas=1"},
		{"rollout", "status", "deployment/system-upgrade-controller", "--timeout=50s"},
	} {
		c.exec(0, append([]string{"k3s", "kubectl", "-n", "system-upgrade"}, args...)...)
	}

	// taint: the controller makes the Jobs again (a watch started before would find no Job
	// and the nodes on the release: done); cp1's completes, a1's stays Pending on the taint.
	c.sucJobs(t, time.Minute, func(j map[string]batchv1.Job) bool {
		return j["cp1"].Name != "" && j["a1"].Name != "" && j["a2"].Name != ""
	})
	r4 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "20s")
	defer r4.dump(t)
	if h, d := sucStall(t, r4); r4.code != 4 || h != "a1" || d == nil || d.Diagnosis != "suc-job-untolerated-taint" {
		t.Fatalf("upgrade --watch: exit %d, stall on %q %+v; want exit 4, a1, suc-job-untolerated-taint\n%s", r4.code, h, d, c.sucState())
	} else {
		if !strings.Contains(d.Message, "dedicated=edge:NoSchedule") {
			t.Errorf("the diagnosis does not name the taint: %s", d.Message)
		}
		ev := strings.Join(d.Evidence, "\n")
		if !strings.Contains(ev, "untolerated taint") || !strings.Contains(ev, "dedicated=edge:NoSchedule") {
			t.Errorf("evidence lacks the scheduler's message or the taint: %q", d.Evidence)
		}
	}
	// cp1's Job, made with IfNotPresent, completes: cordon by the real kubectl, the script
	// finding the release in place; the controller uncordons and labels cp1.
	jobs := c.sucJobs(t, 2*time.Minute, func(j map[string]batchv1.Job) bool { return jobComplete(j["cp1"]) })
	logs := c.exec(0, "k3s", "kubectl", "logs", "-n", "system-upgrade", "job/"+jobs["cp1"].Name, "--all-containers")
	t.Logf("cp1's job %s:\n%s", jobs["cp1"].Name, logs)
	// k3s-upgrade's script (upstream's) found the binary it holds in place.
	if !strings.Contains(logs, "node/cp1 cordoned") || !strings.Contains(logs, "K3S binary is running with pid") || !strings.Contains(logs, "Binary already been replaced") {
		t.Errorf("cp1's job log lacks the cordon or the script's verdict:\n%s", logs)
	}
	c.waitSUCDone(t, "cp1", "k3s-server")
	if now := c.unitState(0, "k3s"); now != k3sUnit {
		t.Errorf("K3s on cp1 restarted although its binary is the release: %s, was %s", now, k3sUnit)
	}

	// pdb: a pod on a1 whose PodDisruptionBudget allows no disruption (it tolerates the
	// taint, so it runs on a1 before the taint goes); with the taint gone, a1's Job runs its
	// prepare and the real kubectl's drain, which the budget blocks: the watch stalls with
	// suc-drain-blocked-pdb naming the budget; the budget deleted, the drain goes on.
	t.Run("pdb", func(t *testing.T) {
		upgradeRef := ""
		for _, ref := range si.refs {
			if strings.Contains(ref, "/"+suc.UpgradeImage+":") {
				upgradeRef = ref
			}
		}
		// The pod tolerates a1's taint, so it runs there before the taint goes; it runs BusyBox
		// of the k3s-upgrade image, the only image with a shell the SUC cluster holds.
		c.kubectl(pdbWorkload("a1", `{name: web, image: "`+upgradeRef+`", imagePullPolicy: Never, command: [sleep, "3600"]}`, `      tolerations: [{key: dedicated, operator: Equal, value: edge, effect: NoSchedule}]
      terminationGracePeriodSeconds: 1
`), "apply", "-f", "-")
		c.waitPods("default", "app=web", 1, 2*time.Minute)
		c.exec(0, "k3s", "kubectl", "taint", "node", "a1", "dedicated=edge:NoSchedule-")
		r := c.k3strap(4*time.Minute, "upgrade", "--watch", "--stall-grace", "20s")
		defer r.dump(t)
		h, d := sucStall(t, r)
		if r.code != 4 || h != "a1" || d == nil || d.Diagnosis != "suc-drain-blocked-pdb" {
			t.Fatalf("upgrade --watch with a PodDisruptionBudget on a1: exit %d, stall on %q %+v; want exit 4, a1, suc-drain-blocked-pdb\n%s", r.code, h, d, c.sucState())
		}
		if !strings.Contains(d.Message, "default/web") || !strings.Contains(strings.Join(d.Evidence, "\n"), "PodDisruptionBudget default/web") {
			t.Errorf("the diagnosis does not name PodDisruptionBudget default/web: %s %q", d.Message, d.Evidence)
		}
		// The drain container's own log (its pod's main container waits to start, which
		// --all-containers reports as an error instead of the log), asked until the refusal
		// shows: the real kubectl asks again every 5 s.
		var logs string
		var lerr error
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
			logs, lerr = c.execErr(0, 30*time.Second, "k3s", "kubectl", "logs", "-n", "system-upgrade", "-l", "upgrade.cattle.io/node=a1", "-c", "drain", "--tail", "5")
			if strings.Contains(logs, "disruption budget") {
				break
			}
		}
		t.Logf("a1's drain container while the budget blocks it:\n%s", logs)
		if !strings.Contains(logs, "disruption budget") {
			t.Errorf("a1's drain container does not show the real kubectl's eviction refused by the budget within 30 s (kubectl logs: %v):\n%s", lerr, logs)
		}
		c.kubectl("", "delete", "pdb", "web", "-n", "default")
	})
	// Whatever the subtest reached: the taint and the budget gone.
	c.execErr(0, 30*time.Second, "k3s", "kubectl", "taint", "node", "a1", "dedicated=edge:NoSchedule-")
	c.execErr(0, 30*time.Second, "k3s", "kubectl", "delete", "pdb", "web", "-n", "default", "--ignore-not-found")

	// complete: a1's Job runs on: prepare (the server Plan done), drain by the real kubectl,
	// the script; the watch ends with every node done.
	r5 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "60s", "--timeout", "150s")
	defer r5.dump(t)
	if r5.code != 0 {
		h, d := sucStall(t, r5)
		t.Fatalf("upgrade --watch after the taint went: exit %d (stall on %q %+v), want 0\n%s", r5.code, h, d, c.sucState())
	}
	reached := false
	for _, e := range r5.events {
		if e.Host == "a1" && e.Phase == events.PhaseSUCWatch && e.Step == events.SUCStepUncordon {
			reached = true
		}
	}
	if !reached {
		t.Error("the watch reported no uncordon step for a1")
	}
	jobs = c.sucJobs(t, time.Minute, func(j map[string]batchv1.Job) bool { return jobComplete(j["a1"]) })
	logs = c.exec(0, "k3s", "kubectl", "logs", "-n", "system-upgrade", "job/"+jobs["a1"].Name, "--all-containers")
	t.Logf("a1's job %s:\n%s", jobs["a1"].Name, logs)
	// prepare: the server Plan applying to no node and every control-plane node on the
	// Plan's version (upstream's script, asking the API with the image's K3s kubectl).
	if !strings.Contains(logs, "All control-plane nodes have been upgraded to version to v1.36.3-k3s1") || !strings.Contains(logs, "node/a1 drained") || !strings.Contains(logs, "Binary already been replaced") {
		t.Errorf("a1's job log lacks the prepare, the drain or the script's verdict:\n%s", logs)
	}
	c.waitSUCDone(t, "a1", "k3s-agent")
	// a2, the other agent, in the same batch as a1 (it was not tainted): its Job prepared,
	// drained and ran the script too.
	jobs = c.sucJobs(t, time.Minute, func(j map[string]batchv1.Job) bool { return jobComplete(j["a2"]) })
	logs = c.exec(0, "k3s", "kubectl", "logs", "-n", "system-upgrade", "job/"+jobs["a2"].Name, "--all-containers")
	if !strings.Contains(logs, "node/a2 drained") || !strings.Contains(logs, "Binary already been replaced") {
		t.Errorf("a2's job log lacks the drain or the script's verdict:\n%s", logs)
	}
	c.waitSUCDone(t, "a2", "k3s-agent")
	t.Logf("TestRealUpgradeSUC: %s", time.Since(start).Round(time.Second))
}

// sucState is what SUC's namespace holds (Plans, Jobs, pods) and the logs of its Job pods,
// for a failure message.
func (c *testCluster) sucState() string {
	st, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "plans,jobs,pods", "-n", "system-upgrade", "-o", "wide")
	logs, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "logs", "-n", "system-upgrade", "-l", "upgrade.cattle.io/plan", "--all-containers", "--prefix", "--tail", "20")
	plans, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "plans", "-n", "system-upgrade", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status}{\"\\n\"}{end}")
	return st + "\n" + plans + "\nlogs:\n" + logs
}

// sucJobs polls SUC's Jobs, by node, until ok holds of them; it fails the test after timeout.
func (c *testCluster) sucJobs(t *testing.T, timeout time.Duration, ok func(map[string]batchv1.Job) bool) map[string]batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var l batchv1.JobList
		c.kubectlJSON(0, &l, "get", "jobs", "-n", "system-upgrade")
		byNode := map[string]batchv1.Job{}
		for _, j := range l.Items {
			byNode[j.Labels["upgrade.cattle.io/node"]] = j
		}
		if ok(byNode) {
			return byNode
		}
		if time.Now().After(deadline) {
			t.Fatalf("SUC's jobs not as wanted within %s: %d jobs\n%s", timeout, len(byNode), c.sucState())
		}
		time.Sleep(2 * time.Second)
	}
}

func jobComplete(j batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == "True" {
			return true
		}
	}
	return false
}

// waitSUCDone waits (one minute) until node carries the label of plan
// (plan.upgrade.cattle.io/<plan>) and is schedulable: SUC's mark of a node done.
func (c *testCluster) waitSUCDone(t *testing.T, node, plan string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := c.node(node)
		if _, ok := n.Labels["plan.upgrade.cattle.io/"+plan]; ok && !n.Spec.Unschedulable {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no label plan.upgrade.cattle.io/%s or still cordoned after a minute: labels %v, unschedulable %v", node, plan, n.Labels, n.Spec.Unschedulable)
		}
		time.Sleep(2 * time.Second)
	}
}
