// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// The kubectl image is the one SUC's embedded manifest names, built from the staging modules
// of the same Kubernetes release.
func TestSUCKubectlImage(t *testing.T) {
	ref, v, err := sucKubectlImage()
	if err != nil {
		t.Fatal(err)
	}
	if ref != "docker.io/rancher/kubectl:v1.30.3" || v != "v1.30.3" {
		t.Errorf("kubectl image %s (%s), want docker.io/rancher/kubectl:v1.30.3 as SUC's manifest says", ref, v)
	}
	k := kubectlProgram{Version: v}
	if k.staging() != "v0.30.3" || !strings.Contains(k.goMod(), "k8s.io/kubectl v0.30.3") {
		t.Errorf("staging %s, go.mod:\n%s", k.staging(), k.goMod())
	}
}

// Without the source of SUC or a K3s binary, real-suc says which input is missing (exit 3).
func TestSUCImagesMissingInputs(t *testing.T) {
	b := &builder{log: io.Discard}
	if _, err := sucImages(b); err == nil || !strings.Contains(err.Error(), "K3S_BINARY") {
		t.Errorf("no K3s binary: %v", err)
	}
	if _, err := (sucProgram{}).source(t.Context(), b); err == nil || !strings.Contains(err.Error(), "SYSTEM_UPGRADE_CONTROLLER_SRC") {
		t.Errorf("no SUC source: %v", err)
	}
}

// The k3s-upgrade image holds upstream's script (executable, valid sh, from the snapshot of
// commit e45db20), procps's ps and jq with their libraries, and Debian's dynamically linked
// BusyBox for the shell and the rest, without a link shadowing ps or jq; its shell runs
// Debian's ps from PATH (busybox-static's would run its own applet) and takes the script's
// `kill -SIGTERM`.
func TestK3sUpgradeFiles(t *testing.T) {
	for _, p := range []string{"/usr/bin/ps", "/usr/bin/jq"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%v: Debian's procps and jq are needed (make test-setup installs them)", err)
		}
	}
	cache := t.TempDir()
	if _, err := loadDebBusybox(t.Context(), cache); err != nil {
		t.Skipf("Debian's package busybox cannot be downloaded here: %v", err)
	}
	t.Chdir(filepath.Join("..", "..", ".."))
	if id, err := tarCommit(k3sUpgradeSnapshot); err != nil || id != k3sUpgradeCommit {
		t.Fatalf("tarCommit(%s) = %q, %v; want %s", k3sUpgradeSnapshot, id, err, k3sUpgradeCommit)
	}
	files, err := k3sUpgradeFiles(&builder{log: io.Discard, cacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]imagearchive.Entry{}
	for _, f := range files {
		by[f.Name] = f
	}
	script := by["/bin/upgrade.sh"]
	if script.Mode != 0o755 || !strings.Contains(string(script.Body), "get_k3s_process_info") {
		t.Errorf("/bin/upgrade.sh: mode %o, not upstream's script", script.Mode)
	}
	if by["/bin/sh"].Link != busyboxPath || by["/usr/bin/awk"].Link != busyboxPath {
		t.Errorf("/bin/sh %+v, /usr/bin/awk %+v: want links to BusyBox", by["/bin/sh"].Link, by["/usr/bin/awk"].Link)
	}
	for _, p := range []string{"/usr/bin/ps", "/usr/bin/jq", "/lib64/ld-linux-x86-64.so.2"} {
		if f, ok := by[p]; !ok || f.Link != "" || len(f.Body) == 0 {
			t.Errorf("%s: %+v, want Debian's file", p, ok)
		}
	}
	if f, ok := by["/bin/ps"]; ok {
		t.Errorf("/bin/ps is in the image (%+v): BusyBox's ps lacks -p and the -ef columns the script reads", f.Link)
	}
	// The image's shell and ps, run in a root of the image's files: ps -p answers (Debian's
	// ps, not BusyBox's applet) and kill -SIGTERM is taken.
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.Link != "" {
			if err := os.Symlink(f.Link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, f.Body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(filepath.Join(root, busyboxPath), "sh", "-n", filepath.Join(root, "bin/upgrade.sh")).CombinedOutput(); err != nil {
		t.Errorf("sh -n upgrade.sh: %v\n%s", err, out)
	}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := `mount -t proc proc "$1/proc" && chroot "$1" /bin/sh -c 'ps -p 1 -o ppid= && sleep 5 & kill -SIGTERM $! && echo killed'; r=$?; umount "$1/proc"; exit $r`
	out, err := exec.Command("unshare", "-m", "sh", "-c", check, "sh", root).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "killed") || strings.Contains(string(out), "invalid option") {
		t.Errorf("the image's shell: ps -p and kill -SIGTERM: %v\n%s", err, out)
	}
}
