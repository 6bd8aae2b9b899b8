// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestAddConcurrent: GoReleaser's post hooks of the Linux targets run at once; whatever their
// order, once all have returned the archive holds one image per platform, in platform order,
// each with that platform's binary at /k3strap — and the lock is released.
func TestAddConcurrent(t *testing.T) {
	dist, src := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dist, "metadata.json"), `{"version":"1.2.3","commit":"abc","date":"2026-01-02T03:04:05Z"}`)
	write(filepath.Join(src, "LICENSE"), "license\n")
	write(filepath.Join(src, "NOTICE"), "notice\n")
	ca := filepath.Join(src, "ca.pem")
	write(ca, "not a real bundle\n")
	targets := []target{
		{Path: filepath.Join(dist, "arm64"), Platform: v1.Platform{OS: "linux", Architecture: "arm64"}},
		{Path: filepath.Join(dist, "amd64"), Platform: v1.Platform{OS: "linux", Architecture: "amd64"}},
		{Path: filepath.Join(dist, "armv7"), Platform: v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
	}
	for _, tg := range targets {
		write(tg.Path, "binary for "+tg.Platform.String())
	}
	var wg sync.WaitGroup
	errs := make([]error, len(targets))
	for i, tg := range targets {
		wg.Go(func() { _, errs[i] = add(dist, tg, ca, src) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dist, "ociimage.lock")); !os.IsNotExist(err) {
		t.Errorf("the lock is still there: %v", err)
	}
	root := t.TempDir()
	untar(t, filepath.Join(dist, "k3strap_1.2.3_oci.tar"), root)
	top, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d entries", err, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"linux/amd64", "linux/arm/v7", "linux/arm64"}
	if len(im.Manifests) != len(want) {
		t.Fatalf("%d images, want %v", len(im.Manifests), want)
	}
	for i, d := range im.Manifests {
		if got := d.Platform.String(); got != want[i] {
			t.Errorf("image %d is %s, want %s", i, got, want[i])
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(mutate.Extract(img))
		found := false
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == "k3strap" {
				b, _ := io.ReadAll(tr)
				found = bytes.Equal(b, []byte("binary for "+want[i]))
			}
		}
		if !found {
			t.Errorf("image %s has not its platform's binary at /k3strap", want[i])
		}
	}
}

// TestLockWaits: a held lock makes lock wait, and give up with an error naming the lock after
// its deadline.
func TestLockWaits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ociimage.lock")
	unlock, err := lock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock(dir, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a held lock: %v, want an error naming %s", err, dir)
	}
	unlock()
	unlock2, err := lock(dir, time.Second)
	if err != nil {
		t.Fatalf("a released lock: %v", err)
	}
	unlock2()
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
