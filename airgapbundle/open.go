// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package airgapbundle

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CacheDirEnv names the environment variable that overrides the cache directory.
const CacheDirEnv = "K3STRAP_CACHE_DIR"

// DefaultCacheDir is where Open extracts bundles: $K3STRAP_CACHE_DIR/bundles when set, else
// os.UserCacheDir()/k3strap/bundles (~/.cache/k3strap/bundles on Linux).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return filepath.Join(d, "bundles"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for airgap bundles (set $%s): %w", CacheDirEnv, err)
	}
	return filepath.Join(d, "k3strap", "bundles"), nil
}

// Opened is a verified bundle and where its files are.
type Opened struct {
	// Path is the bundle file; SHA256 its digest.
	Path   string
	SHA256 string
	// Dir holds the extracted files (Dir/<File.Path>).
	Dir      string
	Manifest *Manifest
}

// Local returns where f is on disk.
func (o *Opened) Local(f *File) string { return filepath.Join(o.Dir, filepath.FromSlash(f.Path)) }

// Open verifies the bundle at p and returns it with its files extracted under
// cacheDir/<sha256 of the bundle>. The first Open of a bundle extracts it into a temporary
// directory, checking every file against the manifest (name, size, sha256; no file missing,
// none extra) and the binaries and images archives against their checksums files, then
// renames the directory into place; later Opens find that directory and check that every
// file is there with its size. Errors about the content wrap ErrCorrupt.
func Open(p, cacheDir string) (*Opened, error) {
	sum, err := hashOnly(p)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, sum)
	if m, err := readCached(dir); err == nil {
		return &Opened{Path: p, SHA256: sum, Dir: dir, Manifest: m}, nil
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("airgap bundle cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".extract-"+sum[:12]+"-")
	if err != nil {
		return nil, fmt.Errorf("airgap bundle cache: %w", err)
	}
	m, err := extract(p, tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another k3strap extracted the same bundle meanwhile: use its copy.
		_ = os.RemoveAll(tmp)
		if m2, err2 := readCached(dir); err2 == nil {
			return &Opened{Path: p, SHA256: sum, Dir: dir, Manifest: m2}, nil
		}
		return nil, fmt.Errorf("airgap bundle cache: %w", err)
	}
	return &Opened{Path: p, SHA256: sum, Dir: dir, Manifest: m}, nil
}

// ReadManifest reads only the manifest of the bundle at p (its first entry), unverified.
func ReadManifest(p string) (*Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readManifest(tar.NewReader(f))
}

func hashOnly(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readCached reads an extracted bundle's manifest and checks that each file is there with
// its size.
func readCached(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(b)
	if err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, err
		}
		if st.Size() != f.Size {
			return nil, fmt.Errorf("%s: size %d, manifest says %d", f.Path, st.Size(), f.Size)
		}
	}
	return m, nil
}

func readManifest(tr *tar.Reader) (*Manifest, error) {
	h, err := tr.Next()
	if err != nil {
		return nil, corrupt("not a tar archive with %s first: %v", ManifestName, err)
	}
	if h.Name != ManifestName || h.Typeflag != tar.TypeReg {
		return nil, corrupt("the first entry is %q, not %s: not a bundle written by `k3strap bundle`", h.Name, ManifestName)
	}
	if h.Size > 16<<20 {
		return nil, corrupt("%s is %d bytes", ManifestName, h.Size)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return nil, corrupt("reading %s: %v", ManifestName, err)
	}
	return parseManifest(b)
}

func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, corrupt("%s: %v", ManifestName, err)
	}
	switch {
	case m.FormatVersion == 0:
		return nil, corrupt("%s has no formatVersion", ManifestName)
	case m.FormatVersion > FormatVersion:
		return nil, fmt.Errorf("the bundle has format version %d, this k3strap reads %d: use a newer k3strap", m.FormatVersion, FormatVersion)
	}
	seen := map[string]bool{ManifestName: true}
	for _, f := range m.Files {
		if !validPath(f.Path) || seen[f.Path] {
			return nil, corrupt("%s lists the path %q twice or in an unsafe form", ManifestName, f.Path)
		}
		seen[f.Path] = true
		if len(f.SHA256) != 64 || f.Size < 0 {
			return nil, corrupt("%s: %s has no valid size and sha256", ManifestName, f.Path)
		}
	}
	return &m, nil
}

// extract reads the bundle p into dir, verifying it against its manifest.
func extract(p, dir string) (*Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	m, err := readManifest(tr)
	if err != nil {
		return nil, err
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	want := map[string]*File{}
	for i := range m.Files {
		want[m.Files[i].Path] = &m.Files[i]
	}
	got := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("%v (truncated?)", err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		bf, ok := want[h.Name]
		switch {
		case !ok:
			return nil, corrupt("%s is not in %s", h.Name, ManifestName)
		case got[h.Name]:
			return nil, corrupt("%s appears twice", h.Name)
		case h.Typeflag != tar.TypeReg:
			return nil, corrupt("%s is not a regular file", h.Name)
		case h.Size != bf.Size:
			return nil, corrupt("%s is %d bytes, %s says %d", h.Name, h.Size, ManifestName, bf.Size)
		}
		got[h.Name] = true
		if err := extractFile(tr, filepath.Join(dir, filepath.FromSlash(h.Name)), bf); err != nil {
			return nil, err
		}
	}
	for _, bf := range m.Files {
		if !got[bf.Path] {
			return nil, corrupt("%s (%s) is missing", bf.Path, bf.Field)
		}
	}
	if err := VerifyChecksums(m, func(bf *File) (string, error) {
		return filepath.Join(dir, filepath.FromSlash(bf.Path)), nil
	}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// The manifest goes in last: a cache directory with a manifest is complete.
	if err := os.WriteFile(filepath.Join(dir, ManifestName), append(mj, '\n'), 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

func extractFile(r io.Reader, to string, bf *File) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(fileMode(*bf)))
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return corrupt("%s: %v (truncated?)", bf.Path, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != bf.SHA256 {
		return corrupt("%s (%s) has sha256 %s, the manifest says %s", bf.Path, bf.Field, sum, bf.SHA256)
	}
	return nil
}
