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

// The k3s-upgrade image holds the script (executable, valid sh) and busybox as its shell.
func TestK3sUpgradeFiles(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err != nil {
		t.Skip("Debian's busybox-static is not installed: " + err.Error())
	}
	files, err := k3sUpgradeFiles(&builder{log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var script, sh bool
	for _, f := range files {
		switch f.Name {
		case "/bin/upgrade.sh":
			script = f.Mode == 0o755 && string(f.Body) == string(upgradeScript)
		case "/bin/sh":
			sh = f.Link == busyboxPath
		}
	}
	if !script || !sh {
		t.Errorf("script %v, /bin/sh linked to busybox %v", script, sh)
	}
	if out, err := exec.Command(busyboxPath, "sh", "-n", "k3supgrade/upgrade.sh").CombinedOutput(); err != nil {
		t.Errorf("busybox sh -n upgrade.sh: %v\n%s", err, out)
	}
}

// TestSUCSnapshot: the repository's copy of the controller's source is `git archive` of the
// commit built, and a tar without git's commit id is refused.
func TestSUCSnapshot(t *testing.T) {
	id, err := tarCommit(filepath.Join("..", "..", "..", sucSnapshot))
	if err != nil || id != sucCommit {
		t.Fatalf("tarCommit(%s) = %q, %v; want %s", sucSnapshot, id, err, sucCommit)
	}
	plain := filepath.Join(t.TempDir(), "plain.tar.gz")
	if out, err := exec.Command("tar", "-czf", plain, "-C", t.TempDir(), ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	if _, err := tarCommit(plain); err == nil || !strings.Contains(err.Error(), "not a `git archive`") {
		t.Errorf("tarCommit of a plain tar: %v", err)
	}
}
