// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates"
)

// File is one file k3strap keeps on a host.
type File struct {
	// Path on the host; Mode its permission bits.
	Path string
	Mode os.FileMode
	// Content is the file for small files; LocalPath names a local file for large ones.
	Content   []byte
	LocalPath string
	// SHA256 is the hex digest of the content; Size its length in bytes.
	SHA256 string
	Size   int64
	// Secret files are never shown, diffed or logged.
	Secret bool
	// Restart says a change of this file needs a service restart to take effect.
	Restart bool
	// Keep says an existing file is left alone whatever its content (a generated token).
	Keep bool
	// Shown is what `render` and dry-run show of a Secret file (its secrets masked), and
	// what `render` shows in full of a small non-secret one (the proxy environment); nil
	// shows nothing.
	Shown []byte
}

// Open returns the content to upload.
func (f *File) Open() (io.ReadCloser, error) {
	if f.LocalPath != "" {
		return os.Open(f.LocalPath)
	}
	return io.NopCloser(bytes.NewReader(f.Content)), nil
}

func contentFile(p string, mode os.FileMode, content []byte, restart bool) File {
	sum := sha256.Sum256(content)
	return File{Path: p, Mode: mode, Content: content, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), Restart: restart}
}

// HostPlan is what one host should look like.
type HostPlan struct {
	Host *inventory.Host
	// First is true for the server that initialises the cluster.
	First bool
	// Service is the unit name (k3s or k3s-agent).
	Service string
	// Config is the K3s config rendered to ConfigYAML.
	Config     inventory.K3sConfig
	ConfigYAML []byte
	// Files in upload order; the token file is added once the token is known.
	Files []File
	// InstallEnv are the INSTALL_K3S_* variables for the install script (never secret).
	InstallEnv []string
	// Airgap is true when the binary and images are uploaded.
	Airgap bool
	// ScriptSource says which install script runs (the official one from its URL, the
	// user's airgap install.sh, or k3strap's own); the install event names it.
	ScriptSource string
}

// File returns the planned file at path, or nil.
func (p *HostPlan) File(at string) *File {
	for i := range p.Files {
		if p.Files[i].Path == at {
			return &p.Files[i]
		}
	}
	return nil
}

// SetToken adds the token file (0600, secret). keep leaves an existing file alone.
func (p *HostPlan) SetToken(token inventory.Secret, keep bool) {
	f := contentFile(k3s.PathTokenFile, 0o600, []byte(token.Reveal()+"\n"), true)
	f.Secret, f.Keep = true, keep
	for i := range p.Files {
		if p.Files[i].Path == k3s.PathTokenFile {
			p.Files[i] = f
			return
		}
	}
	// The token must be in place before K3s (re)starts: put it before config.yaml.
	p.Files = append([]File{f}, p.Files...)
}

// Planner builds HostPlans. It caches local artifact checksums (hosts of one architecture
// share them).
type Planner struct {
	Cluster *inventory.Cluster
	// MaskedOnly plans secret files (registries.yaml) with their masked content
	// and reads no password: for `render`, never for uploads.
	MaskedOnly bool

	mu   sync.Mutex
	sums map[string]string

	addonsOnce sync.Once
	addons     []File
	addonsErr  error

	// scriptOnce: the install script is the same for every host; its content (and the
	// user's file read) once per run, shared by every host's plan.
	scriptOnce sync.Once
	script     scriptChoice
	scriptErr  error
}

// Plan returns the plan for h, its architecture arch (from facts; "" when unknown, which is
// an error for airgap installs).
func (pl *Planner) Plan(h *inventory.Host, arch string) (*HostPlan, error) {
	return pl.plan(h, &facts.Host{Arch: arch})
}

