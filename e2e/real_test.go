// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// The real-K3s lane: tests that run the real K3s binary on the throw-away hosts instead of the
// simulator. They take the binary from K3S_BINARY and the official install.sh from
// K3S_INSTALL_SH (.ci/run points both at ../shared/k3s/v1.36.3+k3s1/; elsewhere, download a
// release's k3s and install.sh, see docs/development.md) and skip, saying why in one line,
// without them.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/k3strap/k3strap/e2e/harness"
	"github.com/k3strap/k3strap/k3s"
)

// realK3s is the real K3s release under test.
type realK3s struct {
	// Binary is the k3s binary; Checksums its sha256sum-amd64.txt when one lies beside it.
	Binary, Checksums string
	// InstallSh is the official install.sh of the same release.
	InstallSh string
	// Version is the release read from the binary (k3s.BinaryReleaseFile).
	Version string
	// Images is the stand-in airgap images archive (e2e/cmd/standin-images: every image this
	// release's pods need, as labelled stand-ins), so every real-lane cluster runs its pods;
	// Checksums then names a copy of the release's checksums with the archive's line added.
	// Empty until withStandinImages.
	Images string
}

var realOnce = sync.OnceValues(func() (realK3s, string) {
	bin, sh := os.Getenv("K3S_BINARY"), os.Getenv("K3S_INSTALL_SH")
	if bin == "" || sh == "" {
		return realK3s{}, "real-K3s lane skipped: set K3S_BINARY (a K3s release's k3s binary, from github.com/k3s-io/k3s/releases) and K3S_INSTALL_SH (its install.sh, from get.k3s.io); .ci/run sets them; see docs/development.md"
	}
	for _, p := range []string{bin, sh} {
		if _, err := os.Stat(p); err != nil {
			return realK3s{}, "real-K3s lane: " + err.Error()
		}
	}
	v, err := k3s.BinaryReleaseFile(bin)
	if err != nil || v == "" {
		return realK3s{}, "real-K3s lane: cannot read the release of " + bin + ": " + errString(err)
	}
	r := realK3s{Binary: bin, InstallSh: sh, Version: v}
	if sum := filepath.Join(filepath.Dir(bin), "sha256sum-amd64.txt"); fileExists(sum) {
		r.Checksums = sum
	}
	return r, ""
})

func errString(err error) string {
	if err == nil {
		return "no release found"
	}
	return err.Error()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// requireRealK3s returns the real K3s under test, or fails the test when K3S_BINARY names
// something unusable; it skips (one line, why) when the lane is not configured.
func requireRealK3s(t testing.TB) realK3s {
	t.Helper()
	r, why := realOnce()
	if why != "" {
		if r.Binary == "" && os.Getenv("K3S_BINARY") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return r
}

// newRealCluster gives the test n clean hosts for the real K3s: the machine's kernel sysctls
// the kubelet needs are held for the test; when it ends (pass, fail or skip) every host is
// killed, so no kubelet keeps running into the next test, and the sysctls are released.
func newRealCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return newRealClusterTopology(t, n, harness.TopologyFlat)
}

func newRealClusterTopology(t testing.TB, n int, topology string) *testCluster {
	t.Helper()
	return newRealClusterOpts(t, n, clusterOpts{topology: topology})
}

// newRealClusterOpts is newRealCluster with the hosts shaped by o (o.real is set here).
func newRealClusterOpts(t testing.TB, n int, o clusterOpts) *testCluster {
	t.Helper()
	r := withStandinImages(t, requireRealK3s(t))
	o.real = &r
	c := newClusterOpts(t, n, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.h.HoldK3sSysctls(ctx); err != nil {
		t.Fatalf("holding the machine sysctls for K3s: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, host := range c.hosts {
			if err := c.h.Kill(ctx, host.Index); err != nil {
				t.Errorf("stopping %s after the test: %v", host.Name, err)
			}
		}
		if b := c.h.Bastion(); b != nil {
			_ = c.h.Kill(ctx, b.Index)
		}
		if err := c.h.ReleaseK3sSysctls(ctx); err != nil {
			t.Errorf("restoring the machine sysctls: %v", err)
		}
	})
	return c
}

// withStandinImages returns r with the stand-in images archive of this test binary's build and
// a checksums file covering it (the release's lines and the archive's, written once beside the
// archive); it fails the test when the build failed.
func withStandinImages(t testing.TB, r realK3s) realK3s {
	t.Helper()
	b := buildOnce()
	if b.err != nil {
		t.Fatalf("building binaries: %v", b.err)
	}
	sums, err := realChecksumsOnce()
	if err != nil {
		t.Fatalf("checksums of the real release and the stand-in images: %v", err)
	}
	r.Images, r.Checksums = b.standinImages, sums
	return r
}

// realChecksumsOnce writes sha256sum-amd64.txt beside the stand-in images archive: the real
// release's checksums file plus the archive's line, in sha256sum's format. A release without
// a checksums file gets none (k3strap then verifies neither file).
var realChecksumsOnce = sync.OnceValues(func() (string, error) {
	r, _ := realOnce()
	if r.Checksums == "" {
		return "", nil
	}
	b := buildOnce()
	sums, err := os.ReadFile(r.Checksums)
	if err != nil {
		return "", err
	}
	f, err := os.Open(b.standinImages)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sums = fmt.Appendf(sums, "%x  %s\n", h.Sum(nil), filepath.Base(b.standinImages))
	p := filepath.Join(filepath.Dir(b.standinImages), "sha256sum-amd64.txt")
	return p, os.WriteFile(p, sums, 0o644)
})

// realParts are the inventory pieces of the real lane: {{template "k3s-real" .}} is the
// release and airgap artifacts under spec.k3s (the stand-in images archive as images, the
// official install.sh as airgapInstallScript; Extra.images replaces the images archive,
// Extra.checksums the checksums file)
// and {{template "k3s-real-config" .}} the config keys every real-lane cluster needs on these
// machines: no Traefik (the test binary embeds no Traefik chart) and the kubelet allowed on
// cgroup v1; {{template "spec-k3s-real" .}} is the whole spec.k3s of a real-lane cluster: both,
// plus Extra.config's cluster config lines.
const realParts = `{{define "k3s-real"}}    version: {{.Real.Version}}
    install: airgap
    airgap:
      amd64:
        binary: {{.Real.Binary}}
{{- with or .Extra.images .Real.Images}}
        images: {{.}}
{{- end}}
{{- with or .Extra.checksums .Real.Checksums}}
        checksums: {{.}}
{{- end}}
    airgapInstallScript: {{.Real.InstallSh}}{{end}}{{define "k3s-real-config"}}      disable:
        - traefik
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{- range .Extra.kubeletArgs}}
        - {{.}}
{{- end}}{{end}}{{define "spec-k3s-real"}}  k3s:
{{template "k3s-real" .}}
    config:
{{template "k3s-real-config" .}}
{{- with .Extra.config}}
{{.}}
{{- end}}{{end}}`
