// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// The real system-upgrade-controller on the real K3s: e2e/cmd/mkimages real-suc builds SUC
// from a git directory of its source (the module proxy refuses the module) and a
// rancher/k3s-upgrade image holding the K3s binary; this test's cluster imports that archive
// beside the stand-ins and `k3strap upgrade --via suc` deploys the real controller
// (docs/testing-stand-ins.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/k3strap/k3strap/events"
)

// sucImagesArchive is the file name of the SUC images archive on the hosts.
const sucImagesArchive = "k3strap-suc-images-amd64.tar.zst"

// sucImagesBuilt is the SUC images archive of this test binary: its path, references, how
// long `mkimages real-suc` took and its output.
type sucImagesBuilt struct {
	archive string
	refs    []string
	seconds float64
	log     string
}

// sucImagesOnce builds the SUC images archive once per test binary, caching the programs in
// the directory given by the first caller (the harness directory's real-images/, shared with
// `mkimages real`); errRealImagesMissing when a build input is missing here (mkimages exit 3).
var sucImagesOnce = sync.OnceValues(func() (sucImagesBuilt, error) {
	realImagesCacheDir.Lock()
	cache := realImagesCacheDir.dir
	realImagesCacheDir.Unlock()
	dir, err := os.MkdirTemp("", "k3strap-e2e-suc-images-")
	if err != nil {
		return sucImagesBuilt{}, err
	}
	si := sucImagesBuilt{archive: filepath.Join(dir, sucImagesArchive)}
	start := time.Now()
	cmd := exec.Command("go", "run", "./e2e/cmd/mkimages", "real-suc", "-cache", cache, "-timeout", "25m", si.archive)
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	si.seconds, si.log = time.Since(start).Seconds(), string(out)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return si, fmt.Errorf("%w: %s", errRealImagesMissing, strings.TrimSpace(lastLines(string(out), 3)))
	}
	if err != nil {
		return si, fmt.Errorf("mkimages real-suc: %v\n%s", err, out)
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
// input is missing here (SYSTEM_UPGRADE_CONTROLLER_SRC) and fails it when a build failed.
func needSUCImages(t *testing.T, c *testCluster) sucImagesBuilt {
	t.Helper()
	realImagesCacheDir.Lock()
	if realImagesCacheDir.dir == "" {
		realImagesCacheDir.dir = filepath.Join(c.h.Dir(), "real-images")
	}
	realImagesCacheDir.Unlock()
	si, err := sucImagesOnce()
	if errors.Is(err, errRealImagesMissing) {
		t.Skipf("the real system-upgrade-controller cannot be built here: %v", err)
	}
	if err != nil {
		t.Fatalf("building the SUC images: %v", err)
	}
	return si
}

// realServerAgent is the real lane's 1 server + 1 agent, neither with a declared taint.
const realServerAgent = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: real
spec:
{{template "spec-k3s-real" .}}
{{template "ssh-root" .}}
  hosts:
    - name: cp1
      address: {{(index .Hosts 0).Address}}
      role: server
    - name: a1
      address: {{(index .Hosts 1).Address}}
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

// TestRealUpgradeSUC (real K3s, 1 server + 1 agent): `k3strap upgrade --via suc` deploys the
// real system-upgrade-controller (built from its source by mkimages real-suc) and the watch
// diagnoses what the real controller's Jobs meet. Only v1.36.3 exists here, so the Plans move
// the nodes to the release they run; the agent a1 carries a taint the inventory does not
// declare (dedicated=edge:NoSchedule, set with kubectl), so the rendered Plans do not
// tolerate it.
//   - images: both nodes import the SUC archive; the controller pod runs the built image
//     (mkimages's labels, commit v0.20.1-22-gd357e23) whose --version says so; a1 holds
//     rancher/k3s-upgrade tagged with the release.
//   - jobs: the real controller creates one Job per node for the Plans k3strap applied (label
//     upgrade.cattle.io/plan, the node in upgrade.cattle.io/node), and a1's Job does not
//     tolerate dedicated=edge.
//   - image pull: `upgrade --watch` stalls on cp1 with suc-image-pull naming SUC's kubectl
//     image (rancher/kubectl:v1.30.3, which no archive here holds, pulled Always as SUC's
//     manifest says) — what an airgapped cluster without a registry meets.
//   - taint: with cp1 opted out (k3s-upgrade=disabled), `upgrade --watch` stalls on a1 with
//     suc-job-untolerated-taint naming the taint, from the real scheduler's message.
func TestRealUpgradeSUC(t *testing.T) {
	start := time.Now()
	c := newRealCluster(t, 2)
	si := needSUCImages(t, c)
	t.Logf("mkimages real-suc took %.1f s:\n%s", si.seconds, strings.TrimSpace(si.log))
	if len(si.refs) != 2 {
		t.Fatalf("mkimages real-suc wrote %d images (%v), want the controller and k3s-upgrade", len(si.refs), si.refs)
	}
	c.writeInventory(realServerAgent, nil)
	r := c.k3strap(5*time.Minute, "apply")
	if r.code != 0 {
		r.dump(t)
		t.Fatalf("apply exited %d", r.code)
	}
	archive, err := os.ReadFile(si.archive)
	if err != nil {
		t.Fatal(err)
	}
	for i, unit := range []string{"k3s", "k3s-agent"} {
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
	t.Logf("cluster up and SUC images imported after %s", time.Since(start).Round(time.Second))

	// 1. Deploy SUC and the Plans. Both nodes run the Plans' release already: a watch that
	// polls before the controller made its Jobs reports them unchanged (exit 0); one that
	// sees the Jobs stalls on cp1 (exit 4, below).
	r1 := c.k3strap(3*time.Minute, "upgrade", "--via", "suc", "--stall-grace", "10s")
	defer r1.dump(t)
	if h, d := sucStall(t, r1); !(r1.code == 0 && d == nil) && !(r1.code == 4 && h == "cp1" && d != nil && d.Diagnosis == "suc-image-pull") {
		t.Fatalf("upgrade --via suc: exit %d, stall on %q %+v; want 0 (nodes already on the release) or 4 (cp1 suc-image-pull)", r1.code, h, d)
	}

	t.Run("images", func(t *testing.T) {
		pods := c.waitPods("system-upgrade", "upgrade.cattle.io/controller=system-upgrade-controller", 1, 2*time.Minute)
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
		up := "docker.io/rancher/k3s-upgrade:" + strings.ReplaceAll(c.real.Version, "+", "-")
		if out, err := c.execErr(1, 30*time.Second, "k3s", "crictl", "inspecti", "-q", up); err != nil || out == "" {
			t.Errorf("a1 has no %s: %v %s", up, err, out)
		}
		v := c.exec(0, "k3s", "kubectl", "exec", "-n", "system-upgrade", pods[0].Name, "--", "/bin/system-upgrade-controller", "--version")
		if !strings.Contains(v, "v0.20.1-22-gd357e23 (d357e23)") {
			t.Errorf("the controller's --version says %q, want v0.20.1-22-gd357e23 (d357e23)", v)
		}
	})

	t.Run("jobs", func(t *testing.T) {
		deadline := time.Now().Add(time.Minute)
		for {
			var l batchv1.JobList
			c.kubectlJSON(0, &l, "get", "jobs", "-n", "system-upgrade")
			byNode := map[string]batchv1.Job{}
			for _, j := range l.Items {
				byNode[j.Labels["upgrade.cattle.io/node"]] = j
			}
			a1, srv := byNode["a1"], byNode["cp1"]
			if a1.Name != "" && srv.Name != "" {
				if a1.Labels["upgrade.cattle.io/plan"] != "k3s-agent" || srv.Labels["upgrade.cattle.io/plan"] != "k3s-server" {
					t.Errorf("jobs' plans: a1 %q, cp1 %q; want k3s-agent and k3s-server", a1.Labels["upgrade.cattle.io/plan"], srv.Labels["upgrade.cattle.io/plan"])
				}
				for _, tol := range a1.Spec.Template.Spec.Tolerations {
					if tol.Key == "dedicated" || (tol.Key == "" && tol.Operator == "Exists") {
						t.Errorf("a1's job tolerates %+v: the undeclared taint dedicated=edge must not be tolerated", tol)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the controller made no job for both nodes within a minute: %v", byNode)
			}
			time.Sleep(2 * time.Second)
		}
	})

	t.Run("image-pull", func(t *testing.T) {
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

	t.Run("taint", func(t *testing.T) {
		c.exec(0, "k3s", "kubectl", "label", "node", "cp1", "k3s-upgrade=disabled")
		r3 := c.k3strap(3*time.Minute, "upgrade", "--watch", "--stall-grace", "10s")
		defer r3.dump(t)
		h, d := sucStall(t, r3)
		if r3.code != 4 || h != "a1" || d == nil || d.Diagnosis != "suc-job-untolerated-taint" {
			t.Fatalf("upgrade --watch: exit %d, stall on %q %+v; want exit 4, a1, suc-job-untolerated-taint", r3.code, h, d)
		}
		if !strings.Contains(d.Message, "dedicated=edge:NoSchedule") {
			t.Errorf("the diagnosis does not name the taint: %s", d.Message)
		}
		ev := strings.Join(d.Evidence, "\n")
		if !strings.Contains(ev, "untolerated taint") || !strings.Contains(ev, "dedicated=edge:NoSchedule") {
			t.Errorf("evidence lacks the scheduler's message or the taint: %q", d.Evidence)
		}
	})
	t.Logf("TestRealUpgradeSUC: %s", time.Since(start).Round(time.Second))
}
