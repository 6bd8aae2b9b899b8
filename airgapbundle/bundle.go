// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package airgapbundle is the format of an airgap bundle: one tar that carries, for an airgap
// site, every local artifact an inventory names (K3s binaries, images archives and checksums
// per architecture, install.sh, k3s-selinux RPMs, CNI/cloud-controller manifests and charts,
// Rancher charts), with a manifest.json first that lists each file's role, architecture, path
// in the tar, size and sha256 (docs/airgap-site.md).
//
// Write builds a bundle atomically (temporary file, then rename; mode 0644); Open verifies one
// and extracts it once into a cache directory keyed by the bundle's sha256. The package knows
// nothing of the inventory: inventory/bundle.go maps files to inventory fields.
package airgapbundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// FormatVersion is the manifest format this package writes and reads.
const FormatVersion = 1

// ManifestName is the manifest's name in the tar (its first entry).
const ManifestName = "manifest.json"

// Role says what a file in a bundle is.
type Role string

// Roles of bundle files.
const (
	RoleBinary        Role = "binary"
	RoleImages        Role = "images"
	RoleChecksums     Role = "checksums"
	RoleInstallScript Role = "install-script"
	RoleSELinuxRPM    Role = "selinux-rpm"
	RoleManifest      Role = "manifest"
	RoleChart         Role = "chart"
)

// File is one file of a bundle as the manifest lists it.
type File struct {
	Role Role `json:"role"`
	// Arch is the Go architecture (amd64, arm64, arm) of binaries, images and checksums.
	Arch string `json:"architecture,omitempty"`
	// Distribution is the SELinux family (el8, el9, ...) of a k3s-selinux RPM.
	Distribution string `json:"distribution,omitempty"`
	// Field is the inventory field the file stands for (spec.k3s.airgap.amd64.binary).
	Field string `json:"field"`
	// Path is the file's name inside the bundle (slash-separated, relative).
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is manifest.json.
type Manifest struct {
	FormatVersion int       `json:"formatVersion"`
	Cluster       string    `json:"cluster"`
	K3sVersion    string    `json:"k3sVersion"`
	Created       time.Time `json:"created"`
	// Generator names the program that wrote the bundle ("k3strap v1.2.3").
	Generator string `json:"generator,omitempty"`
	Files     []File `json:"files"`
}

// Architectures returns the architectures that have a binary in the bundle, sorted.
func (m *Manifest) Architectures() []string {
	var out []string
	for _, f := range m.Files {
		if f.Role == RoleBinary {
			out = append(out, f.Arch)
		}
	}
	sort.Strings(out)
	return out
}

// File returns the file standing for the inventory field, or nil.
func (m *Manifest) File(field string) *File {
	for i := range m.Files {
		if m.Files[i].Field == field {
			return &m.Files[i]
		}
	}
	return nil
}

// ErrChecksum marks a binary or images archive that its checksums file does not vouch for.
var ErrChecksum = errors.New("checksum mismatch")

// ErrCorrupt marks a bundle that is not what its manifest says (or not a bundle at all).
var ErrCorrupt = errors.New("corrupt airgap bundle")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Source is a local file to put into a bundle: File (Size and SHA256 are filled by Write)
// and where it is on disk.
type Source struct {
	File
	Local string
}

// Write writes the bundle of sources to out atomically (a temporary file in out's directory,
// then rename; mode 0644) and returns its manifest. m gives the header (cluster, K3s version,
// generator); its Files are replaced. Every file is hashed first, then copied with its hash
// checked again (a file that changes meanwhile is refused), and each binary and images archive
// must match its architecture's checksums file when the sources hold one (VerifyChecksums).
func Write(out string, m Manifest, sources []Source) (*Manifest, error) {
	m.FormatVersion = FormatVersion
	if m.Created.IsZero() {
		m.Created = time.Now().UTC().Truncate(time.Second)
	}
	m.Files = nil
	seen := map[string]bool{ManifestName: true}
	for _, s := range sources {
		f := s.File
		if !validPath(f.Path) {
			return nil, fmt.Errorf("bundle path %q of %s is not a relative slash-separated path", f.Path, s.Local)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("two files would be %s in the bundle (the second is %s): give them different names", f.Path, s.Local)
		}
		seen[f.Path] = true
		st, err := os.Stat(s.Local)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", f.Field, f.Role, err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s (%s): %s is not a regular file", f.Field, f.Role, s.Local)
		}
		sum, size, err := hashFile(s.Local)
		if err != nil {
			return nil, err
		}
		f.SHA256, f.Size = sum, size
		m.Files = append(m.Files, f)
	}
	locals := map[string]string{}
	for _, s := range sources {
		locals[s.Path] = s.Local
	}
	if err := VerifyChecksums(&m, func(f *File) (string, error) { return locals[f.Path], nil }); err != nil {
		return nil, err
	}
	mj, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return nil, err
	}
	mj = append(mj, '\n')

	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o644); err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	tw := tar.NewWriter(bw)
	mtime := m.Created
	if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(mj)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(mj); err != nil {
		return nil, err
	}
	for i, f := range m.Files {
		if err := copyInto(tw, sources[i].Local, f, mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		_ = os.Remove(tmp.Name())
		return nil, err
	}
	done = true
	return &m, nil
}

