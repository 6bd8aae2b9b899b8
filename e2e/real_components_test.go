// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// The real components on the real K3s: e2e/cmd/mkimages builds the images a K3s v1.36.3+k3s1
// cluster pulls (pause, CoreDNS, metrics-server, local-path-provisioner and its busybox) from
// their upstream source, under the references K3s names; this test's cluster uploads that
// archive instead of the stand-ins (docs/testing-stand-ins.md).

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/events"
)

// realImagesArchive is the file name of the real images archive.
const realImagesArchive = "k3strap-real-images-amd64.tar.zst"

// realImages is the real images archive of this test binary, its checksums file (the release's
// lines and the archive's) and how long `mkimages real` took.
type realImages struct {
	archive, checksums string
	refs               []string
	seconds            float64
	log                string
}

// realImagesOnce builds the real images archive once per test binary with `mkimages real`,
// caching the programs in cacheDir by source digest; skip is set (and err nil) when a build
// input is missing on this machine (mkimages exit status 3, its message says which).
var realImagesOnce = sync.OnceValues(func() (realImages, error) {
	return buildRealImages()
})

// realImagesCacheDir is set by the first caller of needRealImages (the harness directory's
// real-images/), before realImagesOnce runs.
var realImagesCacheDir = struct {
	sync.Mutex
	dir string
}{}

var errRealImagesMissing = errors.New("missing build input")

// runMkimages runs `mkimages KIND` (real, real-suc) from the repository's root into a new
// temporary file named archive, caching the programs in the directory the first caller of
// needRealImages or needSUCImages set; it returns the archive's path, how long the build took
// (seconds) and its output. errRealImagesMissing when a build input is missing here (mkimages
// exit status 3, its message says which).
func runMkimages(kind, archive string) (path string, seconds float64, log string, err error) {
	realImagesCacheDir.Lock()
	cache := realImagesCacheDir.dir
	realImagesCacheDir.Unlock()
	dir, err := os.MkdirTemp("", "k3strap-e2e-"+kind+"-images-")
	if err != nil {
		return "", 0, "", err
	}
	path = filepath.Join(dir, archive)
	start := time.Now()
	cmd := exec.Command("go", "run", "./e2e/cmd/mkimages", kind, "-cache", cache, "-timeout", "25m", path)
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	seconds, log = time.Since(start).Seconds(), string(out)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return path, seconds, log, fmt.Errorf("%w: %s", errRealImagesMissing, strings.TrimSpace(lastLines(log, 3)))
	}
	if err != nil {
		return path, seconds, log, fmt.Errorf("mkimages %s: %v\n%s", kind, err, out)
	}
	return path, seconds, log, nil
}

func buildRealImages() (realImages, error) {
	var ri realImages
	var err error
	if ri.archive, ri.seconds, ri.log, err = runMkimages("real", realImagesArchive); err != nil {
		return ri, err
	}
	list := exec.Command("go", "run", "./e2e/cmd/mkimages", "real-list")
	list.Dir = repoRoot()
	refs, err := list.Output()
	if err != nil {
		return ri, fmt.Errorf("mkimages real-list: %v", err)
	}
	ri.refs = strings.Fields(string(refs))
	r, _ := realOnce()
	if r.Checksums == "" {
		return ri, nil
	}
	sums, err := os.ReadFile(r.Checksums)
	if err != nil {
		return ri, err
	}
	f, err := os.Open(ri.archive)
	if err != nil {
		return ri, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ri, err
	}
	sums = fmt.Appendf(sums, "%x  %s\n", h.Sum(nil), realImagesArchive)
	ri.checksums = filepath.Join(filepath.Dir(ri.archive), "sha256sum-amd64.txt")
	return ri, os.WriteFile(ri.checksums, sums, 0o644)
}

// needRealImages returns the real images archive (built once, its programs cached under the
// harness directory); it skips the test, saying why, when a build input is missing here and
// fails it when a build failed.
func needRealImages(t *testing.T, c *testCluster) realImages {
	t.Helper()
	return needImages(t, c, "real component images", realImagesOnce)
}

// needImages returns what once builds (an images archive, built once per test binary with
// runMkimages), after setting the programs' cache to the harness directory's real-images/ when
// no caller has yet; it skips the test, saying why, when a build input of what is missing here,
// and fails it when the build failed.
func needImages[T any](t *testing.T, c *testCluster, what string, once func() (T, error)) T {
	t.Helper()
	realImagesCacheDir.Lock()
	if realImagesCacheDir.dir == "" {
		realImagesCacheDir.dir = filepath.Join(c.h.Dir(), "real-images")
	}
	realImagesCacheDir.Unlock()
	built, err := once()
	if errors.Is(err, errRealImagesMissing) {
		t.Skipf("the %s cannot be built here: %v", what, err)
	}
	if err != nil {
		t.Fatalf("building the %s: %v", what, err)
	}
	return built
}

// execIn runs a command in pod (namespace default) through host 0's k3s kubectl exec and
// returns its combined output and whether it exited 0.
func (c *testCluster) execIn(pod string, timeout time.Duration, args ...string) (string, error) {
	return c.execErr(0, timeout, append([]string{"k3s", "kubectl", "exec", pod, "--"}, args...)...)
}

