package e2e

// The real-K3s lane: tests that run the real K3s binary on the throw-away hosts instead of the
// simulator. They take the binary from K3S_BINARY and the official install.sh from
// K3S_INSTALL_SH (.ci/run points both at ../shared/k3s/v1.36.3+k3s1/; elsewhere, download a
// release's k3s and install.sh, see docs/development.md) and skip, saying why in one line,
// without them.

import (
	"context"
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
}

var realOnce = sync.OnceValues(func() (realK3s, string) {
	bin, sh := os.Getenv("K3S_BINARY"), os.Getenv("K3S_INSTALL_SH")
	if bin == "" || sh == "" {
		return realK3s{}, "real-K3s lane skipped: set K3S_BINARY (a K3s release's k3s binary) and K3S_INSTALL_SH (its install.sh); .ci/run sets them; see docs/development.md"
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
	r := requireRealK3s(t)
	c := newClusterOpts(t, n, clusterOpts{topology: topology, real: &r})
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

// realParts are the inventory pieces of the real lane: {{template "k3s-real" .}} is the
// release and airgap artifacts under spec.k3s (the official install.sh as airgapInstallScript;
// Extra.images adds an images archive, Extra.checksums replaces the release's checksums file)
// and {{template "k3s-real-config" .}} the config keys every real-lane cluster needs on these
// machines: no Traefik (the test binary embeds no Traefik chart) and the kubelet allowed on
// cgroup v1.
const realParts = `{{define "k3s-real"}}    version: {{.Real.Version}}
    install: airgap
    airgap:
      amd64:
        binary: {{.Real.Binary}}
{{- with or .Extra.checksums .Real.Checksums}}
        checksums: {{.}}
{{- end}}
{{- with .Extra.images}}
        images: {{.}}
{{- end}}
    airgapInstallScript: {{.Real.InstallSh}}{{end}}{{define "k3s-real-config"}}      disable:
        - traefik
      kubelet-arg:
        - fail-cgroupv1=false   # the harness machine boots with cgroup v1
{{- range .Extra.kubeletArgs}}
        - {{.}}
{{- end}}{{end}}`
