// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadOptions tune Load and Parse.
type LoadOptions struct {
	// Override is the override layer the command layer builds (cmd/k3strap: K3STRAP_*
	// environment variables and command-line flags, flag > env > file). Load calls it after
	// decoding the file and resolving its paths, before defaults and validation. It sets the
	// fields it overrides on c, records each in c.Overridden (field path → where the value
	// came from, for messages), and returns the values that do not convert (errors without a
	// file position). Nil means the file alone.
	Override func(c *Cluster) ErrorList
	// SkipFileChecks skips checking that the local files the inventory names (airgap binary,
	// images and checksums, external cloud controller and Calico manifests) exist. For
	// validating inventories whose artifacts are elsewhere (tests, examples); never for an
	// install.
	SkipFileChecks bool
}

// DefaultKnownHosts is the known_hosts file used when the inventory names none ("~" is $HOME).
const DefaultKnownHosts = "~/.ssh/known_hosts"

// Load reads the inventory at path, decodes it strictly, applies the overrides of
// opts.Override, the defaults (ApplyDefaults) and resolves local paths (ResolvePath), then
// validates it.
//
// Errors: a file that cannot be read gives the os error wrapped (errors.Is(err,
// fs.ErrNotExist) works); every problem in the content — YAML syntax, unknown fields (with
// "did you mean"), type errors, bad taints, failed validation — is collected into one
// ErrorList whose entries carry file, line, column, host and fix. On any error the cluster is
// nil.
func Load(path string, opts LoadOptions) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	return Parse(path, data, opts)
}

