// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pull is pull mode (docs/edge-pull.md): a box fetches its site's desired state (an
// inventory) from a Git repository or an HTTPS URL, verifies it before anything else — the
// commit's SSH signature against a pinned allowed_signers file (git's gpg.format=ssh,
// ssh-keygen(1) "ALLOWED SIGNERS"), or for an HTTPS file its minisign signature by a pinned
// key or its pinned sha256 — and converges the
// box in local mode when the verified revision differs from the one applied. It keeps a status
// file (desired and applied revision, whether the source was reachable, the last result) and
// writes the systemd service and timer that run it.
package pull

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"aead.dev/minisign"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of a pull configuration (docs/edge-pull.md "Configuration").
const (
	// ConfigPath is where `pull run` and the unit read the configuration by default.
	ConfigPath = "/etc/k3strap/pull.yaml"
	// DefaultStateDir is where the fetched repository, the verified tree and the status live.
	DefaultStateDir = "/var/lib/k3strap/pull"
	// DefaultTokenFile is the cluster token file firstboot's payload installs (0600).
	DefaultTokenFile = "/var/lib/k3strap/token"
	// DefaultInterval is the timer's period; DefaultRetryFor how long one run retries an
	// unreachable source before it gives up until the next period.
	DefaultInterval = 5 * time.Minute
	DefaultRetryFor = 2 * time.Minute
	// GitNamespace is the SSHSIG namespace git signs commits in (git's gpg-interface.c: "git").
	GitNamespace = "git"
)

// Config is a pull configuration file (pull.yaml).
type Config struct {
	// Host is this box's host in the site inventory (default: this machine's short host name).
	Host string `yaml:"host"`
	// Source is where the desired state comes from: exactly one of Git and HTTPS.
	Source Source `yaml:"source"`
	// Verify is how the desired state is verified; required for a Git source.
	Verify Verify `yaml:"verify"`
	// Interval is the timer's period (`pull install`); RetryFor how long a run retries an
	// unreachable source (bounded backoff) before it reports it and exits.
	Interval Duration `yaml:"interval"`
	RetryFor Duration `yaml:"retryFor"`
	// StateDir holds the fetched repository, the verified tree and status.json.
	StateDir string `yaml:"stateDir"`
	// TokenFile is the cluster token (first line, mode 0600); unused when the inventory has one.
	TokenFile string `yaml:"tokenFile"`
	// Management, when set, is the management cluster each run's status is reported into.
	Management *Management `yaml:"management"`

	// Path is the file the configuration was read from (not in the file).
	Path string `yaml:"-"`
	// HTTPClient fetches an HTTPS source (not in the file; nil: http.DefaultClient, which
	// trusts the system's CAs).
	HTTPClient *http.Client `yaml:"-"`
}

// Source is the desired state's origin.
type Source struct {
	Git   *GitSource   `yaml:"git"`
	HTTPS *HTTPSSource `yaml:"https"`
}

// GitSource is a Git repository: URL (git://, https://, ssh:// or a local path), Ref (a branch
// or tag name, or a full refs/... name) and Path (the site's inventory in the repository).
type GitSource struct {
	URL  string `yaml:"url"`
	Ref  string `yaml:"ref"`
	Path string `yaml:"path"`
}

// HTTPSSource is one inventory file at an HTTPS URL, verified by its pinned SHA256 (hex), or
// by a minisign signature at URL+".minisig" (minisign's convention) made by the key in the
// file MinisignKey (minisign -G's minisign.pub), or both.
type HTTPSSource struct {
	URL         string `yaml:"url"`
	SHA256      string `yaml:"sha256"`
	MinisignKey string `yaml:"minisignKey"`
}

// Verify names the pinned keys: AllowedSigners is an OpenSSH allowed_signers file
// (ssh-keygen(1) "ALLOWED SIGNERS"); a commit must be signed by one of its keys in the "git"
// namespace.
type Verify struct {
	AllowedSigners string `yaml:"allowedSigners"`
}

