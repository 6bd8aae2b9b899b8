// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// recipeVersion changes whenever a recipe below changes, so cached programs of the old
// recipe are not reused.
const recipeVersion = "1"

// builder builds the real images' programs, caching each in cacheDir (when set) under a key
// of its source digest and recipe.
type builder struct {
	cacheDir     string
	localPathSrc string
	// sucSrc is a git directory of system-upgrade-controller, k3sBinary a K3s binary (for
	// sucImages).
	sucSrc, k3sBinary string
	log               io.Writer
}

// program is how one image's program is made.
type program interface {
	// source identifies the source without building: its digest (a module's go.sum hash, a
	// git commit, a file's sha256), the version when the image does not pin one, and the
	// recipe, for the cache key and the image's labels. It returns a *missingError when an
	// input is not on this machine.
	source(ctx context.Context, b *builder) (built, error)
	// build writes the program to out.
	build(ctx context.Context, b *builder, s built, out string) error
}

// built is a program's source identity and, once built, its bytes.
type built struct {
	Digest, Version, Recipe string
	// Note is added to the image's description: why the release built is not the one the
	// image reference names (empty when it is).
	Note    string
	Bin     []byte
	Seconds float64
	Cached  bool
}

// missingError is a build input that is not on this machine; the message says how to get it.
type missingError struct{ msg string }

func (e *missingError) Error() string { return e.msg }

// writeArchive builds (or takes from the cache) the program of every image of list (realImages
// or sucImages) and writes the images into the archive out.
func (b *builder) writeArchive(ctx context.Context, out string, list []realImage) error {
	images := map[string]v1.Image{}
	for _, im := range list {
		p, err := b.program(ctx, im)
		if err != nil {
			return fmt.Errorf("%s: %w", im.Ref, err)
		}
		how := "built in " + fmt.Sprintf("%.1f s", p.Seconds)
		if p.Cached {
			how = "from the cache"
		}
		fmt.Fprintf(b.log, "mkimages: %s: %s, %d bytes, %s\n", im.Ref, p.Recipe, len(p.Bin), how)
		img, err := b.image(im, p)
		if err != nil {
			return fmt.Errorf("%s: %w", im.Ref, err)
		}
		images[im.Ref] = img
	}
	return imagearchive.Write(out, images)
}

// image makes im's image of its program p: one layer with the program, its links, its other
// files and directories.
func (b *builder) image(im realImage, p built) (v1.Image, error) {
	var links []string
	if im.Links != nil {
		var err error
		if links, err = im.Links(b); err != nil {
			return nil, err
		}
	}
	var files []imagearchive.Entry
	if im.Files != nil {
		var err error
		if files, err = im.Files(b); err != nil {
			return nil, err
		}
	}
	paths := append([]string{im.Path}, links...)
	for _, f := range files {
		paths = append(paths, f.Name)
	}
	for _, d := range im.Dirs {
		paths = append(paths, d+"-") // a name inside d, so that dirsOf lists d and its parents
	}
	var entries []imagearchive.Entry
	for _, d := range dirsOf(paths) {
		mode := int64(0o755)
		if d == "/tmp/" {
			mode = 0o1777
		}
		entries = append(entries, imagearchive.Entry{Name: d, Mode: mode})
	}
	entries = append(entries, imagearchive.Entry{Name: im.Path, Mode: 0o755, Body: p.Bin})
	for _, l := range links {
		entries = append(entries, imagearchive.Entry{Name: l, Link: im.Path})
	}
	entries = append(entries, files...)
	layer, err := imagearchive.Layer(entries)
	if err != nil {
		return nil, err
	}
	return imagearchive.Image([]imagearchive.Step{{Layer: layer, CreatedBy: "k3strap e2e/cmd/mkimages: " + p.Recipe, Comment: "built from upstream source " + p.Digest}},
		im.config(p), "k3strap e2e (built from upstream source)")
}

// program returns im's program from the cache, or builds it (and caches it).
func (b *builder) program(ctx context.Context, im realImage) (built, error) {
	s, err := im.Program.source(ctx, b)
	if err != nil {
		return s, err
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{recipeVersion, runtime.Version(), im.Ref, s.Digest, s.Recipe}, "\n")))
	key := hex.EncodeToString(sum[:])[:20]
	var cached string
	if b.cacheDir != "" {
		cached = filepath.Join(b.cacheDir, filepath.Base(im.Path)+"-"+key)
		if bin, err := os.ReadFile(cached); err == nil {
			s.Bin, s.Cached = bin, true
			return s, nil
		}
	}
	tmp, err := os.MkdirTemp("", "mkimages-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, filepath.Base(im.Path))
	start := time.Now()
	if err := im.Program.build(ctx, b, s, out); err != nil {
		return s, err
	}
	s.Seconds = time.Since(start).Seconds()
	if err := imagearchive.RequireStatic(out); err != nil {
		return s, err
	}
	if s.Bin, err = os.ReadFile(out); err != nil {
		return s, err
	}
	if cached != "" {
		if err := os.MkdirAll(b.cacheDir, 0o755); err != nil {
			return s, err
		}
		// A temporary file renamed into place: harness instances share the cache.
		f, err := os.CreateTemp(b.cacheDir, ".tmp-")
		if err != nil {
			return s, err
		}
		_, werr := f.Write(s.Bin)
		if werr == nil {
			werr = f.Chmod(0o644)
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(f.Name(), cached)
		}
		if werr != nil {
			os.Remove(f.Name())
			return s, werr
		}
	}
	return s, nil
}

