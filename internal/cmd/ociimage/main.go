// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command ociimage writes k3strap's OCI image from a release's Linux binaries, offline: no
// Docker daemon, no base image pulled. GoReleaser runs it as a post hook of every build target
// (.goreleaser.yaml: builds.hooks.post, so a tagged `goreleaser release` makes it as `make
// release` does, before its checksums pipe: checksum.extra_files lists the image and
// release.extra_files uploads it). Its kos and dockers pipes would need a registry or a daemon.
//
// Each call adds one target's binary (-binary, -goos, -goarch, -goarm; a non-Linux target is
// left out) to dist/ociimage-platforms.json, then writes dist/k3strap_VERSION_oci.tar from every
// binary recorded so far, in platform order: an OCI image layout whose one entry (named VERSION)
// is an index of the linux/amd64, linux/arm64 and linux/arm/v7 images, which `skopeo copy
// oci-archive:...` or `podman load` take (docs/release.md). GoReleaser builds targets in
// parallel, so calls take a lock (a directory, dist/ociimage.lock, waited for at most
// lockWait); the last one writes the image of every Linux target.
//
// Each image is what distroless/static holds that k3strap needs, built here: /etc/passwd and
// /etc/group with root and nonroot (65532), the CA bundle of the build machine (for Rancher's
// API and other HTTPS), LICENSE and NOTICE under /usr/share/doc/k3strap, and /k3strap as
// entrypoint, run as nonroot. Every file time and the image's creation time are the commit's
// (SOURCE_DATE_EPOCH, else metadata.json's date), so the same binaries give the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is distroless's unprivileged user and group id.
const nonroot = 65532

// lockWait is the longest a call waits for another's lock: writing the image of three
// binaries takes seconds; a lock older than this is one a killed call left behind.
const lockWait = 5 * time.Minute

// target is one Linux binary recorded in dist/ociimage-platforms.json: its path relative to
// the repository root (GoReleaser's {{ .Path }}) and its platform.
type target struct {
	Path     string      `json:"path"`
	Platform v1.Platform `json:"platform"`
}

func main() {
	dist := flag.String("dist", "dist", "GoReleaser's dist directory")
	bin := flag.String("binary", "", "the target's binary (GoReleaser's {{ .Path }})")
	goos := flag.String("goos", "", "the target's GOOS ({{ .Os }}); only linux goes into the image")
	goarch := flag.String("goarch", "", "the target's GOARCH ({{ .Arch }})")
	goarm := flag.String("goarm", "", "the target's GOARM ({{ .Arm }}), for arm")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates (PEM) placed at /etc/ssl/certs/ca-certificates.crt")
	src := flag.String("src", ".", "repository root (LICENSE, NOTICE)")
	flag.Parse()
	if *bin == "" || *goos == "" || *goarch == "" {
		fmt.Fprintln(os.Stderr, "ociimage: -binary, -goos and -goarch are required (GoReleaser's post hook passes them: .goreleaser.yaml)")
		os.Exit(2)
	}
	if *goos != "linux" {
		return
	}
	p := v1.Platform{OS: "linux", Architecture: *goarch}
	if *goarm != "" {
		p.Variant = "v" + strings.TrimPrefix(*goarm, "v")
	}
	out, err := add(*dist, target{Path: *bin, Platform: p}, *caBundle, *src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
	fmt.Println("ociimage: wrote", out, "with", p.String())
}

// add records t under the lock and writes the image of every recorded target.
func add(dist string, t target, caBundle, src string) (string, error) {
	unlock, err := lock(filepath.Join(dist, "ociimage.lock"), lockWait)
	if err != nil {
		return "", err
	}
	defer unlock()
	rec := filepath.Join(dist, "ociimage-platforms.json")
	var targets []target
	if _, err := os.Stat(rec); err == nil {
		if err := readJSON(rec, &targets); err != nil {
			return "", err
		}
	}
	targets = slices.DeleteFunc(targets, func(o target) bool { return o.Platform.String() == t.Platform.String() })
	targets = append(targets, t)
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.Platform.String(), b.Platform.String()) })
	b, err := json.MarshalIndent(targets, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(rec, b, 0o644); err != nil {
		return "", err
	}
	return write(dist, targets, caBundle, src)
}

