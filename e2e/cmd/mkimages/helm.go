// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// The klipper-helm image K3s v1.36.3+k3s1 names for the helm-controller's Jobs: its binary's
// ldflags set github.com/k3s-io/helm-controller/pkg/controllers/chart.DefaultJobImage to
// klipperHelmRef (helm-controller v0.17.7). Tag v0.13.3-build20260727 is commit
// klipperHelmCommit of github.com/k3s-io/klipper-helm, whose Dockerfile builds helm
// helmVersion at helmCommit with the go.mod overrides of its go-mod-overrides file.
const (
	klipperHelmRef    = "docker.io/rancher/klipper-helm:v0.13.3-build20260727"
	klipperHelmTag    = "v0.13.3-build20260727"
	klipperHelmCommit = "09c52422fd0654369e3c24a2a971289d1bffd5cd"
	helmModule        = "helm.sh/helm/v4"
	helmVersion       = "v4.1.4"
	helmCommit        = "05fa37973dc9e42b76e1d2883494c87174b6074f"
	// klipperHelmSnapshot is the repository's copy of klipper-helm's source (`git archive
	// --format=tar.gz 09c5242` of github.com/k3s-io/klipper-helm, Apache-2.0, its LICENSE
	// inside; 13 KB): its entry script, Dockerfile and go-mod-overrides.
	klipperHelmSnapshot = "e2e/testdata/upstream/klipper-helm-09c5242.tar.gz"
)

// klipperHelmNote ends the image's description: where it differs from upstream's.
const klipperHelmNote = " helm " + helmVersion + " and klipper-helm's entry script as upstream's Dockerfile builds them (commit 09c5242). Not upstream's image: without the helm plugins helm-set-status and helm-mapkubeapis (their source at the pinned commits is not reachable here: the Go module proxy answers 403), so `helm set-status` and `helm mapkubeapis` fail as unknown commands, which the entry script ignores; bash is Debian's bash-static, jq Debian's jq with its glibc libraries, the other tools BusyBox (Debian's busybox-static), not Alpine 3.24's packages; no CA bundle."

// helmImages are the images a HelmChart makes a cluster pull: klipper-helm, its entry script
// from the repository's snapshot of its source (klipperHelmSnapshot, relative to the
// repository's root, where mkimages runs) and helm from the Go module proxy.
func helmImages() []realImage {
	return []realImage{{
		Ref:       klipperHelmRef,
		Component: "klipper-helm (helm and the helm-controller's job entry script)", NamedBy: "the K3s binary's ldflags: helm-controller v0.17.7 chart.DefaultJobImage",
		Upstream: "https://github.com/k3s-io/klipper-helm", Version: klipperHelmTag, License: "Apache-2.0",
		Program: helmProgram{}, Path: "/usr/bin/helm", Files: klipperHelmFiles,
		Entrypoint: []string{"entry"}, User: "1000", WorkingDir: "/home/klipper-helm",
		Env:  []string{imagePATH, "STABLE_REPO_URL=https://charts.helm.sh/stable/", "TIMEOUT="},
		Dirs: []string{"/tmp/", "/home/klipper-helm/.local/share/helm/plugins/", "/home/klipper-helm/.helm/", "/home/klipper-helm/.cache/", "/home/klipper-helm/.config/", "/config/", "/chart/"},
	}}
}

// helmProgram builds helm helmVersion as klipper-helm's Dockerfile does: the module from the
// Go module proxy (its origin is helmCommit, checked), the go.mod edits of klipper-helm's
// go-mod-overrides file, `go mod tidy`, then CGO_ENABLED=0 go build with the version ldflags.
type helmProgram struct{}

// helmOverrides returns the `go mod edit` arguments of the snapshot's go-mod-overrides (each
// non-comment line, as scripts/go-mod-overrides.sh reads it).
func helmOverrides(src string) ([][]string, error) {
	body, err := tarFile(src, "go-mod-overrides")
	if err != nil {
		return nil, err
	}
	var edits [][]string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if f := strings.Fields(line); len(f) > 0 {
			edits = append(edits, f)
		}
	}
	return edits, sc.Err()
}

