// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/e2e/cmd/internal/imagearchive"
)

// fakeProgram "builds" by copying a static program of this machine, counting its builds.
type fakeProgram struct {
	digest string
	builds *int
}

func (f fakeProgram) source(context.Context, *builder) (built, error) {
	return built{Digest: f.digest, Recipe: "copy"}, nil
}

func (f fakeProgram) build(_ context.Context, _ *builder, _ built, out string) error {
	*f.builds++
	return os.WriteFile(out, staticELF(), 0o755)
}

// staticELF is a minimal static ELF header (no program headers, so no interpreter).
func staticELF() []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	b[16], b[18], b[20] = 2, 0x3e, 1 // ET_EXEC, x86-64, version 1
	b[52] = 64                       // e_ehsize
	return b
}

func TestCacheKeyedBySourceDigest(t *testing.T) {
	dir := t.TempDir()
	b := &builder{cacheDir: dir, log: io.Discard}
	n := 0
	im := realImage{Ref: "docker.io/example/x:1", Path: "/x", Program: fakeProgram{"sha256:one", &n}}
	for range 2 {
		p, err := b.program(context.Background(), im)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Bin) != 64 {
			t.Fatalf("program of %d bytes", len(p.Bin))
		}
	}
	if n != 1 {
		t.Errorf("built %d times for one source digest, want 1 (the second from the cache)", n)
	}
	im.Program = fakeProgram{"sha256:two", &n}
	p, err := b.program(context.Background(), im)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || p.Cached {
		t.Errorf("a new source digest: built %d times, cached %v; want a second build", n, p.Cached)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 2 {
		t.Errorf("cache holds %v, want two programs", files)
	}
}

func TestRequireStaticRefusesADynamicProgram(t *testing.T) {
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := imagearchive.RequireStatic(p); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("RequireStatic(%s) = %v", p, err)
		}
	}
}

func TestDirsOf(t *testing.T) {
	got := dirsOf([]string{"/usr/bin/local-path-provisioner", "/tmp/-", "/pause", "/usr/sbin/x"})
	want := []string{"/tmp/", "/usr/", "/usr/bin/", "/usr/sbin/"}
	if !slices.Equal(got, want) {
		t.Errorf("dirsOf = %v, want %v", got, want)
	}
}

// TestBusyboxImage builds the busybox image from Debian's busybox-static (skipping without it)
// and checks its layer and labels: /bin/sh links to the program, /tmp is world-writable.
func TestBusyboxImage(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err != nil {
		t.Skip("Debian's busybox-static is not installed (make setup installs it)")
	}
	var im realImage
	for _, i := range realImages {
		if strings.Contains(i.Ref, "busybox") {
			im = i
		}
	}
	b := &builder{log: io.Discard}
	p, err := b.program(context.Background(), im)
	if err != nil {
		t.Fatal(err)
	}
	img, err := b.image(im, p)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	l := cf.Config.Labels
	if l[labelBuiltBy] != "k3strap e2e/cmd/mkimages" || !strings.HasPrefix(l[labelSourceDigest], "Debian busybox-static ") ||
		!strings.Contains(l["org.opencontainers.image.version"], "busybox-static") {
		t.Errorf("labels %v", l)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
	}
	if h := seen["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != busyboxPath {
		t.Errorf("bin/sh: %+v, want a link to %s", h, busyboxPath)
	}
	if h := seen["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want mode 1777", h)
	}
	if h := seen["bin/busybox"]; h == nil || h.Size != int64(len(p.Bin)) {
		t.Errorf("bin/busybox: %+v", h)
	}
}

// TestLocalPathProxyReleaseLabelled: the local-path-provisioner image built from the module
// proxy keeps K3s's reference but says, in its labels, the release it holds and why.
func TestLocalPathProxyReleaseLabelled(t *testing.T) {
	var im realImage
	for _, i := range realImages {
		if strings.Contains(i.Ref, "local-path-provisioner") {
			im = i
		}
	}
	if im.Ref != "docker.io/rancher/local-path-provisioner:"+localPathTag {
		t.Fatalf("local-path-provisioner's reference %q, want K3s's (tag %s)", im.Ref, localPathTag)
	}
	for _, tc := range []struct {
		p        built
		version  string
		describe string
	}{
		{built{Version: localPathProxyVersion, Note: localPathProxyNote}, "v0.0.30", "Release v0.0.30, not v0.0.36 as the reference says: built from the Go module proxy, which refuses v0.0.36 (403)"},
		{built{Version: localPathTag}, "v0.0.36", "The real Rancher local-path-provisioner v0.0.36, built"},
	} {
		l := im.config(tc.p).Labels
		if l["org.opencontainers.image.version"] != tc.version || !strings.HasSuffix(l["org.opencontainers.image.title"], " "+tc.version) {
			t.Errorf("version %q, title %q, want %s", l["org.opencontainers.image.version"], l["org.opencontainers.image.title"], tc.version)
		}
		if d := l["org.opencontainers.image.description"]; !strings.Contains(d, tc.describe) {
			t.Errorf("description %q does not say %q", d, tc.describe)
		}
	}
}
