// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/suc"
)

// The system-upgrade-controller source built: the snapshot whose manifests templates/suc
// embeds (templates/suc/SOURCE.md: v0.20.1-22-gd357e23). k3strap deploys it under the
// reference of release suc.Version; the 22 commits after that tag change dependencies, README
// and CI files only (`git diff --stat v0.20.1 d357e23`), and the image's labels say which
// commit it holds.
const (
	sucModule   = "github.com/rancher/system-upgrade-controller"
	sucCommit   = "d357e2302999662071e0467b96e94f31b5c470ba"
	sucDescribe = "v0.20.1-22-gd357e23"
)

// sucNote ends the description of the controller's image.
const sucNote = " Commit " + sucDescribe + " (" + sucCommit + "), the snapshot whose manifests k3strap embeds, under the reference of release " + suc.Version + ": the commits between them change dependencies, README and CI files only."

// The k3s-upgrade image's script: scripts/upgrade.sh of github.com/k3s-io/k3s-upgrade at
// k3sUpgradeCommit (the newest commit reachable here; the script last changed in 1a750bc,
// May 2025), from the repository's snapshot k3sUpgradeSnapshot (`git archive --format=tar.gz
// e45db20`, Apache-2.0, its LICENSE inside; 13 KB). Upstream's image is Alpine with jq,
// libselinux-utils and procps, its /bin/sh BusyBox's ash; here jq and procps are Debian's
// with their libraries, the shell and the rest BusyBox from Debian's package busybox
// (loadDebBusybox; k3sUpgradeNote).
const (
	k3sUpgradeCommit   = "e45db208b49b6c0e680dc59667a6156322dc3774"
	k3sUpgradeSnapshot = "e2e/testdata/upstream/k3s-upgrade-e45db20.tar.gz"
)

// k3sUpgradeDebian are the Debian packages of the k3s-upgrade image's tools: procps's ps
// (the script reads `ps -ef` columns and `ps -p PID -o ppid=`, which BusyBox's ps lacks) and
// jq, with the packages of the libraries they load.
var k3sUpgradeDebian = []string{"procps", "libproc2-0", "jq", "libjq1", "libonig5", "libc6", "libsystemd0"}

// k3sUpgradeNote ends the k3s-upgrade image's description.
const k3sUpgradeNote = " Upstream's scripts/upgrade.sh of github.com/k3s-io/k3s-upgrade commit e45db20 and the K3s release binary at /opt/k3s; not upstream's image: Debian's procps (ps) and jq with their libraries and Debian's BusyBox (package busybox) as the shell and the other tools instead of Alpine's packages, without libselinux-utils (the script restores a binary's SELinux context only when getfilecon reports one), and the binary is the K3s binary under test, not one downloaded and checked against the release's sha256sum file."