func fileMode(f File) int64 {
	if f.Role == RoleBinary {
		return 0o755
	}
	return 0o644
}

// copyInto appends local to tw as f, checking that its content still hashes to f.SHA256.
func copyInto(tw *tar.Writer, local string, f File, mtime time.Time) error {
	in, err := os.Open(local)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: fileMode(f), Size: f.Size, ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(in, f.Size))
	if err != nil {
		return fmt.Errorf("reading %s: %w", local, err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%s changed while the bundle was written: write the bundle again", local)
	}
	return nil
}

// validPath reports whether p is a clean, relative, slash-separated path without "..".
func validPath(p string) bool {
	return p != "" && p != "." && !strings.Contains(p, `\`) && path.Clean(p) == p && filepath.IsLocal(filepath.FromSlash(p)) && !strings.HasPrefix(p, "/")
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// releaseBinary is the K3s release asset name of each architecture's binary.
var releaseBinary = map[string]string{"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}

// VerifyChecksums checks every binary and images archive of m against the checksums file of
// its architecture in m, when there is one (sha256sum format: "<hex>  <name>"; a binary is
// looked up by its release name and its own name, an images archive by its name). local
// returns where a file of m is on disk.
func VerifyChecksums(m *Manifest, local func(*File) (string, error)) error {
	sums := map[string]map[string]string{} // arch -> name -> digest
	for i := range m.Files {
		f := &m.Files[i]
		if f.Role != RoleChecksums {
			continue
		}
		p, err := local(f)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sums[f.Arch] = ParseChecksums(b)
	}
	for i := range m.Files {
		f := &m.Files[i]
		if f.Role != RoleBinary && f.Role != RoleImages {
			continue
		}
		s, ok := sums[f.Arch]
		if !ok {
			continue
		}
		base := path.Base(f.Path)
		names := []string{base}
		if f.Role == RoleBinary {
			names = []string{releaseBinary[f.Arch], base}
		}
		want := ""
		for _, n := range names {
			if d, ok := s[n]; ok {
				want = d
				break
			}
		}
		switch {
		case want == "":
			return fmt.Errorf("%w: the %s checksums file has no entry for %s (%s): it is from another release, or add the file's sha256sum line", ErrChecksum, f.Arch, strings.Join(names, " or "), f.Field)
		case want != f.SHA256:
			return fmt.Errorf("%w: %s has sha256 %s but the %s checksums file says %s: the file is corrupt or from another release", ErrChecksum, f.Field, f.SHA256, f.Arch, want)
		}
	}
	return nil
}

// ParseChecksums reads sha256sum output ("<hex>  <name>" or "<hex> *<name>" lines).
func ParseChecksums(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		out[strings.TrimPrefix(f[1], "*")] = strings.ToLower(f[0])
	}
	return out
}