// lock takes the lock directory dir, waiting at most wait for another call to release it;
// the returned func releases it.
func lock(dir string, wait time.Duration) (func(), error) {
	deadline := time.Now().Add(wait)
	for {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return func() { _ = os.Remove(dir) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is still held after %s (a killed run leaves it: remove it, or build with --clean)", dir, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// write writes dist/k3strap_VERSION_oci.tar holding one image per target, in the order given.
func write(dist string, targets []target, caBundle, src string) (string, error) {
	var meta struct {
		Version string    `json:"version"`
		Commit  string    `json:"commit"`
		Date    time.Time `json:"date"`
	}
	if err := readJSON(filepath.Join(dist, "metadata.json"), &meta); err != nil {
		return "", err
	}
	created := meta.Date.UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		created = time.Unix(sec, 0).UTC()
	}
	base, err := baseLayer(caBundle, src, created)
	if err != nil {
		return "", err
	}
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, t := range targets {
		bin, err := os.ReadFile(t.Path)
		if err != nil {
			return "", err
		}
		p := t.Platform
		img, err := image(base, bin, p, meta.Version, created)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.title":    "k3strap",
		"org.opencontainers.image.version":  meta.Version,
		"org.opencontainers.image.revision": meta.Commit,
		"org.opencontainers.image.source":   "https://github.com/k3strap/k3strap",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
	}).(v1.ImageIndex)

	dir := filepath.Join(dist, "k3strap_"+meta.Version+"_oci")
	_ = os.RemoveAll(dir)
	// index.json names one entry, the multi-platform index, tagged with the version
	// (ref.name): tools that take a layout (skopeo, podman) want one image or a named one.
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": meta.Version})); err != nil {
		return "", err
	}
	out := dir + ".tar"
	// Written aside and renamed: a reader (the checksums pipe) never sees half an archive.
	if err := tarDir(dir, out+".part", created); err != nil {
		return "", err
	}
	if err := os.Rename(out+".part", out); err != nil {
		return "", err
	}
	return out, os.RemoveAll(dir)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w (GoReleaser writes it: make release)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// image is one platform's image: the base layer, then /k3strap.
func image(base v1.Layer, bin []byte, p v1.Platform, version string, created time.Time) (v1.Image, error) {
	top, err := layer(created, file{"k3strap", bin, 0o755})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "k3strap ociimage: passwd, group, CA bundle, LICENSE, NOTICE"}},
		mutate.Addendum{Layer: top, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "k3strap ociimage: /k3strap " + version}})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{"/k3strap"}
	cf.Config.User = strconv.Itoa(nonroot) + ":" + strconv.Itoa(nonroot)
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{"PATH=/", "HOME=/home/nonroot", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.version": version, "org.opencontainers.image.licenses": "Apache-2.0"}
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	data []byte
	mode int64
}

// baseLayer holds what distroless/static gives a static binary.
func baseLayer(caBundle, src string, created time.Time) (v1.Layer, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle for the image: %w (install ca-certificates, or -ca-bundle FILE)", err)
	}
	license, err := os.ReadFile(filepath.Join(src, "LICENSE"))
	if err != nil {
		return nil, err
	}
	notice, err := os.ReadFile(filepath.Join(src, "NOTICE"))
	if err != nil {
		return nil, err
	}
	return layer(created,
		file{"etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644},
		file{"etc/group", []byte("root:x:0:\nnonroot:x:65532:\n"), 0o644},
		file{"etc/ssl/certs/ca-certificates.crt", ca, 0o644},
		file{"home/nonroot/", nil, 0o700},
		file{"tmp/", nil, 0o1777},
		file{"usr/share/doc/k3strap/LICENSE", license, 0o644},
		file{"usr/share/doc/k3strap/NOTICE", notice, 0o644})
}

// layer is a tar of files (a name ending in / is a directory),
// with parent directories, every time set to created.
func layer(created time.Time, files ...file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(filepath.Clean(f.name)); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Parents first, in path order, then the entries.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: created, Format: tar.FormatPAX}
		if f.name[len(f.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
			if f.name == "home/nonroot/" {
				h.Uid, h.Gid = nonroot, nonroot
			}
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// tarDir writes the OCI layout in dir as one tar (an oci-archive), entries in path order, every
// time set to created.
func tarDir(dir, out string, created time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX})
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(b)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
