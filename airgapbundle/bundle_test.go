// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package airgapbundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// fixture writes an amd64 binary, images archive and checksums file plus an install script
// and returns their sources.
func fixture(t *testing.T) (string, []Source) {
	t.Helper()
	dir := t.TempDir()
	bin := []byte("#!/bin/sh\necho k3s version v1.36.3+k3s1\n")
	img := bytes.Repeat([]byte("image-layer "), 5000)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sums := fmt.Sprintf("%s  k3s\n%s  k3s-airgap-images-amd64.tar.zst\n", sha(bin), sha(img))
	return dir, []Source{
		{Local: write("k3s", bin), File: File{Role: RoleBinary, Arch: "amd64", Field: "spec.k3s.airgap.amd64.binary", Path: "amd64/k3s"}},
		{Local: write("k3s-airgap-images-amd64.tar.zst", img), File: File{Role: RoleImages, Arch: "amd64", Field: "spec.k3s.airgap.amd64.images", Path: "amd64/k3s-airgap-images-amd64.tar.zst"}},
		{Local: write("sha256sum-amd64.txt", []byte(sums)), File: File{Role: RoleChecksums, Arch: "amd64", Field: "spec.k3s.airgap.amd64.checksums", Path: "amd64/sha256sum-amd64.txt"}},
		{Local: write("install.sh", []byte("#!/bin/sh\n")), File: File{Role: RoleInstallScript, Field: "spec.k3s.airgapInstallScript", Path: "install.sh"}},
	}
}

func TestRoundTrip(t *testing.T) {
	dir, srcs := fixture(t)
	out := filepath.Join(dir, "site.tar")
	m, err := Write(out, Manifest{Cluster: "edge", K3sVersion: "v1.36.3+k3s1", Generator: "k3strap test"}, srcs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("bundle mode %v, want 0644", st.Mode().Perm())
	}
	if m.FormatVersion != FormatVersion || m.Cluster != "edge" || m.K3sVersion != "v1.36.3+k3s1" || len(m.Files) != 4 {
		t.Fatalf("manifest %+v", m)
	}
	if got := m.Architectures(); len(got) != 1 || got[0] != "amd64" {
		t.Errorf("architectures %v", got)
	}

	// manifest.json is the tar's first entry and lists role, architecture, path, size, sha256.
	f, _ := os.Open(out)
	tr := tar.NewReader(f)
	h, err := tr.Next()
	if err != nil || h.Name != ManifestName || h.Mode != 0o644 {
		t.Fatalf("first entry %+v %v", h, err)
	}
	var raw map[string]any
	if err := json.NewDecoder(tr).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	f.Close()
	files := raw["files"].([]any)
	first := files[0].(map[string]any)
	for _, k := range []string{"role", "architecture", "field", "path", "size", "sha256"} {
		if _, ok := first[k]; !ok {
			t.Errorf("manifest file entry lacks %q: %v", k, first)
		}
	}
	if raw["formatVersion"].(float64) != 1 || raw["k3sVersion"] != "v1.36.3+k3s1" || raw["cluster"] != "edge" {
		t.Errorf("manifest header %v", raw)
	}

	cache := t.TempDir()
	o, err := Open(out, cache)
	if err != nil {
		t.Fatal(err)
	}
	if o.SHA256 != mustSHA(t, out) || o.Dir != filepath.Join(cache, o.SHA256) {
		t.Errorf("opened %+v", o)
	}
	for i, s := range srcs {
		want, _ := os.ReadFile(s.Local)
		got, err := os.ReadFile(o.Local(&o.Manifest.Files[i]))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: extracted content differs (%v)", s.Path, err)
		}
	}
	if st, _ := os.Stat(o.Local(o.Manifest.File("spec.k3s.airgap.amd64.binary"))); st.Mode().Perm()&0o100 == 0 {
		t.Errorf("binary extracted without exec bit: %v", st.Mode())
	}
	// A second Open uses the cache.
	o2, err := Open(out, cache)
	if err != nil || o2.Dir != o.Dir {
		t.Fatalf("second open %v %v", o2, err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 {
		t.Errorf("cache holds %d entries, want 1", len(ents))
	}
}

func mustSHA(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha(b)
}

func TestWriteRefusesChecksumMismatch(t *testing.T) {
	dir, srcs := fixture(t)
	if err := os.WriteFile(srcs[1].Local, []byte("not the images"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "site.tar")
	_, err := Write(out, Manifest{Cluster: "edge", K3sVersion: "v1.36.3+k3s1"}, srcs)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "spec.k3s.airgap.amd64.images") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused bundle left %s behind", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("temporary files left: %v", ents)
	}
}

func TestWriteRefusesDuplicatePath(t *testing.T) {
	dir, srcs := fixture(t)
	srcs[3].Path = "amd64/k3s"
	if _, err := Write(filepath.Join(dir, "x.tar"), Manifest{}, srcs); err == nil || !strings.Contains(err.Error(), "two files") {
		t.Fatalf("err = %v", err)
	}
	srcs[3].Path = "../escape"
	if _, err := Write(filepath.Join(dir, "x.tar"), Manifest{}, srcs); err == nil {
		t.Fatal("an unsafe path was accepted")
	}
}

func TestOpenRefusesCorruptBundle(t *testing.T) {
	dir, srcs := fixture(t)
	out := filepath.Join(dir, "site.tar")
	if _, err := Write(out, Manifest{Cluster: "edge", K3sVersion: "v1.36.3+k3s1"}, srcs); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(out)
	flip := func(what string, b []byte) []byte {
		i := bytes.Index(b, []byte(what))
		if i < 0 {
			t.Fatalf("%q not in bundle", what)
		}
		c := bytes.Clone(b)
		c[i] ^= 0x20
		return c
	}
	cases := map[string][]byte{
		"flipped byte in images": flip("image-layer image-layer", good),
		"flipped byte in binary": flip("echo k3s", good),
		"truncated":              good[:len(good)/2],
		"not a tar":              []byte("hello"),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "site.tar")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cache := t.TempDir()
			_, err := Open(p, cache)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if ents, _ := os.ReadDir(cache); len(ents) != 0 {
				t.Errorf("cache keeps %v after a corrupt bundle", ents)
			}
		})
	}

	// A file that is not in the manifest is refused too.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tr := tar.NewReader(bytes.NewReader(good))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = tw.WriteHeader(h)
		_, _ = io.Copy(tw, tr)
	}
	_ = tw.WriteHeader(&tar.Header{Name: "extra.sh", Mode: 0o755, Size: 3, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("hi\n"))
	_ = tw.Close()
	p := filepath.Join(t.TempDir(), "site.tar")
	_ = os.WriteFile(p, buf.Bytes(), 0o644)
	if _, err := Open(p, t.TempDir()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "extra.sh") {
		t.Fatalf("extra file: err = %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.tar"), t.TempDir())
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}
