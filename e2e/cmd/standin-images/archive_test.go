// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

var fakeProgram = []byte("\x7fELF k3strap test program bytes")

func TestArchiveHoldsEveryImageLabelled(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "images.tar")
	if err := writeArchiveOf(fakeProgram, out); err != nil {
		t.Fatal(err)
	}
	// manifest.json: one entry per image, RepoTags the references (docker save's format).
	var manifest tarball.Manifest
	if err := json.Unmarshal(tarFile(t, out, "manifest.json"), &manifest); err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, d := range manifest {
		tags = append(tags, d.RepoTags...)
	}
	for _, im := range standinImages {
		ref, err := name.NewTag(im.Ref, name.StrictValidation)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(tags, ref.String()) {
			t.Errorf("manifest.json RepoTags %v lack %s", tags, ref)
			continue
		}
		img, err := tarball.ImageFromPath(out, &ref)
		if err != nil {
			t.Fatalf("%s: %v", im.Ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, im.Entrypoint) || c.User != im.User || cf.Architecture != "amd64" || cf.OS != "linux" {
			t.Errorf("%s: entrypoint %v user %q platform %s/%s", im.Ref, c.Entrypoint, c.User, cf.OS, cf.Architecture)
		}
		if c.Labels[labelStandin] != "true" || !strings.Contains(c.Labels["org.opencontainers.image.title"], "k3strap test") {
			t.Errorf("%s: labels %v do not say it is a stand-in", im.Ref, c.Labels)
		}
		files := imageFiles(t, img)
		if !bytes.Equal(files[binaryPath], fakeProgram) {
			t.Errorf("%s: %s is not the program", im.Ref, binaryPath)
		}
		if note := string(files[noteFile]); !strings.Contains(note, "k3strap TEST") || !strings.Contains(note, im.Ref) {
			t.Errorf("%s: %s says %q", im.Ref, noteFile, note)
		}
		// The entrypoint resolves to the program, through PATH when it is bare.
		ep := im.Entrypoint[0]
		if !strings.HasPrefix(ep, "/") {
			ep = "/usr/bin/" + ep
		}
		if files["link:"+ep] == nil || string(files["link:"+ep]) != binaryPath {
			t.Errorf("%s: entrypoint %s is not a link to %s", im.Ref, ep, binaryPath)
		}
		if _, ok := applets[filepath.Base(ep)]; !ok {
			t.Errorf("%s: entrypoint %s names no applet", im.Ref, ep)
		}
	}
	if len(manifest) != len(standinImages) {
		t.Errorf("manifest.json has %d images, want %d", len(manifest), len(standinImages))
	}
}

func TestArchiveIsTheSameEveryTime(t *testing.T) {
	dir := t.TempDir()
	var sums [][]byte
	for _, n := range []string{"a.tar.zst", "b.tar.zst"} {
		p := filepath.Join(dir, n)
		if err := writeArchiveOf(fakeProgram, p); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b)
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("two archives of the same program differ")
	}
	// .tar.zst is zstd over the same docker-archive.
	zr, err := zstd.NewReader(bytes.NewReader(sums[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	names := tarNames(t, zr)
	if names[len(names)-1] != "manifest.json" || !slices.IsSorted(names[:len(names)-1]) {
		t.Errorf("entries not in order: %v", names)
	}
}

func TestArchiveRefusesOtherExtensions(t *testing.T) {
	err := writeArchiveOf(fakeProgram, filepath.Join(t.TempDir(), "images.tgz"))
	if err == nil || !strings.Contains(err.Error(), ".tar or .tar.zst") {
		t.Errorf("err = %v", err)
	}
}

func TestRequireStaticRefusesADynamicProgram(t *testing.T) {
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := imagearchive.RequireStatic(p); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("RequireStatic(%s) = %v", p, err)
		}
		return
	}
	t.Skip("no dynamically linked program on this machine to try")
}

// tarFile returns the body of entry n of the tar at p.
func tarFile(t *testing.T, p, n string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no %s (%v)", p, n, err)
		}
		if h.Name == n {
			b, _ := io.ReadAll(tr)
			return b
		}
	}
}

func tarNames(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}

// imageFiles maps every regular file of img's layers ("/path") to its body and every link
// ("link:/path") to its target.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch h.Typeflag {
			case tar.TypeReg:
				b, _ := io.ReadAll(tr)
				out["/"+h.Name] = b
			case tar.TypeSymlink:
				out["link:/"+h.Name] = []byte(h.Linkname)
			}
		}
		rc.Close()
	}
	return out
}