// realComponentsWorkload is a busybox pod (the real busybox image local-path's helper pods
// run), a ClusterIP Service without endpoints, and a PVC of class local-path with a pod that
// writes a file into it.
const realComponentsWorkload = `apiVersion: v1
kind: Pod
metadata: {name: bb, labels: {app: bb}}
spec:
  containers:
    - name: bb
      image: docker.io/rancher/mirrored-library-busybox:1.37.0
      imagePullPolicy: Never
      command: [sleep, "3600"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: nothing-here}
  ports: [{port: 80}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local-path
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  restartPolicy: Never
  containers:
    - name: w
      image: docker.io/rancher/mirrored-library-busybox:1.37.0
      imagePullPolicy: Never
      command: [sh, -c, "echo written-through-local-path > /data/proof && cat /data/proof"]
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: data}
`

// TestRealComponents (real K3s, one server): the real CoreDNS, metrics-server,
// local-path-provisioner, busybox and pause, built from upstream source by e2e/cmd/mkimages
// (cached by source digest under the harness directory), run a real cluster; one cluster for
// every subtest.
//   - images: K3s imports every image of the archive; each container of the packaged
//     components runs its image, which carries mkimages's labels (the recipe, the source
//     digest); CoreDNS logs its upstream version.
//   - dns: from a pod, a Service resolves by its full name to its ClusterIP, and
//     kubernetes.default too; a name outside the cluster fails with SERVFAIL, as the real
//     CoreDNS answers when its forward plugin has no upstream that answers (no internet here).
//   - metrics: `kubectl top nodes` lists the node with its CPU and memory (the real
//     metrics-server scraped the real kubelet).
//   - pvc: a PVC of class local-path is Bound by the real provisioner (its busybox helper pod
//     made the directory), a pod writes a file into it, and the file is on the host under
//     /var/lib/rancher/k3s/storage/.
//   - doctor: `k3strap doctor` finds nothing wrong (its DNS and metrics checks judged against
//     the real components).
func TestRealComponents(t *testing.T) {
	c := newRealCluster(t, 1)
	ri := needRealImages(t, c)
	st, err := os.Stat(ri.archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real images archive: %d bytes, mkimages real took %.1f s:\n%s", st.Size(), ri.seconds, strings.TrimSpace(ri.log))
	extra := map[string]any{"images": ri.archive}
	if ri.checksums != "" {
		extra["checksums"] = ri.checksums
	}
	c.writeInventory(realSingleServer, extra)
	start := time.Now()
	r := c.k3strap(5*time.Minute, "apply")
	if r.code != 0 {
		r.dump(t)
		t.Fatalf("apply exited %d", r.code)
	}
	t.Logf("apply: %s", r.duration.Round(time.Millisecond))

	t.Run("images", func(t *testing.T) {
		n, d := c.waitImportedFile(0, "k3s", realImagesArchive, 2*time.Minute)
		t.Logf("K3s imported %d images in %s", n, d)
		if n != len(ri.refs) {
			t.Errorf("K3s imported %d images, the archive holds %d", n, len(ri.refs))
		}
		for _, ref := range ri.refs {
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
			if l["io.k3strap.test-image.built-by"] != "k3strap e2e/cmd/mkimages" || l["io.k3strap.test-image.recipe"] == "" || l["io.k3strap.test-image.source-digest"] == "" {
				t.Errorf("%s: labels %v, want mkimages's built-by, recipe and source-digest", ref, l)
			}
			if strings.HasPrefix(ref, "docker.io/rancher/local-path-provisioner:") {
				// v0.0.36 (K3s's) from LOCAL_PATH_PROVISIONER_SRC, else v0.0.30 from the module
				// proxy, which refuses v0.0.36 (docs/testing-stand-ins.md).
				want := "v0.0.30"
				if os.Getenv("LOCAL_PATH_PROVISIONER_SRC") != "" {
					want = "v0.0.36"
				}
				t.Logf("%s: release %s, %s", ref, l["org.opencontainers.image.version"], l["io.k3strap.test-image.source-digest"])
				if l["org.opencontainers.image.version"] != want {
					t.Errorf("%s: version label %q, want %s", ref, l["org.opencontainers.image.version"], want)
				}
			}
		}
		for sel, ref := range map[string]string{
			"k8s-app=kube-dns":           "docker.io/rancher/mirrored-coredns-coredns:1.14.6",
			"k8s-app=metrics-server":     "docker.io/rancher/mirrored-metrics-server:v0.9.0",
			"app=local-path-provisioner": "docker.io/rancher/local-path-provisioner:v0.0.36",
		} {
			for _, p := range c.waitPods("kube-system", sel, 1, 3*time.Minute) {
				if got := p.Status.ContainerStatuses[0].Image; got != ref {
					t.Errorf("%s runs %s, want %s", p.Name, got, ref)
				}
			}
		}
		if logs := c.kubectl("", "logs", "-n", "kube-system", "-l", "k8s-app=kube-dns", "--tail=-1"); !strings.Contains(logs, "CoreDNS-1.14.6") {
			t.Errorf("CoreDNS's log does not name CoreDNS-1.14.6:\n%s", lastLines(logs, 20))
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	c.kubectl(realComponentsWorkload, "apply", "-f", "-")

	t.Run("dns", func(t *testing.T) {
		c.waitPods("default", "app=bb", 1, 2*time.Minute)
		ip := strings.TrimSpace(c.kubectl("", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"))
		kip := strings.TrimSpace(c.kubectl("", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"))
		for name, want := range map[string]string{"web.default.svc.cluster.local.": ip, "kubernetes.default.svc.cluster.local.": kip} {
			out, err := c.execIn("bb", 30*time.Second, "nslookup", name)
			if err != nil || !regexp.MustCompile(`(?m)^Address:\s+`+regexp.QuoteMeta(want)+`$`).MatchString(out) {
				t.Errorf("nslookup %s: %v, want Address: %s\n%s", name, err, want, out)
			}
		}
		out, err := c.execIn("bb", 60*time.Second, "nslookup", "k3strap-test.example.com.")
		t.Logf("nslookup of an outside name: %v\n%s", err, out)
		if err == nil || !strings.Contains(out, "SERVFAIL") {
			t.Errorf("nslookup k3strap-test.example.com: %v, want a failure with SERVFAIL (CoreDNS without an upstream)\n%s", err, out)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		c.waitAPIServiceAvailable("v1beta1.metrics.k8s.io", 2*time.Minute)
		deadline := time.Now().Add(3 * time.Minute)
		for {
			out, err := c.execErr(0, 30*time.Second, "k3s", "kubectl", "top", "nodes", "--no-headers")
			if err == nil && regexp.MustCompile(`(?m)^cp1\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%`).MatchString(out) {
				t.Logf("kubectl top nodes (%s after apply): %s", time.Since(start).Round(time.Second), out)
				break
			}
			if time.Now().After(deadline) {
				logs, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "logs", "-n", "kube-system", "-l", "k8s-app=metrics-server", "--tail=20")
				t.Fatalf("kubectl top nodes: no row for cp1 within 3 min: %v\n%s\nmetrics-server:\n%s", err, out, logs)
			}
			time.Sleep(3 * time.Second)
		}
	})

	t.Run("pvc", func(t *testing.T) {
		deadline := time.Now().Add(3 * time.Minute)
		var pvc corev1.PersistentVolumeClaim
		for {
			if err := json.Unmarshal([]byte(c.kubectl("", "get", "pvc", "data", "-o", "json")), &pvc); err != nil {
				t.Fatal(err)
			}
			phase := strings.TrimSpace(c.kubectl("", "get", "pod", "writer", "-o", "jsonpath={.status.phase}"))
			if pvc.Status.Phase == corev1.ClaimBound && phase == "Succeeded" {
				break
			}
			if time.Now().After(deadline) {
				ev, _ := c.execErr(0, 30*time.Second, "k3s", "kubectl", "get", "events", "-A", "--sort-by=.lastTimestamp")
				t.Fatalf("PVC %s, writer pod %s within 3 min\nevents:\n%s", pvc.Status.Phase, phase, lastLines(ev, 25))
			}
			time.Sleep(2 * time.Second)
		}
		if logs := c.kubectl("", "logs", "writer"); strings.TrimSpace(logs) != "written-through-local-path" {
			t.Errorf("writer's log %q", logs)
		}
		var pv corev1.PersistentVolume
		if err := json.Unmarshal([]byte(c.kubectl("", "get", "pv", pvc.Spec.VolumeName, "-o", "json")), &pv); err != nil {
			t.Fatal(err)
		}
		if pv.Spec.HostPath == nil && pv.Spec.Local == nil {
			t.Fatalf("PV %s has no hostPath or local source: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
		}
		path := ""
		if pv.Spec.HostPath != nil {
			path = pv.Spec.HostPath.Path
		} else {
			path = pv.Spec.Local.Path
		}
		if !strings.HasPrefix(path, "/var/lib/rancher/k3s/storage/") {
			t.Errorf("PV path %s, want under /var/lib/rancher/k3s/storage/ (K3s's local-path-config)", path)
		}
		if got := strings.TrimSpace(c.exec(0, "cat", path+"/proof")); got != "written-through-local-path" {
			t.Errorf("%s/proof on the host: %q", path, got)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		d := c.k3strap(2*time.Minute, "doctor")
		for _, e := range d.ofType(events.DoctorFindingType) {
			t.Logf("doctor: [%s %s] %s: %s %s", e.Doctor.Severity, e.Doctor.ID, e.Doctor.Node, e.Doctor.Title, e.Doctor.Message)
		}
		if d.code != 0 {
			d.dump(t)
			t.Errorf("doctor exited %d on a cluster whose real components all run", d.code)
		}
	})
	realHelmChart(t, c, extra)
	t.Logf("whole test after the hosts were up: %s", time.Since(start).Round(time.Second))
}
