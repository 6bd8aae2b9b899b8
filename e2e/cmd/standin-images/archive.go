// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

// epoch is the fixed time of every file and image: the same program gives the same archive,
// byte for byte, so its sha256 is stable and an unchanged re-run of apply uploads nothing.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Labels every image carries (OCI annotation keys, docs: github.com/opencontainers/image-spec
// annotations.md) plus k3strap's own.
const (
	labelStandin    = "io.k3strap.test-standin"
	labelStandinFor = "io.k3strap.test-standin.for"
)

// writeArchive writes every image of standinImages, made of this program, into a K3s airgap
// images archive at out: a docker-archive tar (manifest.json with RepoTags, as `docker save`
// writes and containerd imports), zstd-compressed when out ends in .tar.zst like K3s's own
// k3s-airgap-images-<arch>.tar.zst. It refuses a program that is not statically linked.
func writeArchive(out string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := requireStatic(self); err != nil {
		return err
	}
	return writeArchiveOf(bin, out)
}

// writeArchiveOf writes the archive at out with bin as the program of every image.
func writeArchiveOf(bin []byte, out string) error {
	if !strings.HasSuffix(out, ".tar") && !strings.HasSuffix(out, ".tar.zst") {
		return fmt.Errorf("%s: name the archive .tar or .tar.zst (K3s imports by extension)", out)
	}
	refs, err := buildImages(bin)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	var w io.Writer = f
	var zw *zstd.Encoder
	if strings.HasSuffix(out, ".tar.zst") {
		// A 4 MiB window, as the zstd CLI uses: K3s's decoder refuses windows over 32 MiB
		// (rancher/wharfie pkg/tarfile MaxDecoderMemory).
		if zw, err = zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithWindowSize(4<<20)); err != nil {
			f.Close()
			return err
		}
		w = zw
	}
	var docker bytes.Buffer
	if err := tarball.MultiRefWrite(refs, &docker); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := sortTar(&docker, w); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// sortTar copies the tar in to w with its entries in name order and manifest.json last: the
// docker-archive writer emits images in map order, and the archive must not change from run
// to run.
func sortTar(in io.Reader, w io.Writer) error {
	type entry struct {
		hdr  *tar.Header
		body []byte
	}
	var entries []entry
	tr := tar.NewReader(in)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		entries = append(entries, entry{h, b})
	}
	key := func(e entry) string {
		if e.hdr.Name == "manifest.json" {
			return "\xff"
		}
		return e.hdr.Name
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(key(a), key(b)) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := tw.WriteHeader(e.hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// requireStatic fails unless the ELF file p has no program interpreter: the images have no
// libc, so a dynamically linked build would fail only inside the pods.
func requireStatic(p string) error {
	ef, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer ef.Close()
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0", p)
		}
	}
	return nil
}

// buildImages makes every image from bin: a layer shared by all (the program, its applet
// links, /tmp) and a small layer of the image's own note file.
func buildImages(bin []byte) (map[name.Reference]v1.Image, error) {
	shared, err := sharedLayer(bin)
	if err != nil {
		return nil, err
	}
	refs := map[name.Reference]v1.Image{}
	for _, im := range standinImages {
		ref, err := name.ParseReference(im.Ref, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Ref, err)
		}
		note, err := tarLayer([]tarEntry{{name: noteFile, mode: 0o444, body: []byte(im.note())}})
		if err != nil {
			return nil, err
		}
		img, err := mutate.Append(empty.Image,
			mutate.Addendum{Layer: shared, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "k3strap standin-images: the stand-in program " + binaryPath, Comment: "k3strap test stand-in"}},
			mutate.Addendum{Layer: note, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "k3strap standin-images: " + noteFile, Comment: "k3strap test stand-in"}})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Architecture, cf.OS, cf.Created = "amd64", "linux", v1.Time{Time: epoch}
		cf.Author = "k3strap e2e (test stand-in)"
		cf.Config = v1.Config{
			Entrypoint: im.Entrypoint,
			User:       im.User,
			Env:        []string{imagePath},
			WorkingDir: "/",
			Labels:     im.labels(),
		}
		if len(im.Ports) > 0 {
			cf.Config.ExposedPorts = map[string]struct{}{}
			for _, p := range im.Ports {
				cf.Config.ExposedPorts[p] = struct{}{}
			}
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		refs[ref] = img
	}
	return refs, nil
}

// labels are the image's OCI labels: what it is, and that it is a stand-in.
func (im standinImage) labels() map[string]string {
	title, desc := "k3strap test stand-in for "+im.Ref,
		"NOT "+im.Component+": a k3strap end-to-end test stand-in that behaves like it only where k3strap and Kubernetes look. See "+noteFile+"."
	if im.Workload {
		title, desc = "k3strap test workload "+im.Ref, "A k3strap end-to-end test workload: "+im.Component+". No real image has this name. See "+noteFile+"."
	}
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": desc,
		"org.opencontainers.image.vendor":      "k3strap (test stand-in)",
		"org.opencontainers.image.ref.name":    im.Ref,
		labelStandin:                           "true",
		labelStandinFor:                        im.Component,
	}
}

// note is the text of the image's noteFile.
func (im standinImage) note() string {
	head := "THIS IMAGE IS A k3strap TEST STAND-IN, NOT THE REAL COMPONENT."
	if im.Workload {
		head = "THIS IMAGE IS A k3strap TEST WORKLOAD; NO REAL IMAGE HAS THIS NAME."
	}
	return fmt.Sprintf(`%s

reference:     %s
stands in for: %s
named by:      %s

It holds one static Go program (%s, k3strap's e2e/cmd/standin-images) that plays this
image only as far as k3strap's end-to-end tests and Kubernetes look (probes, ports, discovery,
DNS). It exists because the test machines cannot pull container images. Never run it in a
real cluster.
`, head, im.Ref, im.Component, im.Source, binaryPath)
}

// sharedLayer is the layer of every image: the program at binaryPath, the applet links to it,
// and a world-writable /tmp.
func sharedLayer(bin []byte) (v1.Layer, error) {
	entries := []tarEntry{
		{name: "/bin/", mode: 0o755}, {name: "/usr/", mode: 0o755}, {name: "/usr/bin/", mode: 0o755},
		{name: "/etc/", mode: 0o755}, {name: "/tmp/", mode: 0o1777},
		{name: binaryPath, mode: 0o755, body: bin},
	}
	for _, l := range appletLinks {
		entries = append(entries, tarEntry{name: l, link: binaryPath})
	}
	return tarLayer(entries)
}

// tarEntry is one file, directory (name ends in /) or symbolic link (link set) of a layer.
type tarEntry struct {
	name string
	mode int64
	body []byte
	link string
}

// tarLayer makes an uncompressed layer (as `docker save` stores them; the archive as a whole
// is compressed) of entries, owned by root, dated epoch.
func tarLayer(entries []tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: strings.TrimPrefix(e.name, "/"), Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if path.Clean("/"+h.Name) == "/" {
			return nil, errors.New("empty layer entry name")
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer), nil
}
