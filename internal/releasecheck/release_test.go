// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package releasecheck checks what `make release` (a GoReleaser snapshot, .goreleaser.yaml)
// made in dist/: every platform's archive and binary, the checksums, the SBOMs, and that the
// linux/amd64 binary runs. `make release-check` runs it; without K3STRAP_RELEASE_DIST it skips.
package releasecheck

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// platforms are the targets the release promises (README "Install"; docs/release.md), as
// GOOS/GOARCH[/GOARM].
var platforms = []string{"linux/amd64", "linux/arm64", "linux/arm/7", "darwin/amd64", "darwin/arm64", "windows/amd64"}

// artifact is one entry of GoReleaser's dist/artifacts.json.
type artifact struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	GOARM  string `json:"goarm"`
	Type   string `json:"type"`
}

func (a artifact) platform() string {
	p := a.GOOS + "/" + a.GOARCH
	if a.GOARM != "" {
		p += "/" + a.GOARM
	}
	return p
}

// dist reads dist/metadata.json and dist/artifacts.json.
func dist(t *testing.T) (dir, version string, arts []artifact) {
	t.Helper()
	dir = os.Getenv("K3STRAP_RELEASE_DIST")
	if dir == "" {
		t.Skip("K3STRAP_RELEASE_DIST is not set: run `make release` then `make release-check` (it points this test at dist/)")
	}
	var meta struct {
		Version string `json:"version"`
	}
	readJSON(t, filepath.Join(dir, "metadata.json"), &meta)
	readJSON(t, filepath.Join(dir, "artifacts.json"), &arts)
	if meta.Version == "" {
		t.Fatal("dist/metadata.json names no version")
	}
	return dir, meta.Version, arts
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make release` first)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// file is an artifact's path; GoReleaser writes them relative to the project (dist/...).
func file(dir string, a artifact) string { return filepath.Join(dir, filepath.Base(a.Path)) }

func byType(arts []artifact, typ string) map[string]artifact {
	m := map[string]artifact{}
	for _, a := range arts {
		if a.Type == typ {
			m[a.platform()] = a
		}
	}
	return m
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestReleaseChecksums: the checksums file lists every archive and SBOM and the OCI image
// (checksum.extra_files: GoReleaser does not know it as an artifact), and each listed file's
// SHA-256 is the one written (what `sha256sum -c` checks for a user).
func TestReleaseChecksums(t *testing.T) {
	dir, version, arts := dist(t)
	var sums []artifact
	for _, a := range arts {
		if a.Type == "Checksum" {
			sums = append(sums, a)
		}
	}
	if len(sums) != 1 {
		t.Fatalf("%d checksums files in artifacts.json, want 1", len(sums))
	}
	data, err := os.ReadFile(filepath.Join(dir, sums[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s line %d is not `SHA256  NAME`", sums[0].Name, i+1)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s line %d: %v", sums[0].Name, i+1, err)
			continue
		}
		if got := sha(b); got != sum {
			t.Errorf("%s: sha256 %s, the checksums file says %s", name, got, sum)
		}
		listed[name] = true
	}
	n := 0
	for _, a := range arts {
		if a.Type == "Archive" || a.Type == "SBOM" {
			n++
			if !listed[a.Name] {
				t.Errorf("%s (%s) is not in %s", a.Name, a.Type, sums[0].Name)
			}
		}
	}
	if n != 2*len(platforms) {
		t.Errorf("%d archives and SBOMs, want %d (one each per platform)", n, 2*len(platforms))
	}
	if img := "k3strap_" + version + "_oci.tar"; !listed[img] {
		t.Errorf("the OCI image %s is not in %s (.goreleaser.yaml checksum.extra_files)", img, sums[0].Name)
	}
}

// TestReleaseArchives: one archive per promised platform, holding LICENSE, NOTICE, README.md
// and the binary GoReleaser built for it; the binary is a static executable of that platform,
// built without cgo and with -trimpath; its SBOM names every module compiled into it.
func TestReleaseArchives(t *testing.T) {
	dir, version, arts := dist(t)
	archives, binaries, sboms := byType(arts, "Archive"), byType(arts, "Binary"), map[string]artifact{}
	for _, a := range arts {
		if a.Type == "SBOM" {
			sboms[a.Name] = a
		}
	}
	for _, p := range platforms {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			arch, ok := archives[p]
			if !ok {
				t.Fatalf("no archive for %s", p)
			}
			bin, ok := binaries[p]
			if !ok {
				t.Fatalf("no binary for %s", p)
			}
			files := unpack(t, file(dir, arch))
			for _, want := range []string{"LICENSE", "NOTICE", "README.md"} {
				repo, err := os.ReadFile(filepath.Join("..", "..", want))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(files[want], repo) {
					t.Errorf("%s: %s missing or not the repository's", arch.Name, want)
				}
			}
			exe := files[bin.Name]
			// GoReleaser keeps the binary under dist/<build id>_<platform>/.
			built, err := os.ReadFile(filepath.Join(dir, filepath.Base(filepath.Dir(bin.Path)), filepath.Base(bin.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if exe == nil || !bytes.Equal(exe, built) {
				t.Fatalf("%s: %s missing or not the binary built for %s", arch.Name, bin.Name, p)
			}
			checkExecutable(t, p, exe)
			info, err := buildinfo.Read(bytes.NewReader(exe))
			if err != nil {
				t.Fatalf("%s: no Go build information: %v", bin.Name, err)
			}
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			parts := strings.Split(p, "/")
			if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"] != parts[0] || settings["GOARCH"] != parts[1] {
				t.Errorf("%s built with CGO_ENABLED=%q -trimpath=%q GOOS=%q GOARCH=%q, want 0, true, %s",
					p, settings["CGO_ENABLED"], settings["-trimpath"], settings["GOOS"], settings["GOARCH"], p)
			}
			if info.Path != "github.com/k3strap/k3strap/cmd/k3strap" {
				t.Errorf("%s: main package %q", p, info.Path)
			}
			checkSBOM(t, dir, sboms, strings.TrimSuffix(strings.TrimSuffix(arch.Name, ".tar.gz"), ".zip")+".sbom.json", version, info)
		})
	}
}

// unpack returns an archive's regular files by base name.
func unpack(t *testing.T, path string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if strings.HasSuffix(path, ".zip") {
		z, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		for _, f := range z.File {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			_ = r.Close()
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f.Name)] = b
		}
		return out
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(h.Name)] = b
	}
}

// checkExecutable: exe is an executable for platform p; Linux ones are static (no program
// interpreter, no shared libraries).
func checkExecutable(t *testing.T, p string, exe []byte) {
	t.Helper()
	r := bytes.NewReader(exe)
	switch p {
	case "linux/amd64", "linux/arm64", "linux/arm/7":
		f, err := elf.NewFile(r)
		if err != nil {
			t.Fatalf("%s: not ELF: %v", p, err)
		}
		want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64, "linux/arm/7": elf.EM_ARM}[p]
		if f.Machine != want || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF machine %v type %v, want %v executable", p, f.Machine, f.Type, want)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: dynamically linked (%v program header): the release promises a static binary", p, prog.Type)
			}
		}
	case "darwin/amd64", "darwin/arm64":
		f, err := macho.NewFile(r)
		if err != nil {
			t.Fatalf("%s: not Mach-O: %v", p, err)
		}
		want := map[string]macho.Cpu{"darwin/amd64": macho.CpuAmd64, "darwin/arm64": macho.CpuArm64}[p]
		if f.Cpu != want || f.Type != macho.TypeExec {
			t.Errorf("%s: Mach-O cpu %v type %v, want %v executable", p, f.Cpu, f.Type, want)
		}
	case "windows/amd64":
		f, err := pe.NewFile(r)
		if err != nil {
			t.Fatalf("%s: not PE: %v", p, err)
		}
		if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
			t.Errorf("%s: PE machine %#x, want AMD64", p, f.Machine)
		}
	default:
		t.Fatalf("no executable check for %s", p)
	}
}

// checkSBOM: the SBOM named name is CycloneDX for k3strap at the release's version and lists
// every module of the binary's build information at its version.
func checkSBOM(t *testing.T, dir string, sboms map[string]artifact, name, version string, info *buildinfo.BuildInfo) {
	t.Helper()
	a, ok := sboms[name]
	if !ok {
		t.Errorf("no SBOM %s", name)
		return
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	readJSON(t, file(dir, a), &bom)
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/k3strap/k3strap" || bom.Metadata.Component.Version != "v"+version {
		t.Errorf("%s: format %q component %q %q, want CycloneDX github.com/k3strap/k3strap v%s",
			name, bom.BOMFormat, bom.Metadata.Component.Name, bom.Metadata.Component.Version, version)
	}
	have := map[string]bool{}
	for _, c := range bom.Components {
		have[c.Name+"@"+c.Version] = true
	}
	if len(info.Deps) == 0 {
		t.Fatalf("%s: the binary lists no modules", name)
	}
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		if !have[m.Path+"@"+m.Version] && !have[d.Path+"@"+d.Version] {
			t.Errorf("%s lacks %s@%s, compiled into the binary", name, d.Path, d.Version)
		}
	}
}

// TestReleaseRuns: the linux/amd64 binary, as unpacked from its archive, runs `version -o json`
// and says the release's version, its platform and Go version.
func TestReleaseRuns(t *testing.T) {
	dir, version, arts := dist(t)
	if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
		t.Skipf("running the linux/amd64 binary needs a linux/amd64 machine, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	arch, ok := byType(arts, "Archive")["linux/amd64"]
	if !ok {
		t.Fatal("no linux/amd64 archive")
	}
	exe := filepath.Join(t.TempDir(), "k3strap")
	if err := os.WriteFile(exe, unpack(t, file(dir, arch))["k3strap"], 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("k3strap version -o json: %v", err)
	}
	var got struct{ Version, GoVersion, Platform string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != version || got.Platform != "linux/amd64" || got.GoVersion != info.GoVersion {
		t.Errorf("version says %+v, want version %q platform linux/amd64 go %q", got, version, info.GoVersion)
	}
	t.Logf("the linux/amd64 binary of release %s says: %s", version, out)
}

// TestReleaseImage: the OCI image layout `make release` writes (internal/cmd/ociimage) holds
// one valid image per Linux platform whose /k3strap is that platform's release binary, run as
// nonroot with a CA bundle and the license beside it.
func TestReleaseImage(t *testing.T) {
	dir, version, arts := dist(t)
	tarPath := filepath.Join(dir, "k3strap_"+version+"_oci.tar")
	root := t.TempDir()
	untar(t, tarPath, root)
	top, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatalf("%s is not an OCI image layout: %v", tarPath, err)
	}
	// One entry, named after the version: the multi-platform index.
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("index.json has %d entries (want 1 named %q): %+v", len(tm.Manifests), version, tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Content addressing: every blob's SHA-256 is its name.
	blobs, err := os.ReadDir(filepath.Join(root, "blobs", "sha256"))
	if err != nil || len(blobs) == 0 {
		t.Fatalf("%s has no blobs: %v", tarPath, err)
	}
	for _, b := range blobs {
		data, err := os.ReadFile(filepath.Join(root, "blobs", "sha256", b.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha(data); got != b.Name() {
			t.Errorf("blob %s has SHA-256 %s", b.Name(), got)
		}
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Annotations["org.opencontainers.image.version"]; got != version {
		t.Errorf("index version annotation %q, want %q", got, version)
	}
	binaries := byType(arts, "Binary")
	var seen []string
	for _, d := range im.Manifests {
		p := d.Platform.OS + "/" + d.Platform.Architecture
		if d.Platform.Variant != "" {
			p += "/" + strings.TrimPrefix(d.Platform.Variant, "v")
		}
		seen = append(seen, p)
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture || cf.Variant != d.Platform.Variant {
				t.Errorf("config platform %s/%s/%s, index says %s", cf.OS, cf.Architecture, cf.Variant, p)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{"/k3strap"}) || cf.Config.User != "65532:65532" {
				t.Errorf("entrypoint %v user %q, want [/k3strap] 65532:65532", cf.Config.Entrypoint, cf.Config.User)
			}
			files := map[string][]byte{}
			tr := tar.NewReader(mutate.Extract(img))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Typeflag == tar.TypeReg {
					b, err := io.ReadAll(tr)
					if err != nil {
						t.Fatal(err)
					}
					files[strings.TrimPrefix(h.Name, "/")] = b
				}
			}
			bin, ok := binaries[p]
			if !ok {
				t.Fatalf("no release binary for %s", p)
			}
			want, err := os.ReadFile(filepath.Join(dir, filepath.Base(filepath.Dir(bin.Path)), filepath.Base(bin.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(files["k3strap"], want) {
				t.Errorf("/k3strap is not the %s release binary", p)
			}
			if !bytes.Contains(files["etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")) ||
				!bytes.Contains(files["etc/passwd"], []byte("nonroot:x:65532:")) || len(files["usr/share/doc/k3strap/LICENSE"]) == 0 {
				t.Errorf("the image lacks its CA bundle, nonroot user or LICENSE (files: %d)", len(files))
			}
		})
	}
	slices.Sort(seen)
	if want := []string{"linux/amd64", "linux/arm/7", "linux/arm64"}; !slices.Equal(seen, want) {
		t.Errorf("image platforms %v, want %v", seen, want)
	}
}

// untar unpacks the regular files and directories of an archive into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make release writes the image)", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q leaves the directory", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err == nil {
				err = os.WriteFile(target, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
