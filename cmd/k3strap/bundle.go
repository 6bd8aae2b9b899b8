// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/airgapbundle"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// bundleCmd writes the airgap bundle of an inventory (docs/airgap-site.md): every
// local artifact it names, verified (checksums files, the binaries' K3s release), in one tar
// with a manifest. The bundle file is --output-file/-O (wget's -O); -o is the output format
// as on every command. The old `bundle -o FILE` still works for one release with a warning
// when FILE cannot be taken for a format (it is not auto, plain, json or yaml). Exit 2 when the inventory or an artifact is not right (missing
// file, checksum or release mismatch, a secret among the files), 1 when writing fails.
func (a *app) bundleCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "bundle -f FILE -O site.tar",
		Short: "Write one verified airgap bundle (binaries, images, checksums, install.sh, SELinux RPMs, charts) for spec.k3s.airgapBundle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" && !isFormatName(a.output) {
				// The pre-v0.4 `bundle -o FILE`: checkOutput let it through as it names no format.
				fmt.Fprintf(a.stderr, "warning: `bundle -o FILE` is deprecated (-o is the output format on every command) — use -O %s\n", a.output)
				out = a.output
			}
			if out == "" {
				return usageError{errors.New("give the bundle file to write with -O FILE (e.g. -O site.tar)")}
			}
			c, err := a.load()
			if err != nil {
				return err
			}
			return a.writeBundle(c, out)
		},
	}
	cmd.Flags().StringVarP(&out, "output-file", "O", "", "the bundle file to write (a tar; replaced atomically)")
	return cmd
}

func (a *app) writeBundle(c *inventory.Cluster, out string) error {
	srcs, err := c.BundleSources()
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", c.Source, err)}
	}
	absOut, _ := filepath.Abs(out)
	for _, s := range srcs {
		if sameFile(s.Local, absOut) || (c.Source != "" && sameFile(c.Source, absOut)) {
			return usageError{fmt.Errorf("-O %s would replace %s: write the bundle elsewhere", out, s.Local)}
		}
	}
	// The binary is what K3s runs: it must be the release the inventory (and the bundle's
	// manifest) says (preflight's AirgapRelease, checked here before the bundle leaves).
	for _, s := range srcs {
		if s.Role != airgapbundle.RoleBinary {
			continue
		}
		rel, err := k3s.BinaryReleaseFile(s.Local)
		switch {
		case err != nil:
			fmt.Fprintf(a.stdout, "warning: cannot tell which K3s release %s is (%v); not compared with %s\n", s.Local, err, c.Spec.K3s.Version)
		case rel != c.Spec.K3s.Version:
			return usageError{fmt.Errorf("%s is K3s %s but spec.k3s.version is %s: bundle the %s binary (and its images) or set version: %s",
				s.Local, rel, c.Spec.K3s.Version, c.Spec.K3s.Version, rel)}
		}
	}
	m, err := airgapbundle.Write(out, airgapbundle.Manifest{Cluster: c.Metadata.Name, K3sVersion: c.Spec.K3s.Version, Generator: "k3strap " + version}, srcs)
	if err != nil {
		if errors.Is(err, airgapbundle.ErrChecksum) || errors.Is(err, os.ErrNotExist) {
			return usageError{err}
		}
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	if st.Mode().Perm() != 0o644 {
		return fmt.Errorf("%s has mode %v, want 0644", out, st.Mode().Perm())
	}
	sum, err := fileSHA256(out)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		what := string(f.Role)
		if f.Arch != "" {
			what = f.Arch + " " + what
		}
		if f.Distribution != "" {
			what = f.Distribution + " " + what
		}
		fmt.Fprintf(a.stdout, "  %-20s %-45s %10s  sha256 %s\n", what, f.Path, humanSize(f.Size), f.SHA256[:16])
	}
	fmt.Fprintf(a.stdout, "wrote %s: cluster %s, K3s %s, %s, %d files, %s\nsha256 %s  %s\n",
		out, m.Cluster, m.K3sVersion, strings.Join(m.Architectures(), " "), len(m.Files), humanSize(st.Size()), sum, filepath.Base(out))
	fmt.Fprintf(a.stdout, "use it with spec.k3s.airgapBundle: %s (docs/airgap-site.md)\n", filepath.Base(out))
	return nil
}

func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