// plan builds h's plan from its facts f (architecture, SELinux, distribution; edge.go).
func (pl *Planner) plan(h *inventory.Host, f *facts.Host) (*HostPlan, error) {
	c := pl.Cluster
	arch := f.Arch
	p := &HostPlan{Host: h, First: c.IsFirstServer(h), Service: k3s.Unit(string(h.Role))}
	cfg := c.HostConfigOn(h, hostEnv(f))
	p.Config = cfg
	y, err := templates.K3sConfig(h.Role, cfg)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	p.ConfigYAML = y
	pl.scriptOnce.Do(func() { pl.script, pl.scriptErr = pl.installScript() })
	script, err := pl.script, pl.scriptErr
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	p.Files = append(p.Files, script.file)
	p.ScriptSource = script.source

	// k3strap starts the service (without blocking, the supervisor watches) and enables it
	// itself (see installCmd).
	p.InstallEnv = []string{"INSTALL_K3S_EXEC=" + string(h.Role), "INSTALL_K3S_SKIP_START=true", "INSTALL_K3S_SKIP_ENABLE=true"}
	switch c.Spec.K3s.Install {
	case inventory.Airgap:
		p.Airgap = true
		art, ok := pl.airgapArtifacts(arch)
		if !ok {
			return nil, fmt.Errorf("host %s is %s but spec.k3s.airgap has no %s artifacts", h.Name, orUnknown(arch), orUnknown(arch))
		}
		bin, err := pl.artifact(art.Binary, k3s.PathBinary, 0o755, art.Checksums, binaryName(arch))
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		p.Files = append(p.Files, bin)
		if art.Images != "" {
			img, err := pl.artifact(art.Images, path.Join(k3s.DirImages, filepath.Base(art.Images)), 0o644, art.Checksums, filepath.Base(art.Images))
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", h.Name, err)
			}
			p.Files = append(p.Files, img)
		}
		p.InstallEnv = append(p.InstallEnv, "INSTALL_K3S_SKIP_DOWNLOAD=true")
	default:
		if v := c.Spec.K3s.Version; v != "" {
			p.InstallEnv = append(p.InstallEnv, "INSTALL_K3S_VERSION="+v)
		} else if ch := c.Spec.K3s.Channel; ch != "" {
			p.InstallEnv = append(p.InstallEnv, "INSTALL_K3S_CHANNEL="+ch)
		}
	}
	p.Files = append(p.Files, contentFile(k3s.PathConfig, 0o600, y, true))
	if err := pl.edgeFiles(p, f); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if err := pl.proxyFile(p); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if p.First {
		addons, err := pl.addonFiles()
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		p.Files = append(p.Files, addons...)
	}
	return p, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown architecture"
	}
	return s
}

// binaryName is the K3s release file name of the binary for arch (docs/k3s.md#airgap).
func binaryName(arch string) string {
	switch arch {
	case "arm64":
		return "k3s-arm64"
	case "arm":
		return "k3s-armhf"
	}
	return "k3s"
}

// artifact describes a local airgap file, verified against the checksums file when given.
func (pl *Planner) artifact(local, remotePath string, mode os.FileMode, checksums, releaseName string) (File, error) {
	local = pl.Cluster.ResolvePath(local)
	st, err := os.Stat(local)
	if err != nil {
		return File{}, fmt.Errorf("airgap artifact: %w", err)
	}
	sum, err := pl.sha256(local)
	if err != nil {
		return File{}, err
	}
	if checksums != "" {
		want, err := lookupChecksum(pl.Cluster.ResolvePath(checksums), releaseName, filepath.Base(local))
		if err != nil {
			return File{}, err
		}
		if want != sum {
			return File{}, fmt.Errorf("airgap artifact %s has sha256 %s but %s says %s: the file is corrupt or from another release", local, sum, checksums, want)
		}
	}
	return File{Path: remotePath, Mode: mode, LocalPath: local, SHA256: sum, Size: st.Size(), Restart: true}, nil
}

func (pl *Planner) sha256(p string) (string, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if s, ok := pl.sums[p]; ok {
		return s, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	s := hex.EncodeToString(h.Sum(nil))
	if pl.sums == nil {
		pl.sums = map[string]string{}
	}
	pl.sums[p] = s
	return s, nil
}

// lookupChecksum finds the digest of one of names in a sha256sum-<arch>.txt file
// ("<hex>  <name>" lines).
func lookupChecksum(file string, names ...string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("airgap checksums: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n := strings.TrimPrefix(f[1], "*")
		for _, want := range names {
			if n == want {
				return strings.ToLower(f[0]), nil
			}
		}
	}
	return "", fmt.Errorf("airgap checksums %s has no entry for %s", file, strings.Join(names, " or "))
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// ManagedPaths lists the files whose checksums the facts script reports for h: every path a
// plan of h can hold, whatever h's architecture turns out to be (the token file, config.yaml,
// the install script, the airgap binary and images of every architecture, the unit and its env
// file, the proxy environment, and on the first server the add-on manifests). Facts are gathered before the
// architecture is known, so this is the one list both use: Plan only writes paths from it.
func (pl *Planner) ManagedPaths(h *inventory.Host) []string {
	c := pl.Cluster
	paths := []string{k3s.PathTokenFile, k3s.PathConfig, k3s.PathInstallScript}
	if c.Spec.K3s.Install == inventory.Airgap {
		paths = append(paths, k3s.PathBinary)
		seen := map[string]bool{}
		for _, a := range c.Spec.K3s.Airgap {
			if a.Images != "" {
				p := k3s.DirImages + "/" + baseName(a.Images)
				if !seen[p] {
					seen[p] = true
					paths = append(paths, p)
				}
			}
		}
	}
	svc := k3s.Unit(string(h.Role))
	paths = append(paths, k3s.DirSystemd+"/"+svc+".service", k3s.DirSystemd+"/"+svc+".service.env")
	paths = append(paths, pl.edgePaths(h)...)
	if c.HostProxy(h) != nil {
		paths = append(paths, k3s.PathProxyEnv)
	}
	sort.Strings(paths[3:])
	if c.IsFirstServer(h) {
		// Add-on manifests that cannot be rendered are reported by the plan step.
		if addons, err := pl.addonFiles(); err == nil {
			for _, f := range addons {
				paths = append(paths, f.Path)
			}
		}
	}
	return paths
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