// sucImages are the images `k3strap upgrade --via suc` makes a cluster pull: system-upgrade-
// controller built from a git directory of its source (b.sucSrc), the kubectl image its Jobs
// cordon and drain with (the release SUC's manifest names, kubectlProgram), and
// rancher/k3s-upgrade holding the K3s binary b.k3sBinary (its tag is that binary's release, as
// SUC names it from the Plan's version).
func sucImages(b *builder) ([]realImage, error) {
	if b.k3sBinary == "" {
		return nil, &missingError{"no K3s binary for rancher/k3s-upgrade: set -k3s-binary or K3S_BINARY (a K3s release's k3s)"}
	}
	rel, err := k3s.BinaryReleaseFile(b.k3sBinary)
	if err != nil || rel == "" {
		return nil, &missingError{fmt.Sprintf("%s: cannot read its K3s release: %v", b.k3sBinary, err)}
	}
	kubectlRef, kubectlVersion, err := sucKubectlImage()
	if err != nil {
		return nil, err
	}
	return []realImage{
		{
			Ref:       "docker.io/" + suc.ControllerImage,
			Component: "system-upgrade-controller", NamedBy: "templates/suc (the controller Deployment k3strap applies)",
			Upstream: "https://github.com/rancher/system-upgrade-controller", Version: sucDescribe, License: "Apache-2.0",
			Program: sucProgram{}, Path: "/bin/system-upgrade-controller",
			Entrypoint: []string{"/bin/system-upgrade-controller"}, User: "65534:65534",
			Dirs: []string{"/tmp/"},
		},
		{
			Ref:       kubectlRef,
			Component: "kubectl", NamedBy: "templates/suc/manifests/system-upgrade-controller.yaml (SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE: SUC's cordon and drain init containers)",
			Upstream: "https://github.com/kubernetes/kubernetes/tree/" + kubectlVersion + "/cmd/kubectl", Version: kubectlVersion, License: "Apache-2.0",
			Program: kubectlProgram{Version: kubectlVersion}, Path: "/bin/kubectl",
			Entrypoint: []string{"/bin/kubectl"}, Env: []string{imagePATH, "HOME=/tmp"},
			Dirs: []string{"/tmp/"},
		},
		{
			Ref:       "docker.io/" + suc.UpgradeImage + ":" + strings.ReplaceAll(rel, "+", "-"),
			Component: "k3s-upgrade (K3s binary and k3s-upgrade's upgrade script)", NamedBy: "templates/suc (the Plans' upgrade and prepare image, tagged by SUC with the Plan's version)",
			Upstream: "https://github.com/k3s-io/k3s", Version: rel, License: "Apache-2.0",
			Program: k3sBinaryProgram{}, Path: "/opt/k3s", Files: k3sUpgradeFiles,
			Entrypoint: []string{"/bin/upgrade.sh"}, Cmd: []string{"upgrade"}, Env: []string{imagePATH},
			Dirs: []string{"/tmp/", "/host/"},
		},
	}, nil
}

// sucProgram builds system-upgrade-controller at sucCommit from a git directory of its
// repository (the module proxy refuses the module: 403), as its package/Dockerfile does:
// CGO_ENABLED=0 go build with the version and commit in pkg/version, its dependencies
// through the module proxy (its go.mod and go.sum).
type sucProgram struct{}

func (sucProgram) source(ctx context.Context, b *builder) (built, error) {
	if b.sucSrc == "" {
		return built{}, &missingError{"no source for system-upgrade-controller (the module proxy refuses " + sucModule + "): set -suc-src or SYSTEM_UPGRADE_CONTROLLER_SRC to a git directory of its repository holding commit " + sucCommit + ", or to " + sucSnapshot}
	}
	if strings.HasSuffix(b.sucSrc, ".tar.gz") {
		id, err := tarCommit(b.sucSrc)
		if err != nil {
			return built{}, &missingError{fmt.Sprintf("%s: %v", b.sucSrc, err)}
		}
		if id != sucCommit {
			return built{}, fmt.Errorf("%s is `git archive` of commit %s, want %s (%s)", b.sucSrc, id, sucCommit, sucDescribe)
		}
	} else if _, err := run(ctx, "/", nil, "git", "--git-dir="+b.sucSrc, "cat-file", "-e", sucCommit+"^{commit}"); err != nil {
		return built{}, &missingError{fmt.Sprintf("%s: commit %s (%s) not found: %v", b.sucSrc, sucCommit, sucDescribe, err)}
	}
	return built{Digest: sucModule + "@" + sucDescribe + " commit " + sucCommit, Version: sucDescribe, Note: sucNote,
		Recipe: fmt.Sprintf("git archive %s; CGO_ENABLED=0 go build -trimpath -ldflags %q . (%s)", sucCommit[:7], sucLDFlags(), runtime.Version())}, nil
}

// sucSnapshot is the repository's copy of the source built (`git archive --format=tar.gz
// d357e23` of github.com/rancher/system-upgrade-controller, Apache-2.0, its LICENSE inside),
// relative to the repository's root: the default of -suc-src, so that CI, which cannot fetch
// it, builds the real controller.
const sucSnapshot = "e2e/testdata/upstream/system-upgrade-controller-d357e23.tar.gz"

// tarCommit returns the commit `git archive` recorded in the gzipped tar at path: the comment
// of its pax global header (git-get-tar-commit-id(1)).
func tarCommit(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", err
	}
	h, err := tar.NewReader(zr).Next()
	if err != nil {
		return "", err
	}
	if id := h.PAXRecords["comment"]; h.Typeflag == tar.TypeXGlobalHeader && regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(id) {
		return id, nil
	}
	return "", fmt.Errorf("not a `git archive` (no commit id in a pax global header)")
}

