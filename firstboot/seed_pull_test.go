// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/internal/sshtest"
	"github.com/k3strap/k3strap/pull"
)

// pullFiles writes, in a directory of this machine, a pinned signer and a management
// credential, and a pull configuration naming them with body's other keys; it returns the
// configuration's path.
func pullFiles(t *testing.T, body string) (cfg, signers, kubeconfig string) {
	t.Helper()
	d := t.TempDir()
	signers = filepath.Join(d, "signers")
	kubeconfig = filepath.Join(d, "mgmt.kubeconfig")
	cfg = filepath.Join(d, "pull.yaml")
	for p, data := range map[string]string{
		signers:    sshtest.AllowedSigner(t, `admin@example.com namespaces="git"`),
		kubeconfig: "apiVersion: v1\nkind: Config\n# the site's credential\n",
		cfg:        strings.NewReplacer("SIGNERS", signers, "KUBECONFIG", kubeconfig).Replace(body),
	} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, signers, kubeconfig
}

const pullSeedConfig = `# pull mode for the store's boxes
source:
  git:
    url: git://git.example.com/sites.git
    ref: wave-2
    path: sites/store7/cluster.yaml
verify:
  allowedSigners: SIGNERS   # the release keys
interval: 10m
management:
  kubeconfig: KUBECONFIG
  site: store-7
`

// TestWriteSeedsPull: with a pull configuration every seed carries it with host set to its box
// and the paths of its files on the box, and the files themselves (the credential 0600); the
// instance-id changes with it; a seed written again without it carries none of it.
func TestWriteSeedsPull(t *testing.T) {
	c, raw := loadSite(t, site)
	out := t.TempDir()
	cfg, signers, kubeconfig := pullFiles(t, pullSeedConfig)
	plain, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	seeds, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), PullConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		if s.InstanceID == plain[i].InstanceID {
			t.Errorf("%s: instance-id %s did not change with the pull configuration", s.Host, s.InstanceID)
		}
		pay := filepath.Join(s.Dir, PayloadDir)
		b, err := os.ReadFile(filepath.Join(pay, PullConfigName))
		if err != nil {
			t.Fatal(err)
		}
		var got pull.Config
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: the box's pull.yaml does not decode: %v\n%s", s.Host, err, b)
		}
		if got.Host != s.Host || got.Verify.AllowedSigners != "/etc/k3strap/allowed_signers" ||
			got.Management == nil || got.Management.Kubeconfig != "/etc/k3strap/mgmt.kubeconfig" || got.Management.Site != "store-7" ||
			got.Source.Git == nil || got.Source.Git.Ref != "wave-2" {
			t.Errorf("%s: the box's pull.yaml:\n%s", s.Host, b)
		}
		if !strings.HasPrefix(string(b), "# Written by `k3strap firstboot seed` for host "+s.Host) || !strings.Contains(string(b), "# the release keys") ||
			!strings.Contains(string(b), "# pull mode for the store's boxes") {
			t.Errorf("%s: the configuration's comments were lost:\n%s", s.Host, b)
		}
		for name, want := range map[string]struct {
			src  string
			mode os.FileMode
		}{"allowed_signers": {signers, 0o644}, "mgmt.kubeconfig": {kubeconfig, 0o600}} {
			have, err := os.ReadFile(filepath.Join(pay, name))
			src, _ := os.ReadFile(want.src)
			if err != nil || string(have) != string(src) {
				t.Errorf("%s: %s is not the workstation's file: %v", s.Host, name, err)
			}
			if st, err := os.Stat(filepath.Join(pay, name)); err != nil || st.Mode().Perm() != want.mode {
				t.Errorf("%s: %s mode %v, want %v", s.Host, name, st.Mode().Perm(), want.mode)
			}
		}
	}
	if _, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range pullPayloadNames() {
		if _, err := os.Stat(filepath.Join(out, "s1", PayloadDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left in a seed written without the pull configuration (%v)", n, err)
		}
	}
}

// TestWriteSeedsPullRefused: a pull configuration a seed cannot carry is refused before
// anything is written — an invalid one as `pull run` would refuse it (*pull.ConfigError, file
// and line), one naming a host or another token file, one naming a credential this machine
// does not have (SeedError naming the key and the fix).
func TestWriteSeedsPullRefused(t *testing.T) {
	c, raw := loadSite(t, site)
	for _, tc := range []struct {
		name, body, want string
		config           bool
	}{
		{"no verification", strings.Replace(pullSeedConfig, "verify:\n  allowedSigners: SIGNERS   # the release keys\n", "", 1), "no verification", true},
		{"host set", "host: s1\n" + pullSeedConfig, "drop host:", false},
		{"token file", "tokenFile: /etc/token\n" + pullSeedConfig, "drop tokenFile:", false},
		{"credential missing", strings.Replace(pullSeedConfig, "KUBECONFIG", "/nonexistent/mgmt.kubeconfig", 1), "management.kubeconfig: no such file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, _ := pullFiles(t, tc.body)
			out := filepath.Join(t.TempDir(), "seeds")
			_, err := Write(c, raw, "", SeedOptions{Out: out, Binary: fakeBinary(t), PullConfig: cfg})
			var ce *pull.ConfigError
			var se SeedError
			if tc.config && !errors.As(err, &ce) || !tc.config && !errors.As(err, &se) {
				t.Fatalf("got %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), cfg) {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output written for a refused seed: %v", err)
			}
		})
	}
}
