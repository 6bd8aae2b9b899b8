// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKlipperHelmSnapshot: the repository's copy of klipper-helm's source is `git archive` of
// the commit K3s's tag names; its go-mod-overrides are read as the upstream script reads them
// (comments dropped, each line `go mod edit` arguments), and helm's ldflags carry the pinned
// version and commit.
func TestKlipperHelmSnapshot(t *testing.T) {
	t.Chdir(filepath.Join("..", "..", ".."))
	id, err := tarCommit(klipperHelmSnapshot)
	if err != nil || id != klipperHelmCommit {
		t.Fatalf("tarCommit(%s) = %q, %v; want %s", klipperHelmSnapshot, id, err, klipperHelmCommit)
	}
	edits, err := helmOverrides(klipperHelmSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(edits) != 1 || !slices.Equal(edits[0], []string{"-replace", "golang.org/x/net=golang.org/x/net@v0.55.0"}) {
		t.Errorf("go-mod-overrides: %q, want the one x/net replace of commit 09c5242", edits)
	}
	dockerfile, err := tarFile(klipperHelmSnapshot, "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ARG HELM_VERSION=" + helmVersion, "ARG HELM_COMMIT=" + helmCommit, "USER 1000", "WORKDIR /home/klipper-helm", `ENTRYPOINT ["entry"]`} {
		if !strings.Contains(string(dockerfile), want) {
			t.Errorf("the snapshot's Dockerfile has no %q: the recipe in helm.go no longer matches upstream's", want)
		}
	}
	for _, want := range []string{"version.version=" + helmVersion, "version.gitCommit=" + helmCommit, "k8sVersionMinor=35"} {
		if !strings.Contains(helmLDFlags("35"), want) {
			t.Errorf("helm ldflags %q lack %q", helmLDFlags("35"), want)
		}
	}
	if _, err := tarFile(klipperHelmSnapshot, "no-such-file"); err == nil || !strings.Contains(err.Error(), "no no-such-file") {
		t.Errorf("tarFile of a missing name: %v", err)
	}
}

// TestKlipperHelmFiles: the image's entry script is upstream's and valid bash, bash and jq
// are there with jq's libraries, and user 1000 has klipper-helm's home (helm's directories).
func TestKlipperHelmFiles(t *testing.T) {
	for _, p := range []string{bashStaticPath, busyboxPath, "/usr/bin/jq"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%v: Debian's bash-static, jq and busybox-static are not installed (make test-setup installs them)", err)
		}
	}
	t.Chdir(filepath.Join("..", "..", ".."))
	files, err := klipperHelmFiles(&builder{log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for i, f := range files {
		by[f.Name] = i
	}
	for _, want := range []string{"/usr/bin/entry", "/bin/bash", "/etc/passwd", "/bin/base64", "/bin/grep", "/usr/bin/jq", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libjq.so.1", "/lib/x86_64-linux-gnu/libonig.so.5"} {
		if _, ok := by[want]; !ok {
			t.Errorf("no %s in the image", want)
		}
	}
	entry := files[by["/usr/bin/entry"]]
	if entry.Mode != 0o755 || !strings.HasPrefix(string(entry.Body), "#!/bin/bash") {
		t.Errorf("/usr/bin/entry: mode %o, starts %q", entry.Mode, string(entry.Body[:min(20, len(entry.Body))]))
	}
	if !strings.Contains(string(files[by["/etc/passwd"]].Body), "klipper-helm:x:1000:1000::/home/klipper-helm:") {
		t.Errorf("/etc/passwd has no user 1000 with home /home/klipper-helm:\n%s", files[by["/etc/passwd"]].Body)
	}
	script := filepath.Join(t.TempDir(), "entry")
	if err := os.WriteFile(script, entry.Body, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bashStaticPath, "-n", script).CombinedOutput(); err != nil {
		t.Errorf("bash -n entry: %v\n%s", err, out)
	}
	if d, err := klipperHelmFilesDigest(t.Context()); err != nil || !strings.Contains(d, "jq ") || !strings.Contains(d, "bash-static ") {
		t.Errorf("files digest %q, %v; want the packages' versions", d, err)
	}
}
