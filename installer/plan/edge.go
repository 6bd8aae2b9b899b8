// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates"
	"github.com/k3strap/k3strap/templates/edge"
)

// Which install script runs (HostPlan.ScriptSource; the install event says it).
const (
	ScriptOfficial = "the official K3s install script"
	ScriptUser     = "the user's airgap install.sh"
	ScriptOwn      = "k3strap's own install script"
)

// PlanHost is Plan for a host whose facts are known: the architecture picks the airgap
// artifacts, SELinux renders selinux: true and, for airgap installs, the distribution's
// k3s-selinux RPM.
func (pl *Planner) PlanHost(h *inventory.Host, f *facts.Host) (*HostPlan, error) {
	if f == nil {
		f = &facts.Host{}
	}
	return pl.plan(h, f)
}

func hostEnv(f *facts.Host) inventory.HostEnv {
	return inventory.HostEnv{SELinuxEnforcing: f.SELinux.Enforcing()}
}

func (pl *Planner) airgapArtifacts(arch string) (inventory.AirgapArtifacts, bool) {
	a, ok := pl.Cluster.Spec.K3s.Airgap[arch]
	return a, ok
}

type scriptChoice struct {
	file   File
	source string
}

// officialWrapper is what online installs upload as the install script
// (official-install.sh, the URL and the pinned sha256 put in with fmt): it downloads the
// official script from its URL on the host, checks the pinned sha256, and runs it with the
// INSTALL_K3S_* environment it was given. shellcheck checks it (make vet).
//
//go:embed official-install.sh
var officialWrapper string

// installScript picks the install script (docs/airgap-site.md; README "Edge and enterprise hosts"):
// online installs run the official script downloaded by the host; airgap installs the user's
// install.sh (spec.k3s.airgapInstallScript), else k3strap's own.
func (pl *Planner) installScript() (scriptChoice, error) {
	k := pl.Cluster.Spec.K3s
	if k.Install == inventory.Airgap {
		if k.AirgapInstallScript != "" {
			local := pl.Cluster.ResolvePath(k.AirgapInstallScript)
			b, err := os.ReadFile(local)
			if err != nil {
				return scriptChoice{}, fmt.Errorf("airgap install script: %w", err)
			}
			return scriptChoice{contentFile(k3s.PathInstallScript, 0o700, b, false), ScriptUser + " (" + local + ")"}, nil
		}
		return scriptChoice{contentFile(k3s.PathInstallScript, 0o700, templates.InstallScript(), false), ScriptOwn}, nil
	}
	url := k.InstallScriptURL
	if url == "" {
		url = inventory.DefaultInstallScriptURL
	}
	body := fmt.Sprintf(officialWrapper, shellescape.Quote(url), shellescape.Quote(strings.ToLower(k.InstallScriptSHA256)))
	return scriptChoice{contentFile(k3s.PathInstallScript, 0o700, []byte(body), false), ScriptOfficial + " from " + url}, nil
}

