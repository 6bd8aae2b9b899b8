// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package imagearchive writes container images into a K3s airgap images archive, for the
// end-to-end tests' image builders (e2e/cmd/standin-images, e2e/cmd/mkimages): a docker-archive
// tar (manifest.json with RepoTags, as `docker save` writes and containerd imports),
// zstd-compressed when its name ends in .tar.zst like K3s's own k3s-airgap-images-<arch>.tar.zst.
// K3s imports every file of /var/lib/rancher/k3s/agent/images/ by its extension (rancher/wharfie
// pkg/tarfile); docs/testing-stand-ins.md says how the tests use the archives.
//
// Everything is dated Epoch and written in name order, so the same images give the same
// archive byte for byte: its sha256 is stable and an unchanged re-run of apply uploads nothing.
package imagearchive

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

// Epoch is the fixed time of every file, history entry and image config.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Entry is one file, directory (Name ends in /) or symbolic link (Link set) of a layer; Name
// is an absolute path in the image, Mode its permission bits.
type Entry struct {
	Name string
	Mode int64
	Body []byte
	Link string
}

// Layer makes an uncompressed layer (as `docker save` stores them; the archive as a whole is
// compressed) of entries in the given order, owned by root, dated Epoch. It fails on an entry
// naming the root.
func Layer(entries []Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: strings.TrimPrefix(e.Name, "/"), Mode: e.Mode, ModTime: Epoch, Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(e.Name, "/"):
			h.Typeflag = tar.TypeDir
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Body))
		}
		if path.Clean("/"+h.Name) == "/" {
			return nil, errors.New("empty layer entry name")
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer), nil
}

// Step is one layer of an image with the history line that says how it was made.
type Step struct {
	Layer     v1.Layer
	CreatedBy string
	Comment   string
}

// Image makes a linux/amd64 image of steps with the configuration cfg, author and every time
// Epoch.
func Image(steps []Step, cfg v1.Config, author string) (v1.Image, error) {
	adds := make([]mutate.Addendum, 0, len(steps))
	for _, s := range steps {
		adds = append(adds, mutate.Addendum{Layer: s.Layer, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: s.CreatedBy, Comment: s.Comment}})
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = "amd64", "linux", v1.Time{Time: Epoch}
	cf.Author = author
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// Write writes images (keyed by their full reference, e.g.
// docker.io/rancher/mirrored-pause:3.10.2) into the archive out, which must end in .tar or
// .tar.zst; it writes a temporary file beside out and renames it, so a failed run leaves no
// half archive.
func Write(out string, images map[string]v1.Image) error {
	if !strings.HasSuffix(out, ".tar") && !strings.HasSuffix(out, ".tar.zst") {
		return fmt.Errorf("%s: name the archive .tar or .tar.zst (K3s imports by extension)", out)
	}
	refs := map[name.Reference]v1.Image{}
	for r, img := range images {
		ref, err := name.ParseReference(r, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("image %s: %w", r, err)
		}
		refs[ref] = img
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

// RequireStatic fails unless the ELF file p has no program interpreter: the images have no
// libc, so a dynamically linked build would fail only inside the pods. The error says
// "dynamically linked" and how to build it (CGO_ENABLED=0).
func RequireStatic(p string) error {
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