// Management names the management cluster a box reports its status into (docs/fleet.md
// "Status in a management cluster"): Kubeconfig is the path of the site's own credential, the
// kubeconfig `k3strap fleet management credential` writes (mode 0600; it may write only this
// site's SiteStatus), and Site the site's name there (a DNS-1123 label: the SiteStatus object's
// name).
type Management struct {
	Kubeconfig string `yaml:"kubeconfig"`
	Site       string `yaml:"site"`
}

// Duration is a YAML duration written as Go writes it (30s, 5m, 1h).
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (write e.g. 30s or 5m)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// ConfigError is an invalid configuration: the file, the line (0: the file as a whole), what is
// wrong and the fix. The command layer exits 2 for it.
type ConfigError struct {
	File string
	Line int
	Msg  string
	Fix  string
}

func (e *ConfigError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	s := loc + ": " + e.Msg
	if e.Fix != "" {
		s += " — fix: " + e.Fix
	}
	return s
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// LoadConfig reads and validates the configuration at path. Unknown keys, wrong types and
// missing or contradictory settings are a *ConfigError naming the file and line; the file's
// contents are never quoted beyond a key's name.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: fmt.Sprintf("cannot read the pull configuration: %v", errors.Unwrap(err)), Fix: "write it (docs/edge-pull.md) or give its path with --config"}
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{File: path, Msg: "the file is empty", Fix: "write the source and its verification (docs/edge-pull.md)"}
		}
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			line, msg := 0, te.Errors[0]
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				fmt.Sscan(m[1], &line)
				msg = m[2]
			}
			msg = strings.Replace(msg, "in type pull.", "in ", 1)
			return nil, &ConfigError{File: path, Line: line, Msg: msg, Fix: "see the keys in docs/edge-pull.md"}
		}
		if m := yamlLine.FindStringSubmatch(strings.TrimPrefix(err.Error(), "yaml: ")); m != nil {
			var line int
			fmt.Sscan(m[1], &line)
			return nil, &ConfigError{File: path, Line: line, Msg: "not valid YAML: " + m[2]}
		}
		return nil, &ConfigError{File: path, Msg: "not valid YAML: " + err.Error()}
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(b, &doc)
	c.Path = path
	if err := c.validate(&doc); err != nil {
		return nil, err
	}
	return &c, nil
}