// run runs a command in dir with env added, failing with its output.
func run(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), context.Cause(ctx))
		}
		return nil, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 30))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// goEnv is the environment of every Go build: static, and no module of the current directory.
var goEnv = []string{"CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off", "GO111MODULE=on"}

// moduleDownload is `go mod download -json MODULE@VERSION`: the module's directory in the
// module cache and its go.sum hash (checked against the checksum database by the go command).
func moduleDownload(ctx context.Context, module, version string) (dir, sum string, err error) {
	tmp, err := os.MkdirTemp("", "mkimages-mod-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	out, err := run(ctx, tmp, goEnv, "go", "mod", "download", "-json", module+"@"+version)
	if err != nil {
		return "", "", err
	}
	var m struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if m.Error != "" || m.Dir == "" || m.Sum == "" {
		return "", "", fmt.Errorf("go mod download %s@%s: %s", module, version, m.Error)
	}
	return m.Dir, m.Sum, nil
}

// goInstall builds a Go program with `go install PACKAGE@VERSION` (the module's own go.mod
// and go.sum, modules through the module proxy).
type goInstall struct{ Module, Version, Package, LDFlags string }

func (g goInstall) source(ctx context.Context, _ *builder) (built, error) {
	_, sum, err := moduleDownload(ctx, g.Module, g.Version)
	if err != nil {
		return built{}, err
	}
	return built{Digest: g.Module + "@" + g.Version + " " + sum,
		Recipe: fmt.Sprintf("CGO_ENABLED=0 go install -trimpath -ldflags %q %s@%s (%s)", g.LDFlags, g.Package, g.Version, runtime.Version())}, nil
}

func (g goInstall) build(ctx context.Context, _ *builder, _ built, out string) error {
	gobin := filepath.Dir(out)
	if _, err := run(ctx, gobin, append(goEnv, "GOBIN="+gobin), "go", "install", "-trimpath", "-ldflags", g.LDFlags, g.Package+"@"+g.Version); err != nil {
		return err
	}
	if name := filepath.Base(g.Package); name != filepath.Base(out) {
		return os.Rename(filepath.Join(gobin, name), out)
	}
	return nil
}

// pauseProgram compiles Kubernetes' pause.c (build/pause/linux of the Kubernetes release K3s
// is built on, from the module proxy) as its Makefile does: gcc -Os -Wall -Werror -static,
// then strip.
type pauseProgram struct{}

var pauseTagRe = regexp.MustCompile(`(?m)^TAG \?= (\S+)$`)

func (pauseProgram) source(ctx context.Context, _ *builder) (built, error) {
	dir, sum, err := moduleDownload(ctx, kubernetesModule, kubernetesVersion)
	if err != nil {
		return built{}, err
	}
	mk, err := os.ReadFile(filepath.Join(dir, "build/pause/Makefile"))
	if err != nil {
		return built{}, err
	}
	if m := pauseTagRe.FindSubmatch(mk); m == nil || string(m[1]) != pauseTag {
		return built{}, fmt.Errorf("%s@%s build/pause/Makefile: TAG is not %s", kubernetesModule, kubernetesVersion, pauseTag)
	}
	src, err := os.ReadFile(filepath.Join(dir, "build/pause/linux/pause.c"))
	if err != nil {
		return built{}, err
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		return built{}, &missingError{"gcc not found: install Debian's gcc and libc6-dev (make setup does)"}
	}
	cc, _ := run(ctx, "/", nil, "gcc", "-dumpfullversion")
	h := sha256.Sum256(src)
	return built{Digest: fmt.Sprintf("%s@%s %s build/pause/linux/pause.c sha256:%x", kubernetesModule, kubernetesVersion, sum, h),
		Recipe: fmt.Sprintf("gcc %s -Os -Wall -Werror -static -DVERSION=v%s-%s pause.c; strip", strings.TrimSpace(string(cc)), pauseTag, kubernetesVersion)}, nil
}

func (pauseProgram) build(ctx context.Context, _ *builder, _ built, out string) error {
	dir, _, err := moduleDownload(ctx, kubernetesModule, kubernetesVersion)
	if err != nil {
		return err
	}
	_, err = run(ctx, filepath.Dir(out), nil, "gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v"+pauseTag+"-"+kubernetesVersion,
		"-o", out, filepath.Join(dir, "build/pause/linux/pause.c"))
	if err != nil {
		return err
	}
	_, err = run(ctx, filepath.Dir(out), nil, "strip", out)
	return err
}

// localPathProgram builds local-path-provisioner: release localPathTag (the one K3s names)
// from a git directory of its repository when one is given (b.localPathSrc), with the vendor/
// directory the release carries, as its scripts/build does; otherwise release
// localPathProxyVersion from the Go module proxy, which refuses localPathTag, with
// `go install` (the module's go.mod and go.sum; a module zip holds no vendor/), and the
// image's labels say so (localPathProxyNote).
type localPathProgram struct{}

// localPathProxyNote ends the description of the image of localPathProxyVersion.
const localPathProxyNote = " Release " + localPathProxyVersion + ", not " + localPathTag + " as the reference says: built from the Go module proxy, which refuses " + localPathTag + " (403); set LOCAL_PATH_PROVISIONER_SRC to a git directory of the repository to build " + localPathTag + "."

// localPathProxy is the build of localPathProxyVersion from the module proxy.
func localPathProxy() goInstall {
	return goInstall{Module: localPathModule, Version: localPathProxyVersion, Package: localPathModule,
		LDFlags: "-X main.VERSION=" + localPathProxyVersion + " -s -w"}
}

func (localPathProgram) source(ctx context.Context, b *builder) (built, error) {
	if b.localPathSrc == "" {
		s, err := localPathProxy().source(ctx, b)
		s.Version, s.Note = localPathProxyVersion, localPathProxyNote
		return s, err
	}
	out, err := run(ctx, "/", nil, "git", "--git-dir="+b.localPathSrc, "rev-parse", localPathTag+"^{commit}")
	if err != nil {
		return built{}, &missingError{fmt.Sprintf("%s: tag %s not found: %v", b.localPathSrc, localPathTag, err)}
	}
	if c := strings.TrimSpace(string(out)); c != localPathCommit {
		return built{}, fmt.Errorf("%s: tag %s is commit %s, not %s", b.localPathSrc, localPathTag, c, localPathCommit)
	}
	return built{Digest: localPathModule + "@" + localPathTag + " commit " + localPathCommit, Version: localPathTag,
		Recipe: fmt.Sprintf("git archive %s; CGO_ENABLED=0 go build -mod=vendor -trimpath -ldflags \"-X main.VERSION=%s -s -w\" (%s)", localPathTag, localPathTag, runtime.Version())}, nil
}

func (localPathProgram) build(ctx context.Context, b *builder, s built, out string) error {
	if b.localPathSrc == "" {
		return localPathProxy().build(ctx, b, s, out)
	}
	src := filepath.Join(filepath.Dir(out), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if _, err := run(ctx, "/", nil, "sh", "-c", `git --git-dir="$1" archive "$2" | tar -x -C "$3"`, "sh", b.localPathSrc, localPathCommit, src); err != nil {
		return err
	}
	_, err := run(ctx, src, goEnv, "go", "build", "-mod=vendor", "-trimpath", "-ldflags", "-X main.VERSION="+localPathTag+" -s -w", "-o", out, ".")
	return err
}

// busyboxProgram is Debian's busybox-static (a static build of BusyBox) as installed here.
type busyboxProgram struct{}

// busyboxPath is where Debian's busybox-static installs the program.
const busyboxPath = "/bin/busybox"

func (busyboxProgram) source(ctx context.Context, _ *builder) (built, error) {
	ver, err := run(ctx, "/", nil, "dpkg-query", "-W", "-f=${Version}", "busybox-static")
	if err != nil || len(ver) == 0 {
		return built{}, &missingError{"Debian's busybox-static is not installed: apt-get install busybox-static (make setup does)"}
	}
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return built{}, &missingError{busyboxPath + ": " + err.Error() + " (apt-get install busybox-static)"}
	}
	h := sha256.Sum256(bin)
	return built{Digest: fmt.Sprintf("Debian busybox-static %s sha256:%x", ver, h), Version: "Debian busybox-static " + string(ver),
		Recipe: "Debian package busybox-static " + string(ver) + ", " + busyboxPath + " copied"}, nil
}

func (busyboxProgram) build(_ context.Context, _ *builder, _ built, out string) error {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return err
	}
	return os.WriteFile(out, bin, 0o755)
}

// busyboxLinks are the applets Debian's busybox-static lists, each a link to it, as in the
// busybox images (appletLinks).
func busyboxLinks(*builder) ([]string, error) { return appletLinks(busyboxPath) }

// appletLinks are the applets the BusyBox program bin lists (`bin --list-full`), as absolute
// paths, without /bin/busybox itself.
func appletLinks(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", bin, err)
	}
	var links []string
	for _, l := range strings.Fields(string(out)) {
		if p := "/" + strings.TrimPrefix(l, "/"); p != busyboxPath {
			links = append(links, p)
		}
	}
	return links, nil
}

// appletEntries are a link to /bin/busybox for each of links whose path is not in have (a path
// the image holds another program at).
func appletEntries(links []string, have map[string]bool) []imagearchive.Entry {
	var files []imagearchive.Entry
	for _, l := range links {
		if !have[l] {
			files = append(files, imagearchive.Entry{Name: l, Link: busyboxPath})
		}
	}
	return files
}