// edgeFiles adds the registries file of the host (its own registries, else spec.registries:
// Cluster.RegistriesOf) and its TLS files, and the airgap k3s-selinux RPM.
func (pl *Planner) edgeFiles(p *HostPlan, f *facts.Host) error {
	c := pl.Cluster
	if k := c.Spec.K3s; k.ReleaseURL != "" && !p.Airgap {
		// The official script reads INSTALL_K3S_ARTIFACT_URL (<releases>/download) since it
		// replaced GITHUB_URL (v1.36's install.sh: "GITHUB_URL was replaced by
		// INSTALL_K3S_ARTIFACT_URL"); older scripts and k3strap's own read GITHUB_URL.
		rel := strings.TrimRight(k.ReleaseURL, "/")
		p.InstallEnv = append(p.InstallEnv, "GITHUB_URL="+rel, "INSTALL_K3S_ARTIFACT_URL="+rel+"/download")
	}
	if r, field := c.RegistriesOf(p.Host); r != nil {
		pw := edge.Password(func(host string, a *inventory.RegistryAuth) (string, error) {
			return pl.registryPassword(field, host, a)
		})
		if pl.MaskedOnly {
			pw = nil
		}
		real, masked, err := edge.Registries(r, pw)
		if err != nil {
			return err
		}
		if real == nil {
			real = masked
		}
		rf := contentFile(k3s.PathRegistries, 0o600, real, true)
		rf.Secret, rf.Shown = true, masked
		p.Files = append(p.Files, rf)
		for _, t := range edge.TLSFiles(r) {
			local := c.ResolvePath(t.Local)
			var b []byte
			if t.Secret {
				b, err = readPrivate(local, "registry TLS key")
			} else {
				b, err = os.ReadFile(local)
			}
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if t.Secret {
				mode = 0o600
			}
			tf := contentFile(t.Remote, mode, b, true)
			tf.Secret = t.Secret
			p.Files = append(p.Files, tf)
		}
	}
	if p.Airgap && f.SELinux.Mode() != "disabled" {
		if rpm := c.Spec.K3s.SELinuxRPMs[f.SELinuxDistribution()]; rpm != "" && f.SELinuxDistribution() != "" {
			local := c.ResolvePath(rpm)
			sum, err := pl.sha256(local)
			if err != nil {
				return fmt.Errorf("k3s-selinux RPM: %w", err)
			}
			st, err := os.Stat(local)
			if err != nil {
				return fmt.Errorf("k3s-selinux RPM: %w", err)
			}
			p.Files = append(p.Files, File{Path: k3s.PathSELinuxRPM, Mode: 0o644, LocalPath: local, SHA256: sum, Size: st.Size()})
			p.InstallEnv = append(p.InstallEnv, "K3STRAP_SELINUX_RPM="+k3s.PathSELinuxRPM)
		}
	}
	return nil
}

// edgePaths are the paths edgeFiles may plan for h (ManagedPaths).
func (pl *Planner) edgePaths(h *inventory.Host) []string {
	c := pl.Cluster
	var out []string
	if r, _ := c.RegistriesOf(h); r != nil {
		out = append(out, k3s.PathRegistries)
		for _, t := range edge.TLSFiles(r) {
			out = append(out, t.Remote)
		}
	}
	if c.Spec.K3s.Install == inventory.Airgap && len(c.Spec.K3s.SELinuxRPMs) > 0 {
		out = append(out, k3s.PathSELinuxRPM)
	}
	return out
}

// registryPassword reads the password of registry host (a configs key of the registries at
// inventory field base) from its environment variable or file (a file readable by group or
// others is refused). The value never appears in an error.
func (pl *Planner) registryPassword(base, host string, a *inventory.RegistryAuth) (string, error) {
	field := fmt.Sprintf("%s.configs[%s].auth", base, host)
	if a.PasswordEnv != "" {
		v := os.Getenv(a.PasswordEnv)
		if v == "" {
			return "", fmt.Errorf("%s.passwordEnv names $%s, which is not set or empty: export it before running k3strap", field, a.PasswordEnv)
		}
		return v, nil
	}
	b, err := readPrivate(pl.Cluster.ResolvePath(a.PasswordFile), field+".passwordFile")
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// readPrivate reads a file holding a secret, refusing one that group or others may read.
func readPrivate(file, what string) ([]byte, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s %s is readable by group or others (mode %04o): run chmod 600 %s", what, file, st.Mode().Perm(), file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// ShownOnHost masks what a host's copy of a secret file would reveal, for dry-run diffs of
// files with a Shown rendering.
func ShownOnHost(path string, b []byte) string {
	switch path {
	case k3s.PathRegistries:
		return string(edge.MaskRegistries(b))
	case k3s.PathProxyEnv:
		return k3s.Mask(string(b))
	}
	return ""
}

// kubeVIPManifests renders the example kube-vip DaemonSet (spec.k3s.apiEndpoint.kubeVIP).
func (pl *Planner) kubeVIPManifests() ([]File, error) {
	b, err := edge.KubeVIP(pl.Cluster.Spec.K3s.APIEndpoint)
	if err != nil || b == nil {
		return nil, err
	}
	return []File{manifestFile("kube-vip.yaml", b, false)}, nil
}