// helmLDFlags are the Dockerfile's ldflags for k8s modules of version v0.MINOR.x (its
// k8sVersion variables are Kubernetes 1.MINOR).
func helmLDFlags(k8sMinor string) string {
	return "-w -s -X helm.sh/helm/v4/internal/version.version=" + helmVersion +
		" -X helm.sh/helm/v4/internal/version.metadata=" +
		" -X helm.sh/helm/v4/internal/version.gitCommit=" + helmCommit +
		" -X helm.sh/helm/v4/internal/version.gitTreeState=clean" +
		" -X helm.sh/helm/v4/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v4/pkg/lint/rules.k8sVersionMinor=" + k8sMinor +
		" -X helm.sh/helm/v4/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v4/pkg/chartutil.k8sVersionMinor=" + k8sMinor
}

func (helmProgram) source(ctx context.Context, _ *builder) (built, error) {
	id, err := tarCommit(klipperHelmSnapshot)
	if err != nil {
		return built{}, &missingError{fmt.Sprintf("%s: %v", klipperHelmSnapshot, err)}
	}
	if id != klipperHelmCommit {
		return built{}, fmt.Errorf("%s is `git archive` of commit %s, want %s (%s)", klipperHelmSnapshot, id, klipperHelmCommit, klipperHelmTag)
	}
	edits, err := helmOverrides(klipperHelmSnapshot)
	if err != nil {
		return built{}, err
	}
	out, err := run(ctx, "/", goEnv, "go", "mod", "download", "-json", helmModule+"@"+helmVersion)
	if err != nil {
		return built{}, &missingError{fmt.Sprintf("helm %s from the Go module proxy: %v", helmVersion, err)}
	}
	if !strings.Contains(string(out), `"Hash": "`+helmCommit+`"`) {
		return built{}, fmt.Errorf("%s@%s: the module proxy's origin is not commit %s (klipper-helm's HELM_COMMIT):\n%s", helmModule, helmVersion, helmCommit, out)
	}
	_, sum, err := moduleDownload(ctx, helmModule, helmVersion)
	if err != nil {
		return built{}, err
	}
	files, err := klipperHelmFilesDigest(ctx)
	if err != nil {
		return built{}, err
	}
	var ed []string
	for _, e := range edits {
		ed = append(ed, strings.Join(e, " "))
	}
	return built{Digest: fmt.Sprintf("%s@%s %s (commit %s); klipper-helm commit %s; go mod edit %s; %s", helmModule, helmVersion, sum, helmCommit, klipperHelmCommit, strings.Join(ed, "; "), files),
		Version: klipperHelmTag, Note: klipperHelmNote,
		Recipe: fmt.Sprintf("%s@%s from the module proxy; go mod edit %s; go mod tidy; CGO_ENABLED=0 go build -trimpath -ldflags %q ./cmd/helm (%s)", helmModule, helmVersion, strings.Join(ed, "; "), helmLDFlags("<k8s.io/client-go minor>"), runtime.Version())}, nil
}

func (helmProgram) build(ctx context.Context, _ *builder, _ built, out string) error {
	dir, _, err := moduleDownload(ctx, helmModule, helmVersion)
	if err != nil {
		return err
	}
	src := filepath.Join(filepath.Dir(out), "src")
	// The module cache is read-only: a writable copy.
	if _, err := run(ctx, "/", nil, "cp", "-r", dir, src); err != nil {
		return err
	}
	if _, err := run(ctx, "/", nil, "chmod", "-R", "u+w", src); err != nil {
		return err
	}
	edits, err := helmOverrides(klipperHelmSnapshot)
	if err != nil {
		return err
	}
	for _, e := range edits {
		if _, err := run(ctx, src, goEnv, "go", append([]string{"mod", "edit"}, e...)...); err != nil {
			return err
		}
	}
	if _, err := run(ctx, src, goEnv, "go", "mod", "tidy"); err != nil {
		return err
	}
	v, err := run(ctx, src, goEnv, "go", "list", "-f", "{{.Version}}", "-m", "k8s.io/client-go")
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if len(parts) < 2 {
		return fmt.Errorf("k8s.io/client-go version %q", v)
	}
	_, err = run(ctx, src, goEnv, "go", "build", "-trimpath", "-ldflags", helmLDFlags(parts[1]), "-o", out, "./cmd/helm")
	return err
}