func sucLDFlags() string {
	return "-X " + sucModule + "/pkg/version.Version=" + sucDescribe + " -X " + sucModule + "/pkg/version.GitCommit=" + sucCommit[:7] + " -s"
}

func (sucProgram) build(ctx context.Context, b *builder, _ built, out string) error {
	src := filepath.Join(filepath.Dir(out), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	extract := []string{"sh", "-c", `git --git-dir="$1" archive "$2" | tar -x -C "$3"`, "sh", b.sucSrc, sucCommit, src}
	if strings.HasSuffix(b.sucSrc, ".tar.gz") {
		extract = []string{"tar", "-xzf", b.sucSrc, "-C", src}
	}
	if _, err := run(ctx, "/", nil, extract[0], extract[1:]...); err != nil {
		return err
	}
	_, err := run(ctx, src, goEnv, "go", "build", "-trimpath", "-ldflags", sucLDFlags(), "-o", out, ".")
	return err
}

// k3sBinaryProgram is the K3s binary b.k3sBinary, copied; its source digest covers the image's
// other files too (k3sUpgradeFiles).
type k3sBinaryProgram struct{}

func (k3sBinaryProgram) source(ctx context.Context, b *builder) (built, error) {
	bb, err := loadDebBusybox(ctx, b.cacheDir)
	if err != nil {
		return built{}, err
	}
	bin, err := os.ReadFile(b.k3sBinary)
	if err != nil {
		return built{}, &missingError{err.Error()}
	}
	id, err := tarCommit(k3sUpgradeSnapshot)
	if err != nil {
		return built{}, &missingError{fmt.Sprintf("%s: %v", k3sUpgradeSnapshot, err)}
	}
	if id != k3sUpgradeCommit {
		return built{}, fmt.Errorf("%s is `git archive` of commit %s, want %s", k3sUpgradeSnapshot, id, k3sUpgradeCommit)
	}
	script, err := tarFile(k3sUpgradeSnapshot, "scripts/upgrade.sh")
	if err != nil {
		return built{}, err
	}
	_, deb, err := debianFiles(ctx, k3sUpgradeDebian, "/usr/bin/ps", "/usr/bin/jq")
	if err != nil {
		return built{}, err
	}
	h, s := sha256.Sum256(bin), sha256.Sum256(script)
	return built{Digest: fmt.Sprintf("k3s sha256:%x; github.com/k3s-io/k3s-upgrade commit %s scripts/upgrade.sh sha256:%x; %s; %s", h, k3sUpgradeCommit, s, deb, bb.Digest),
		Note:   k3sUpgradeNote,
		Recipe: "the K3s release binary copied to /opt/k3s; scripts/upgrade.sh of k3s-upgrade " + k3sUpgradeCommit[:7] + " as /bin/upgrade.sh; Debian's ps and jq with their libraries; Debian's busybox " + bb.Version + " (the dynamically linked build) for the shell and the other tools"}, nil
}

func (k3sBinaryProgram) build(_ context.Context, b *builder, _ built, out string) error {
	bin, err := os.ReadFile(b.k3sBinary)
	if err != nil {
		return err
	}
	return os.WriteFile(out, bin, 0o755)
}

// k3sUpgradeFiles are the k3s-upgrade image's files beside the K3s binary: upstream's script
// as /bin/upgrade.sh, Debian's ps and jq with their libraries, and BusyBox with a link per
// applet for the script's other tools (sh, awk, grep, sha256sum, date).
func k3sUpgradeFiles(b *builder) ([]imagearchive.Entry, error) {
	script, err := tarFile(k3sUpgradeSnapshot, "scripts/upgrade.sh")
	if err != nil {
		return nil, err
	}
	files := []imagearchive.Entry{{Name: "/bin/upgrade.sh", Mode: 0o755, Body: script}}
	deb, _, err := debianFiles(context.Background(), k3sUpgradeDebian, "/usr/bin/ps", "/usr/bin/jq")
	if err != nil {
		return nil, err
	}
	files = append(files, deb...)
	bb, err := loadDebBusybox(context.Background(), b.cacheDir)
	if err != nil {
		return nil, err
	}
	bbf, err := bb.files(context.Background(), haveFiles(append(files, imagearchive.Entry{Name: "/opt/k3s"})))
	if err != nil {
		return nil, err
	}
	return append(files, bbf...), nil
}

// kubectlImageRe is the kubectl image of SUC's manifest (its config map's
// SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE).
var kubectlImageRe = regexp.MustCompile(`(?m)^\s*SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE:\s*"(rancher/kubectl):(v1\.\d+\.\d+)"`)

// sucKubectlImage returns the kubectl image reference SUC's embedded manifest names, fully
// qualified, and its Kubernetes release.
func sucKubectlImage() (ref, version string, err error) {
	m := kubectlImageRe.FindSubmatch(suc.Manifest("system-upgrade-controller.yaml"))
	if m == nil {
		return "", "", fmt.Errorf("templates/suc: SUC's manifest names no rancher/kubectl:vX.Y.Z in SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE")
	}
	return "docker.io/" + string(m[1]) + ":" + string(m[2]), string(m[2]), nil
}

// kubectlProgram builds kubectl of Kubernetes release Version: its main package,
// cmd/kubectl/kubectl.go of k8s.io/kubernetes at Version (module proxy), in a module of its
// own requiring the staging modules of that release (k8s.io/kubectl, client-go,
// component-base at v0.Y.Z) — k8s.io/kubernetes itself cannot be built as a dependency (its
// go.mod replaces them with ./staging) — with the version ldflags of its hack/lib/version.sh.
type kubectlProgram struct{ Version string }

// staging is the staging modules' version of Kubernetes release v1.Y.Z: v0.Y.Z.
func (k kubectlProgram) staging() string { return "v0" + strings.TrimPrefix(k.Version, "v1") }

func (k kubectlProgram) ldflags() string {
	return "-s -w -X k8s.io/client-go/pkg/version.gitVersion=" + k.Version + " -X k8s.io/component-base/version.gitVersion=" + k.Version
}

func (k kubectlProgram) goMod() string {
	return fmt.Sprintf("module k3strap.test/kubectl\n\ngo 1.22\n\nrequire (\n\tk8s.io/client-go %[1]s\n\tk8s.io/component-base %[1]s\n\tk8s.io/kubectl %[1]s\n)\n", k.staging())
}

func (k kubectlProgram) source(ctx context.Context, _ *builder) (built, error) {
	dir, sum, err := moduleDownload(ctx, kubernetesModule, k.Version)
	if err != nil {
		return built{}, err
	}
	main, err := os.ReadFile(filepath.Join(dir, "cmd/kubectl/kubectl.go"))
	if err != nil {
		return built{}, err
	}
	h := sha256.Sum256(main)
	return built{Digest: fmt.Sprintf("%s@%s %s cmd/kubectl/kubectl.go sha256:%x; k8s.io/kubectl, client-go, component-base %s", kubernetesModule, k.Version, sum, h, k.staging()),
		Recipe: fmt.Sprintf("cmd/kubectl/kubectl.go of %s@%s in a module requiring k8s.io/kubectl, client-go, component-base %s; go mod tidy; CGO_ENABLED=0 go build -trimpath -ldflags %q (%s)", kubernetesModule, k.Version, k.staging(), k.ldflags(), runtime.Version())}, nil
}

func (k kubectlProgram) build(ctx context.Context, _ *builder, _ built, out string) error {
	dir, _, err := moduleDownload(ctx, kubernetesModule, k.Version)
	if err != nil {
		return err
	}
	main, err := os.ReadFile(filepath.Join(dir, "cmd/kubectl/kubectl.go"))
	if err != nil {
		return err
	}
	src := filepath.Join(filepath.Dir(out), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "kubectl.go"), main, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(k.goMod()), 0o644); err != nil {
		return err
	}
	if _, err := run(ctx, src, goEnv, "go", "mod", "tidy"); err != nil {
		return err
	}
	_, err = run(ctx, src, goEnv, "go", "build", "-trimpath", "-ldflags", k.ldflags(), "-o", out, ".")
	return err
}