// lineOf returns the line of the key at the dotted path in doc (0 when absent).
func lineOf(doc *yaml.Node, path string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, k := range strings.Split(path, ".") {
		if n == nil || n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				line, next = n.Content[i].Line, n.Content[i+1]
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

func (c *Config) validate(doc *yaml.Node) error {
	bad := func(key, msg, fix string) error {
		return &ConfigError{File: c.Path, Line: lineOf(doc, key), Msg: msg, Fix: fix}
	}
	g, h := c.Source.Git, c.Source.HTTPS
	switch {
	case g == nil && h == nil:
		return bad("source", "no source: the desired state comes from source.git (url, ref, path) or source.https (url, sha256)", "add one of them")
	case g != nil && h != nil:
		return bad("source", "source.git and source.https are both set", "keep one")
	}
	if g != nil {
		if g.URL == "" || g.Ref == "" || g.Path == "" {
			return bad("source.git", "source.git needs url, ref (a branch or tag) and path (the site's inventory in the repository)", "set all three")
		}
		if u, err := url.Parse(g.URL); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				return bad("source.git.url", "the URL carries a password, which would reach logs and the status", "use a read-only deploy key or a credential helper, not a password in the URL")
			}
		}
		if p := filepath.ToSlash(filepath.Clean(g.Path)); !filepath.IsLocal(g.Path) || p != strings.TrimPrefix(g.Path, "./") {
			return bad("source.git.path", "path must be a relative path inside the repository, without .. (e.g. sites/store7/cluster.yaml)", "write it relative to the repository's root")
		}
		if c.Verify.AllowedSigners == "" {
			return bad("source.git", "the source has no verification: a Git source needs verify.allowedSigners (the pinned signers' public keys)", "set verify.allowedSigners to an OpenSSH allowed_signers file (docs/edge-pull.md \"Signing\"); unverified desired state is never applied")
		}
	}
	if h != nil {
		u, err := url.Parse(h.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return bad("source.https.url", "source.https.url must be an https:// URL", "give the inventory file's https:// URL")
		}
		if u.User != nil {
			return bad("source.https.url", "the URL carries credentials, which would reach logs and the status", "drop them from the URL")
		}
		if h.SHA256 == "" && h.MinisignKey == "" {
			return bad("source.https", "the source has no verification: source.https needs sha256 (the file's pinned SHA-256) or minisignKey (the signer's minisign public key file)", "set sha256 to `sha256sum FILE`'s first field, or sign the file with minisign and set minisignKey; unverified desired state is never applied")
		}
		if h.SHA256 != "" && !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h.SHA256) {
			return bad("source.https.sha256", "sha256 must be 64 lowercase hex digits", "set it to `sha256sum FILE`'s first field")
		}
		if h.MinisignKey != "" {
			if _, err := minisign.PublicKeyFromFile(h.MinisignKey); err != nil {
				return bad("source.https.minisignKey", "not a minisign public key: "+err.Error(), "give the path of the signer's minisign.pub (minisign -G writes it)")
			}
		}
		if c.Verify.AllowedSigners != "" {
			return bad("verify.allowedSigners", "verify.allowedSigners verifies Git commits; an HTTPS file is verified by source.https.sha256", "drop verify.allowedSigners")
		}
	}
	if c.Verify.AllowedSigners != "" {
		if _, err := LoadAllowedSigners(c.Verify.AllowedSigners); err != nil {
			return bad("verify.allowedSigners", err.Error(), "write one line per signer: `PRINCIPAL [namespaces=\"git\"] KEYTYPE BASE64` (ssh-keygen(1) ALLOWED SIGNERS)")
		}
	}
	if c.Interval == 0 {
		c.Interval = Duration(DefaultInterval)
	}
	if c.Interval < Duration(time.Minute) {
		return bad("interval", fmt.Sprintf("interval %s is shorter than a minute", time.Duration(c.Interval)), "use 1m or more")
	}
	if c.RetryFor == 0 {
		c.RetryFor = Duration(DefaultRetryFor)
	}
	if c.RetryFor < 0 || c.RetryFor > c.Interval {
		return bad("retryFor", fmt.Sprintf("retryFor %s must be between 0 and the interval (%s)", time.Duration(c.RetryFor), time.Duration(c.Interval)), "shorten it: the next run retries anyway")
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.TokenFile == "" {
		c.TokenFile = DefaultTokenFile
	}
	if !filepath.IsAbs(c.StateDir) || !filepath.IsAbs(c.TokenFile) {
		return bad("stateDir", "stateDir and tokenFile must be absolute paths", "write them from /")
	}
	if m := c.Management; m != nil {
		if m.Kubeconfig == "" || !filepath.IsAbs(m.Kubeconfig) {
			return bad("management", "management.kubeconfig must be the absolute path of the site's credential", "write the file `k3strap fleet management credential --site NAME -O FILE` made to the box and give its path from /")
		}
		if errs := validation.IsDNS1123Label(m.Site); len(errs) > 0 {
			return bad("management", fmt.Sprintf("management.site %q is not a site name (a DNS-1123 label: lower-case letters, digits and '-')", m.Site), "set it to the site's name, the one the credential was made for")
		}
	}
	return nil
}

// SourceString says where the desired state comes from, for logs and the status (a URL's
// user name, if any, is dropped).
func (c *Config) SourceString() string {
	if g := c.Source.Git; g != nil {
		return fmt.Sprintf("%s ref %s path %s", redactURL(g.URL), g.Ref, g.Path)
	}
	if h := c.Source.HTTPS; h != nil {
		s := redactURL(h.URL)
		if h.SHA256 != "" {
			s += " sha256 " + h.SHA256
		}
		if h.MinisignKey != "" {
			s += " minisign key " + h.MinisignKey
		}
		return s
	}
	return ""
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}