// Parse is Load for content already in memory (e.g. read from stdin). source names the content
// in errors and is the base for relative paths (its directory); empty means the current
// directory.
func Parse(source string, data []byte, opts LoadOptions) (*Cluster, error) {
	c := &Cluster{}
	d, fatal := decodeDocument(source, data, c, clusterDocument)
	if fatal != nil {
		return nil, fatal
	}
	c.Source = source
	c.Positions = d.pos
	c.KeyPositions = d.keyPos
	c.resolvePaths()
	errs := d.errs
	if opts.Override != nil {
		errs = append(errs, opts.Override(c)...)
	}
	c.normalizeAddresses()                      // the file's and the overrides' (a fleet's defaults) alike
	errs = append(errs, c.applyBundle(opts)...) // bundle.go
	c.ApplyDefaults()
	for _, e := range errs {
		if e.Host == "" {
			e.Host = c.hostOf(e.Path)
		}
	}
	for _, e := range c.ValidateWith(ValidateOptions{SkipFileChecks: opts.SkipFileChecks}) {
		if !underFailed(e.Path, d.failed) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return c, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a YAML parser error ("yaml: line 3: mapping values are not allowed in this
// context") into a FieldError with the line of the problem.
//
// The YAML parser reports the line where the enclosing block starts (and, for parser errors,
// counts it from 0), not the line of the problem; so the line reported is the first line at
// which a prefix of the document fails with the same problem, falling back to the parser's.
func syntaxError(file string, data []byte, err error) *FieldError {
	e := &FieldError{File: file, Message: "YAML syntax error: " + withoutQuotes(strings.TrimPrefix(err.Error(), "yaml: ")),
		Fix: "check indentation (spaces, not tabs) and quote values that contain ': ' or start with a special character"}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Message = "YAML syntax error: " + withoutQuotes(m[2])
	}
	if n := problemLine(data, yamlProblem(err)); n > 0 {
		e.Line = n
	}
	return e
}

// maxSyntaxScanLines bounds problemLine's quadratic scan.
const maxSyntaxScanLines = 5000

// problemLine returns the 1-based number of the first line at which the document cut after
// that line fails to parse with problem, or 0.
func problemLine(data []byte, problem string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSyntaxScanLines {
		return 0
	}
	for n := 1; n <= len(lines); n++ {
		if err := parseAll(bytes.Join(lines[:n], nil)); err != nil && yamlProblem(err) == problem {
			return n
		}
	}
	return 0
}

// parseAll parses every document of data, returning the first error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// yamlProblem strips "yaml: line N: " from a parser error.
func yamlProblem(err error) string {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		return m[2]
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// underFailed reports whether path is, or lies under, a path whose value did not decode.
func underFailed(path string, failed map[string]bool) bool {
	for p := path; ; p = parentPath(p) {
		if failed[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// parentPath strips the last ".field" or "[n]" of a field path; "" for a top-level field.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

var hostPathRE = regexp.MustCompile(`^spec\.hosts\[(\d+)\]`)

// hostOf returns the name of the host a field path lies in ("spec.hosts[2].taints[0]" -> the
// third host's name), or "".
func (c *Cluster) hostOf(path string) string {
	m := hostPathRE.FindStringSubmatch(path)
	if m == nil {
		return ""
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(c.Spec.Hosts) {
		return ""
	}
	return c.Spec.Hosts[i].Name
}

// ApplyDefaults fills the unset cluster-wide values with k3strap's defaults: ssh user root,
// port 22, connectTimeout 10s, knownHosts ~/.ssh/known_hosts (with $HOME expanded), install
// online, cloudController embedded, cni type flannel and kernelPolicy strict. Per-host SSH
// fields stay empty (they inherit, see HostSSH); the token stays empty (the installer reads
// it back from the first server or generates one). Load calls it; call it on clusters built in
// code.
func (c *Cluster) ApplyDefaults() {
	// SSH user, port and known_hosts stay unset here when the file leaves them out: the
	// installer first consults ~/.ssh/config for them (HostName, User, Port, IdentityFile,
	// UserKnownHostsFile, ProxyJump), then HostSSH's defaults (root, 22,
	// ~/.ssh/known_hosts) apply.
	s := &c.Spec.SSH
	if s.ConnectTimeout == 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	k := &c.Spec.K3s
	if k.Install == "" {
		k.Install = Online
	}
	if k.CloudController == "" {
		k.CloudController = CloudControllerEmbedded
	}
	if c.Spec.CNI.Type == "" {
		c.Spec.CNI.Type = CNIFlannel
	}
	if c.Spec.CNI.KernelPolicy == "" {
		c.Spec.CNI.KernelPolicy = KernelPolicyStrict
	}
}

// ResolvePath returns the local file path p as k3strap uses it: "~" or a leading "~/" expands
// to $HOME; a relative path is taken relative to the directory of the inventory file (Source;
// the current directory when Source is empty) and made absolute; an absolute path is cleaned.
// Empty stays empty. "~user" forms are not expanded.
func (c *Cluster) ResolvePath(p string) string {
	base := ""
	if c.Source != "" {
		base = filepath.Dir(c.Source)
	}
	return resolveFrom(base, p)
}

// resolveFrom resolves p against directory base ("" = current directory); see ResolvePath.
func resolveFrom(base, p string) string {
	if p == "" {
		return ""
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
		return p
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// NormalizeAddress returns a host address as k3strap keeps it: surrounding spaces trimmed and
// an IPv6 address without brackets ("[fd00::1]" and "fd00::1" are the same host). Every
// host:port k3strap builds joins the bare address with net.JoinHostPort, which adds the
// brackets an IPv6 address needs — once. Anything else is returned trimmed, unchanged.
func NormalizeAddress(a string) string {
	a = strings.TrimSpace(a)
	if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		if inner := a[1 : len(a)-1]; net.ParseIP(inner) != nil && strings.Contains(inner, ":") {
			return inner
		}
	}
	return a
}

// normalizeAddresses applies NormalizeAddress, once at load, to every address of the file:
// the hosts', their bastions', the API endpoint's and its kube-vip address.
func (c *Cluster) normalizeAddresses() {
	n := func(p *string) { *p = NormalizeAddress(*p) }
	bastion := func(s *SSH) {
		if s.Bastion != nil {
			n(&s.Bastion.Address)
		}
		for i := range s.Bastions {
			n(&s.Bastions[i].Address)
		}
	}
	bastion(&c.Spec.SSH)
	for i := range c.Spec.Hosts {
		n(&c.Spec.Hosts[i].Address)
		bastion(&c.Spec.Hosts[i].SSH)
	}
	if e := c.Spec.K3s.APIEndpoint; e != nil {
		n(&e.Address)
		if e.KubeVIP != nil {
			n(&e.KubeVIP.Address)
		}
	}
}

// resolvePaths replaces every local path of the file with its resolved form (ResolvePath).
func (c *Cluster) resolvePaths() {
	r := func(p *string) { *p = c.ResolvePath(*p) }
	sshPaths := func(s *SSH) {
		r(&s.KeyPath)
		r(&s.KnownHosts)
		r(&s.SudoPasswordFile)
		r(&s.CertificatePath)
		r(&s.KeyPassphraseFile)
		if s.Bastion != nil {
			r(&s.Bastion.KeyPath)
		}
		for i := range s.Bastions {
			r(&s.Bastions[i].KeyPath)
		}
	}
	sshPaths(&c.Spec.SSH)
	for i := range c.Spec.Hosts {
		sshPaths(&c.Spec.Hosts[i].SSH)
	}
	for arch, a := range c.Spec.K3s.Airgap {
		r(&a.Binary)
		r(&a.Images)
		r(&a.Checksums)
		c.Spec.K3s.Airgap[arch] = a
	}
	if e := c.Spec.K3s.ExternalCloudController; e != nil {
		r(&e.Manifest)
	}
	if cal := c.Spec.CNI.Calico; cal != nil {
		r(&cal.Manifest)
	}
	if p := c.Spec.Proxy; p != nil {
		r(&p.PasswordFile)
	}
	for i := range c.Spec.Hosts {
		if p := c.Spec.Hosts[i].Proxy; p != nil {
			r(&p.PasswordFile)
		}
	}
}