// tarFile returns the file name of the gzipped tar at path.
func tarFile(path, name string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no %s", path, name)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name {
			return io.ReadAll(tr)
		}
	}
}

// bashStaticPath is Debian's bash-static, the klipper-helm image's /bin/bash (the entry script
// is bash).
const bashStaticPath = "/bin/bash-static"

// klipperHelmDebian are the Debian packages of the klipper-helm image's tools: bash-static,
// and jq with the packages of the libraries it loads.
var klipperHelmDebian = []string{"bash-static", "jq", "libjq1", "libonig5", "libc6", "busybox-static"}

// klipperHelmFiles are the image's files beside helm: the entry script from the snapshot,
// bash, jq and its libraries, BusyBox for the script's other tools (base64, grep, cat), and
// the user 1000 the Dockerfile adds (helm's home directory comes from /etc/passwd).
func klipperHelmFiles(b *builder) ([]imagearchive.Entry, error) {
	entry, err := tarFile(klipperHelmSnapshot, "entry")
	if err != nil {
		return nil, err
	}
	files := []imagearchive.Entry{{Name: "/usr/bin/entry", Mode: 0o755, Body: entry}}
	bash, err := os.ReadFile(bashStaticPath)
	if err != nil {
		return nil, &missingError{bashStaticPath + ": " + err.Error() + " (apt-get install bash-static; make test-setup does)"}
	}
	files = append(files, imagearchive.Entry{Name: "/bin/bash", Mode: 0o755, Body: bash})
	jq, _, err := debianFiles(context.Background(), klipperHelmDebian, "/usr/bin/jq")
	if err != nil {
		return nil, err
	}
	files = append(files, jq...)
	bb, err := busyboxFiles(b, haveFiles(append(files, imagearchive.Entry{Name: "/usr/bin/helm"})))
	if err != nil {
		return nil, err
	}
	files = append(files, bb...)
	files = append(files,
		imagearchive.Entry{Name: "/etc/passwd", Mode: 0o644, Body: []byte("root:x:0:0:root:/root:/bin/sh\nklipper-helm:x:1000:1000::/home/klipper-helm:/bin/bash\n")},
		imagearchive.Entry{Name: "/etc/group", Mode: 0o644, Body: []byte("root:x:0:\nklipper-helm:x:1000:\n")})
	return files, nil
}

// haveFiles are the paths of files, each also under its other name of a merged /usr (/bin/x
// and /usr/bin/x), so that no BusyBox link shadows a program of the image.
func haveFiles(files []imagearchive.Entry) map[string]bool {
	have := map[string]bool{}
	for _, f := range files {
		have[f.Name] = true
		if rest, ok := strings.CutPrefix(f.Name, "/usr"); ok {
			have[rest] = true
		} else {
			have["/usr"+f.Name] = true
		}
	}
	return have
}

// klipperHelmFilesDigest is the digest of the Debian files klipperHelmFiles copies (bash-static,
// BusyBox, jq and its libraries) with the packages' versions, for the program's source digest.
func klipperHelmFilesDigest(ctx context.Context) (string, error) {
	h := sha256.New()
	for _, p := range []string{bashStaticPath, busyboxPath} {
		body, err := os.ReadFile(p)
		if err != nil {
			return "", &missingError{p + ": " + err.Error() + " (apt-get install bash-static busybox-static; make test-setup does)"}
		}
		fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(body))
	}
	_, jq, err := debianFiles(ctx, klipperHelmDebian, "/usr/bin/jq")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s; bash-static and busybox sha256:%x", jq, h.Sum(nil)), nil
}
