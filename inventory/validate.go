// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/k3s"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateOptions tune ValidateWith.
type ValidateOptions struct {
	// SkipFileChecks skips checking that referenced local files exist (see
	// LoadOptions.SkipFileChecks).
	SkipFileChecks bool
}

// Validate checks the whole inventory and returns every problem found (nil when none), each
// with the position of the offending key or value (from Positions / KeyPositions; none for a
// cluster built in code or a value set by an override) and, for a problem in a host, the host's
// name. It checks that local files exist; see ValidateWith to skip that. Load calls it.
//
// Rules (issue "inventory"; docs/k3s.md for the K3s facts):
//   - apiVersion k3strap.io/v1alpha1, kind Cluster, metadata.name a DNS-1123 label;
//   - at least one host; host names DNS-1123 subdomains (they are node names) and unique;
//     addresses (with the effective SSH port) unique; role server or agent; agents need a server;
//   - labels: keys qualified names, values label values, and no kubernetes.io / k8s.io key a
//     kubelet may not set on itself (K3s passes labels to --node-labels; the kubelet then
//     refuses to start); no taint key repeated with one effect;
//   - K3s config keys (spec.k3s.config, hosts[].k3s.config) must be flags of the K3s flag table
//     for the role they apply to (cluster-wide: servers, which include the agent flags; per host:
//     the host's role), with a value of the flag's kind; keys k3strap renders itself (node-name,
//     node-label, node-taint, token, agent-token, token-file, agent-token-file, server,
//     cluster-init) are rejected with the inventory field to use; a server host may not
//     override a key K3s requires to match on every server (CriticalControlArgs,
//     k3s-io/k3s pkg/daemons/config/types.go: "critical configuration value mismatch");
//   - version xor channel, version vX.Y.Z+k3sN, channel only with online installs; airgap needs
//     artifacts for amd64, arm64 or arm with a binary, and the files must exist;
//   - cloudController embedded, external (with an existing externalCloudController.manifest)
//     or disabled, not contradicted by disable-cloud-controller in the config (docs/failure-modes.md F1);
//   - cni.type, cni.backend for that type, kernelPolicy; flannel-backend in the config must
//     agree with cni (docs/cni.md);
//   - SSH ports 1..65535, connect timeouts not negative, a bastion has an address;
//   - proxy (spec.proxy, hosts[].proxy; proxy.go, docs/proxy.md): http(s) URLs with a host and
//     no path, no password in a URL (passwordEnv or passwordFile instead, at most one, only
//     with a user in the URL), noProxy entries one host, domain, address or CIDR each.
func (c *Cluster) Validate() ErrorList { return c.ValidateWith(ValidateOptions{}) }

// ValidateWith is Validate with options.
func (c *Cluster) ValidateWith(o ValidateOptions) ErrorList {
	v := &validator{c: c, opts: o, table: flagTable()}
	v.document()
	v.release()
	v.airgap()
	v.edge()
	v.cloudController()
	v.upgrade()
	v.etcdSnapshots()
	v.dedicated()
	v.cni()
	v.rancher()
	v.ssh(&c.Spec.SSH, "spec.ssh", "")
	v.proxy()
	v.hosts()
	v.k3sConfig(c.Spec.K3s.Config, "spec.k3s.config", nil)
	v.errs.Sort()
	return v.errs
}

type validator struct {
	c     *Cluster
	opts  ValidateOptions
	table *k3s.Table
	errs  ErrorList
}

// at says whether a problem is about a field's key or its value.
type at int

const (
	atValue at = iota
	atKey
)

// PositionOf returns where the value at a field path stands in Source; for a path that is not
// in the file, the position of its closest enclosing field (zero Position when none).
func (c *Cluster) PositionOf(path string) Position { return c.position(path, atValue) }

func (c *Cluster) position(path string, w at) Position {
	first, second := c.Positions, c.KeyPositions
	if w == atKey {
		first, second = second, first
	}
	for p := path; ; p = parentPath(p) {
		if pos, ok := first[p]; ok {
			return pos
		}
		if pos, ok := second[p]; ok {
			return pos
		}
		if p == "" {
			return Position{}
		}
	}
}

func (v *validator) add(path string, w at, host, msg, fix string) {
	e := &FieldError{File: v.c.Source, Host: host, Path: path, Message: msg, Fix: fix}
	if src, ok := v.c.Overridden[path]; ok {
		e.File = ""
		e.Message += " (set by " + src + ")"
	} else {
		p := v.c.position(path, w)
		e.Line, e.Column = p.Line, p.Column
	}
	v.errs = append(v.errs, e)
}

func (v *validator) document() {
	c := v.c
	switch c.APIVersion {
	case APIVersion:
	case "":
		v.add("apiVersion", atValue, "", "apiVersion is missing", "add apiVersion: "+APIVersion+" at the top")
	default:
		v.add("apiVersion", atValue, "", fmt.Sprintf("apiVersion %q is not supported", c.APIVersion), "write apiVersion: "+APIVersion)
	}
	switch c.Kind {
	case Kind:
	case "":
		v.add("kind", atValue, "", "kind is missing", "add kind: "+Kind+" at the top")
	default:
		v.add("kind", atValue, "", fmt.Sprintf("kind %q is not supported", c.Kind), "write kind: "+Kind)
	}
	switch name := c.Metadata.Name; {
	case name == "":
		v.add("metadata.name", atValue, "", "metadata.name is missing", "add metadata: {name: my-cluster}")
	case len(validation.IsDNS1123Label(name)) > 0:
		v.add("metadata.name", atValue, "", fmt.Sprintf("cluster name %q is not a DNS-1123 label", name),
			"use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"+suggestName(name, validation.IsDNS1123Label))
	}
	if len(c.Spec.Hosts) == 0 {
		v.add("spec.hosts", atKey, "", "the inventory declares no hosts", "add at least one host with role: server under spec.hosts")
	}
}

// suggestName returns ", e.g. NAME" with name made valid by lower-casing it and replacing
// invalid characters with '-', or "" when that does not give a valid name.
func suggestName(name string, check func(string) []string) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, name)
	s = strings.Trim(s, "-.")
	if s == "" || s == name || len(check(s)) > 0 {
		return ""
	}
	return ", e.g. " + s
}

var channelRE = regexp.MustCompile(`^(stable|latest|testing|v\d+\.\d+)$`)

func (v *validator) release() {
	k := &v.c.Spec.K3s
	if k.Version != "" && k.Channel != "" {
		v.add("spec.k3s.channel", atKey, "", "spec.k3s.version and spec.k3s.channel are both set",
			"keep version (a fixed release) or channel (the newest release of a channel), not both")
	}
	if k.Version != "" && !k3s.IsRelease(k.Version) {
		fix := "write a K3s release such as v1.31.4+k3s1"
		switch s := k.Version; {
		case k3s.IsRelease("v" + s):
			fix = "write v" + s
		case k3s.IsRelease(s + "+k3s1"):
			fix = fmt.Sprintf("K3s releases carry a +k3sN suffix: write %s+k3s1", s)
		case k3s.IsRelease("v" + s + "+k3s1"):
			fix = fmt.Sprintf("K3s releases look like v1.31.4+k3s1: write v%s+k3s1", s)
		}
		v.add("spec.k3s.version", atValue, "", fmt.Sprintf("K3s version %q is not a K3s release", k.Version), fix)
	}
	if k.Channel != "" {
		if !channelRE.MatchString(k.Channel) {
			v.add("spec.k3s.channel", atValue, "", fmt.Sprintf("K3s channel %q is not a release channel", k.Channel),
				"use stable, latest, testing or a minor such as v1.31")
		}
		if k.Install == Airgap {
			v.add("spec.k3s.channel", atKey, "", "a channel only applies to online installs; an airgap install runs the uploaded binary",
				"remove channel (set version to the airgap binary's release instead)")
		}
	}
	switch k.Install {
	case Online, Airgap, "":
	default:
		v.add("spec.k3s.install", atValue, "", fmt.Sprintf("unknown install mode %q", k.Install), "write install: online or install: airgap")
	}
}

// Airgap architectures (Go names) and the names users often write instead.
var (
	airgapArchs   = []string{"amd64", "arm64", "arm"}
	archAliases   = map[string]string{"x86_64": "amd64", "x86-64": "amd64", "x64": "amd64", "aarch64": "arm64", "armhf": "arm", "armv7": "arm", "armv7l": "arm", "arm32": "arm"}
	releaseBinary = map[string]string{"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}
)

func (v *validator) airgap() {
	k := &v.c.Spec.K3s
	if k.Install == Airgap && len(k.Airgap) == 0 && k.AirgapBundle == "" {
		v.add("spec.k3s.install", atValue, "", "install: airgap needs the K3s artifacts in spec.k3s.airgap",
			"add spec.k3s.airgap.amd64 (and arm64/arm as your hosts need) with binary: and images: paths, or spec.k3s.airgapBundle: a tar from `k3strap bundle`")
	}
	archs := make([]string, 0, len(k.Airgap))
	for a := range k.Airgap {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	for _, arch := range archs {
		a := k.Airgap[arch]
		base := "spec.k3s.airgap." + arch
		if !slices.Contains(airgapArchs, arch) {
			fix := "use amd64, arm64 or arm (Go architecture names)"
			if alias, ok := archAliases[strings.ToLower(arch)]; ok {
				fix = "write " + alias + " (Go architecture names: amd64, arm64, arm)"
			}
			v.add(base, atKey, "", fmt.Sprintf("unknown airgap architecture %q", arch), fix)
			continue
		}
		if a.Binary == "" {
			v.add(base, atValue, "", fmt.Sprintf("spec.k3s.airgap.%s has no binary", arch),
				fmt.Sprintf("set binary: to the K3s binary for %s (%s in a K3s release)", arch, releaseBinary[arch]))
		}
		if k.Install != Airgap {
			continue
		}
		v.file(base+".binary", "", a.Binary, "airgap binary", fmt.Sprintf("download %s from the K3s release", releaseBinary[arch]))
		v.file(base+".images", "", a.Images, "airgap images archive", fmt.Sprintf("download k3s-airgap-images-%s.tar.zst from the K3s release", arch))
		v.file(base+".checksums", "", a.Checksums, "checksum file", fmt.Sprintf("download sha256sum-%s.txt from the K3s release, or remove checksums", arch))
	}
}

// file reports a local file named at path that does not exist or is not a regular file.
func (v *validator) file(path, host, p, what, howToGet string) {
	if v.opts.SkipFileChecks || p == "" {
		return
	}
	fix := "correct the path (relative paths are relative to the inventory file's directory) or " + howToGet
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(path, atValue, host, fmt.Sprintf("%s %s does not exist", what, p), fix)
	case err != nil:
		v.add(path, atValue, host, fmt.Sprintf("%s %s cannot be read: %v", what, p, errors.Unwrap(err)), fix)
	case !fi.Mode().IsRegular():
		v.add(path, atValue, host, fmt.Sprintf("%s %s is not a regular file", what, p), fix)
	}
}

// secretFile reports a local file holding a secret (p, resolved) that does not exist, is not a
// regular file, or that others than its owner may read (group or world bits set) — as ssh
// refuses such a private key. The file is never read here: its content is no message's.
func (v *validator) secretFile(path, host, p, what string) {
	if v.opts.SkipFileChecks || p == "" {
		return
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(path, atValue, host, fmt.Sprintf("%s %s does not exist", what, p), "create it with the password as its only line and run chmod 600 on it, or correct the path (relative paths are relative to the inventory file's directory)")
	case err != nil:
		v.add(path, atValue, host, fmt.Sprintf("%s %s cannot be read: %v", what, p, errors.Unwrap(err)), "make it readable by this user only (chmod 600 "+p+" as its owner)")
	case fi.IsDir():
		v.add(path, atValue, host, fmt.Sprintf("%s %s is a directory", what, p), "name the file that holds the password, not its directory")
	case !fi.Mode().IsRegular():
		v.add(path, atValue, host, fmt.Sprintf("%s %s is not a regular file", what, p), "name a regular file that holds the password")
	case runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0:
		v.add(path, atValue, host, fmt.Sprintf("%s %s is readable by others (mode %04o)", what, p, fi.Mode().Perm()), "run chmod 600 "+p)
	}
}

func (v *validator) cloudController() {
	k := &v.c.Spec.K3s
	mode := k.CloudController
	switch mode {
	case CloudControllerEmbedded, CloudControllerDisabled, "":
		if k.ExternalCloudController != nil {
			v.add("spec.k3s.externalCloudController", atKey, "",
				fmt.Sprintf("externalCloudController is set but cloudController is %s, so it would not be deployed", orEmbedded(mode)),
				"set cloudController: external to deploy it, or remove externalCloudController")
		}
	case CloudControllerExternal:
		if k.ExternalCloudController == nil || k.ExternalCloudController.Manifest == "" {
			v.add("spec.k3s.cloudController", atValue, "",
				"cloudController: external needs spec.k3s.externalCloudController.manifest: without a cloud controller the node.cloudprovider.kubernetes.io/uninitialized taint never clears and pods stay Pending",
				"set spec.k3s.externalCloudController.manifest to your cloud controller's manifest, or use cloudController: embedded")
		} else {
			v.file("spec.k3s.externalCloudController.manifest", "", k.ExternalCloudController.Manifest, "cloud controller manifest", "write the manifest there")
		}
	default:
		fix := "write cloudController: embedded, external or disabled"
		if s, ok := closest(string(mode), []string{"embedded", "external", "disabled"}); ok {
			fix = "did you mean " + s + "?"
		}
		v.add("spec.k3s.cloudController", atValue, "", fmt.Sprintf("unknown cloudController %q", mode), fix)
		return
	}
	if dcc := k.Config.DisableCloudController; dcc != nil {
		path := "spec.k3s.config.disable-cloud-controller"
		// disable-cloud-controller: true with the default mode is left to preflight's
		// CloudController check, which judges it together with kubelet-arg (F1): it is a
		// working (if limited) setup on its own, and the classic F1 trap with
		// cloud-provider=external — preflight names the check and the fix.
		if !*dcc && orEmbedded(mode) != CloudControllerEmbedded {
			v.add(path, atKey, "", fmt.Sprintf("disable-cloud-controller: false contradicts cloudController: %s", mode),
				"remove disable-cloud-controller; k3strap renders it from spec.k3s.cloudController")
		}
	}
}

func orEmbedded(m CloudControllerMode) CloudControllerMode {
	if m == "" {
		return CloudControllerEmbedded
	}
	return m
}

// Backends valid for each CNI type (issue "CNI"; docs/k3s.md#flannel for flannel, docs/cni.md for Calico).
var (
	flannelBackends = []string{"vxlan", "host-gw", "wireguard-native"}
	calicoBackends  = []string{"VXLAN", "VXLANCrossSubnet", "IPIP", "IPIPCrossSubnet", "WireGuard", "None"}
	// k3sFlannelBackends are the values K3s's flannel-backend flag accepts.
	k3sFlannelBackends = []string{"vxlan", "host-gw", "wireguard-native", "none"}
)

func (v *validator) cni() {
	n := &v.c.Spec.CNI
	typ := n.Type
	if typ == "" {
		typ = CNIFlannel
	}
	var backends []string
	switch typ {
	case CNIFlannel, CNIFlannelStandalone:
		backends = flannelBackends
	case CNICalico:
		backends = calicoBackends
	case CNINone:
	default:
		types := []string{string(CNIFlannel), string(CNICalico), string(CNIFlannelStandalone), string(CNINone)}
		fix := "write cni.type: flannel, calico, flannel-standalone or none"
		if s, ok := closest(string(typ), types); ok {
			fix = "did you mean " + s + "?"
		}
		v.add("spec.cni.type", atValue, "", fmt.Sprintf("unknown cni.type %q", typ), fix)
		typ = ""
	}
	if n.Backend != "" && typ != "" {
		switch {
		case typ == CNINone:
			v.add("spec.cni.backend", atKey, "", "cni.type none takes no backend", "remove cni.backend")
		case !slices.Contains(backends, n.Backend):
			fix := fmt.Sprintf("use one of %s for cni.type %s", strings.Join(backends, ", "), typ)
			if s, ok := closest(n.Backend, backends); ok {
				fix = "did you mean " + s + "?"
			}
			v.add("spec.cni.backend", atValue, "", fmt.Sprintf("%q is not a %s backend", n.Backend, typ), fix)
		}
	}
	switch n.KernelPolicy {
	case KernelPolicyStrict, KernelPolicyExclude, "":
	default:
		v.add("spec.cni.kernelPolicy", atValue, "", fmt.Sprintf("unknown kernelPolicy %q", n.KernelPolicy), "write kernelPolicy: strict (fail) or exclude (skip the CNI on hosts whose kernel lacks what it needs)")
	}
	if n.Calico != nil && typ != CNICalico && typ != "" {
		v.add("spec.cni.calico", atKey, "", fmt.Sprintf("cni.calico is set but cni.type is %s", typ), "set cni.type: calico, or remove cni.calico")
	}
	if n.Flannel != nil && typ != CNIFlannelStandalone && typ != "" {
		v.add("spec.cni.flannel", atKey, "", fmt.Sprintf("cni.flannel is set but cni.type is %s", typ), "set cni.type: flannel-standalone, or remove cni.flannel (embedded flannel is configured through cni.backend)")
	}
	if n.Calico != nil && typ == CNICalico {
		v.file("spec.cni.calico.manifest", "", n.Calico.Manifest, "Calico operator manifest", "download tigera-operator.yaml for your Calico version")
	}

	cfg := &v.c.Spec.K3s.Config
	if fb := cfg.FlannelBackend; fb != "" && typ != "" {
		path := "spec.k3s.config.flannel-backend"
		switch {
		case !slices.Contains(k3sFlannelBackends, fb):
			fix := "use vxlan, host-gw, wireguard-native or none"
			if s, ok := closest(fb, k3sFlannelBackends); ok {
				fix = "did you mean " + s + "?"
			}
			v.add(path, atValue, "", fmt.Sprintf("flannel-backend %q is not a backend K3s knows", fb), fix)
		case typ != CNIFlannel && fb != "none":
			v.add(path, atValue, "", fmt.Sprintf("flannel-backend: %s conflicts with cni.type: %s", fb, typ),
				fmt.Sprintf("remove flannel-backend from spec.k3s.config; k3strap sets flannel-backend: none for cni.type %s", typ))
		case typ == CNIFlannel && fb == "none":
			v.add(path, atValue, "", "flannel-backend: none turns off the pod network of cni.type: flannel",
				"remove flannel-backend and set cni.type: none (your own CNI), calico or flannel-standalone")
		case typ == CNIFlannel && n.Backend != "" && n.Backend != fb:
			v.add(path, atValue, "", fmt.Sprintf("flannel-backend: %s conflicts with cni.backend: %s", fb, n.Backend),
				"set the backend once, in spec.cni.backend")
		}
	}
	if typ == CNICalico && cfg.DisableNetworkPolicy != nil && !*cfg.DisableNetworkPolicy {
		v.add("spec.k3s.config.disable-network-policy", atKey, "",
			"disable-network-policy: false conflicts with cni.type: calico (K3s's network policy controller confuses Calico's Felix, projectcalico/calico#11051)",
			"remove disable-network-policy; k3strap sets it to true with Calico")
	}
}

func (v *validator) ssh(s *SSH, base, host string) {
	if s.Port != 0 && (s.Port < 1 || s.Port > 65535) {
		v.add(base+".port", atValue, host, fmt.Sprintf("SSH port %d is out of range", s.Port), "use a TCP port between 1 and 65535")
	}
	if s.ConnectTimeout < 0 {
		v.add(base+".connectTimeout", atValue, host, "connectTimeout is negative", "write a positive duration such as 10s")
	}
	v.secretFile(base+".sudoPasswordFile", host, s.SudoPasswordFile, "sudo password file")
	v.secretFile(base+".keyPassphraseFile", host, s.KeyPassphraseFile, "key passphrase file")
	if s.KeyPassphraseEnv != "" && s.KeyPassphraseFile != "" {
		v.add(base+".keyPassphraseFile", atKey, host, "keyPassphraseEnv and keyPassphraseFile are both set", "keep one of them")
	}
	if s.ProxyCommand != "" {
		if _, err := ExpandProxyCommand(s.ProxyCommand, ProxyTokens{}); err != nil {
			v.add(base+".proxyCommand", atValue, host, err.Error(), "use only %h, %p, %r, %n and %% (write %% for a literal percent sign)")
		}
		if s.Bastion != nil || len(s.Bastions) > 0 {
			v.add(base+".proxyCommand", atKey, host, "proxyCommand and a bastion are both set", "keep one: the ProxyCommand is the whole path to the host")
		}
	}
	if s.Bastion != nil && len(s.Bastions) > 0 {
		v.add(base+".bastions", atKey, host, "bastion and bastions are both set", "list every jump host under bastions, in the order they are crossed")
	}
	check := func(b *Bastion, at string) {
		if b.Address == "" {
			v.add(at, atKey, host, "the bastion has no address", "set address to the jump host's IP or DNS name")
		}
		if b.Port != 0 && (b.Port < 1 || b.Port > 65535) {
			v.add(at+".port", atValue, host, fmt.Sprintf("bastion SSH port %d is out of range", b.Port), "use a TCP port between 1 and 65535")
		}
	}
	if s.Bastion != nil {
		check(s.Bastion, base+".bastion")
	}
	for i := range s.Bastions {
		check(&s.Bastions[i], fmt.Sprintf("%s.bastions[%d]", base, i))
	}
}

var roleHints = map[string]Role{"master": RoleServer, "control-plane": RoleServer, "controlplane": RoleServer, "worker": RoleAgent, "node": RoleAgent}

func (v *validator) hosts() {
	c := v.c
	names := map[string]int{}
	addrs := map[string]int{}
	var agents []string
	servers := 0
	local := ""
	for i := range c.Spec.Hosts {
		h := &c.Spec.Hosts[i]
		base := fmt.Sprintf("spec.hosts[%d]", i)
		switch {
		case h.Name == "":
			v.add(base+".name", atValue, "", fmt.Sprintf("%s has no name", base), "add name: with the Kubernetes node name, e.g. cp1")
		case len(validation.IsDNS1123Subdomain(h.Name)) > 0:
			v.add(base+".name", atValue, h.Name, fmt.Sprintf("host name %q is not a valid node name (DNS-1123 subdomain)", h.Name),
				"use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"+suggestName(h.Name, validation.IsDNS1123Subdomain))
		default:
			if j, dup := names[h.Name]; dup {
				also := fmt.Sprintf("spec.hosts[%d]", j)
				if line := c.PositionOf(also + ".name").Line; line > 0 {
					also += fmt.Sprintf(", line %d", line)
				}
				v.add(base+".name", atValue, h.Name, fmt.Sprintf("duplicate host name %q (also %s)", h.Name, also),
					"give every host a unique name: it is the Kubernetes node name")
			} else {
				names[h.Name] = i
			}
		}
		v.address(h, i, base, addrs)
		switch h.Role {
		case RoleServer:
			servers++
		case RoleAgent:
			agents = append(agents, h.Name)
		case "":
			v.add(base+".role", atValue, h.Name, "the host has no role", "add role: server or role: agent")
		default:
			fix := "write role: server (control plane) or role: agent (workloads only)"
			if r, ok := roleHints[strings.ToLower(string(h.Role))]; ok {
				fix = fmt.Sprintf("write role: %s (K3s roles are server and agent)", r)
			}
			v.add(base+".role", atValue, h.Name, fmt.Sprintf("unknown role %q", h.Role), fix)
		}
		v.labels(h, base)
		v.taints(h, base)
		v.connection(h, base, &local)
		v.ssh(&h.SSH, base+".ssh", h.Name)
		v.k3sConfig(h.K3s.Config, base+".k3s.config", h)
	}
	if servers == 0 && len(agents) > 0 {
		v.add("spec.hosts", atKey, "", fmt.Sprintf("the cluster has agents (%s) but no server", strings.Join(agents, ", ")),
			"set role: server on at least one host; the first server in file order initialises the cluster")
	}
}

// connection checks hosts[].connection: ssh, local or empty, and local on one host at most —
// local mode runs k3strap on the host itself, and one run starts on one machine (local is the
// name of the first local host seen so far).
func (v *validator) connection(h *Host, base string, local *string) {
	switch h.Connection {
	case "", ConnectionSSH:
	case ConnectionLocal:
		if *local != "" {
			v.add(base+".connection", atValue, h.Name,
				fmt.Sprintf("connection: local is also set on host %s; local mode runs k3strap on the host itself, so one run has one local host", printableName(*local)),
				"keep connection: local on the host this inventory is run on and reach the others over SSH (or give each box its own seed: `k3strap firstboot seed`)")
			return
		}
		*local = h.Name
	default:
		v.add(base+".connection", atValue, h.Name, fmt.Sprintf("unknown connection %q", h.Connection),
			"write connection: ssh (the default) or connection: local (k3strap runs on this host)")
	}
}

func (v *validator) address(h *Host, i int, base string, seen map[string]int) {
	if h.Address == "" {
		v.add(base+".address", atValue, h.Name, "the host has no address", "add address: with the IP or DNS name the workstation reaches it at over SSH")
		return
	}
	a := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h.Address, "["), "]"))
	if net.ParseIP(a) == nil && len(validation.IsDNS1123Subdomain(a)) > 0 {
		fix := "write an IP address or a DNS name"
		if hp, port, err := net.SplitHostPort(h.Address); err == nil {
			fix = fmt.Sprintf("write address: %s and ssh: {port: %s}", hp, port)
		}
		v.add(base+".address", atValue, h.Name, fmt.Sprintf("address %q is neither an IP address nor a DNS name", h.Address), fix)
		return
	}
	port := v.c.HostSSH(h).Port
	key := fmt.Sprintf("%s|%d", a, port)
	if j, dup := seen[key]; dup {
		other := v.c.Spec.Hosts[j].Name
		v.add(base+".address", atValue, h.Name, fmt.Sprintf("address %s port %d is already used by host %s", h.Address, port, other),
			"give each host its own address (or its own ssh.port when several hosts sit behind one address)")
		return
	}
	seen[key] = i
}

func (v *validator) labels(h *Host, base string) {
	keys := make([]string, 0, len(h.Labels))
	for k := range h.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := base + ".labels." + k
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.add(path, atKey, h.Name, fmt.Sprintf("label key %q is invalid: %s", k, strings.Join(errs, "; ")),
				"write keys as [prefix/]name, e.g. topology.kubernetes.io/zone or tier")
		}
		if kubernetesLabel(k) && !kubeletLabel(k) {
			v.add(path, atKey, h.Name, fmt.Sprintf("label %s is in the kubernetes.io / k8s.io namespace, which a kubelet may not set on its own node: K3s passes labels to the kubelet (--node-labels), and the kubelet refuses to start", k),
				"use a label of your own (e.g. example.com/role: worker); allowed kubernetes.io labels are topology.kubernetes.io/zone, topology.kubernetes.io/region, node.kubernetes.io/*, kubelet.kubernetes.io/* and a few more")
		}
		if errs := validation.IsValidLabelValue(h.Labels[k]); len(errs) > 0 {
			v.add(path, atValue, h.Name, fmt.Sprintf("label %s has an invalid value %q: %s", k, h.Labels[k], strings.Join(errs, "; ")),
				"use at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit (or an empty value)")
		}
	}
}

func (v *validator) taints(h *Host, base string) {
	seen := map[string]int{}
	for j, t := range h.Taints {
		if t.Key == "" && t.Effect == "" {
			continue // did not parse; reported while decoding
		}
		k := t.Key + ":" + string(t.Effect)
		if prev, dup := seen[k]; dup {
			v.add(fmt.Sprintf("%s.taints[%d]", base, j), atValue, h.Name,
				fmt.Sprintf("taint key %s with effect %s is declared twice (also taints[%d] %s)", t.Key, t.Effect, prev, h.Taints[prev]),
				"keep one taint per key and effect")
			continue
		}
		seen[k] = j
	}
}

// kubeletLabelSet and kubeletLabelNamespaces are the kubernetes.io labels a kubelet may set on
// its own node (kubernetes pkg/kubelet/apis/well_known_labels.go; enforced at kubelet start by
// ValidateKubeletFlags, cmd/kubelet/app/options/options.go).
var (
	kubeletLabelSet = map[string]bool{
		"beta.kubernetes.io/arch": true, "beta.kubernetes.io/instance-type": true, "beta.kubernetes.io/os": true,
		"failure-domain.beta.kubernetes.io/region": true, "failure-domain.beta.kubernetes.io/zone": true,
		"kubernetes.io/arch": true, "kubernetes.io/hostname": true, "kubernetes.io/os": true,
		"node.kubernetes.io/instance-type": true, "topology.kubernetes.io/region": true, "topology.kubernetes.io/zone": true,
	}
	kubeletLabelNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
)

func labelNamespace(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

func inDomain(ns, domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }

// kubernetesLabel reports whether key is in the kubernetes.io or k8s.io namespace.
func kubernetesLabel(key string) bool {
	ns := labelNamespace(key)
	return inDomain(ns, "kubernetes.io") || inDomain(ns, "k8s.io")
}

// kubeletLabel reports whether a kubelet may set key on its own node.
func kubeletLabel(key string) bool {
	if kubeletLabelSet[key] {
		return true
	}
	ns := labelNamespace(key)
	for _, allowed := range kubeletLabelNamespaces {
		if inDomain(ns, allowed) {
			return true
		}
	}
	return false
}

// managedKey is a K3s config key that k3strap renders itself from an inventory field.
type managedKey struct{ msg, fix string }

var managedKeys = func() map[string]managedKey {
	token := managedKey{"the join token is managed by k3strap", "set spec.k3s.token (or $K3STRAP_K3S_TOKEN), or leave it empty to have one generated; the same token serves servers and agents"}
	join := managedKey{"k3strap sets server and cluster-init itself: the first server in file order initialises the cluster, the others join it", "remove it, and order spec.hosts so the server that initialises the cluster comes first"}
	return map[string]managedKey{
		"node-name":        {"node-name is the host's name in the inventory", "remove it and rename the host (hosts[].name) instead"},
		"node-label":       {"node labels are managed by k3strap", "declare them under hosts[].labels (key: value)"},
		"node-taint":       {"node taints are managed by k3strap", "declare them under hosts[].taints (key[=value]:Effect)"},
		"token":            token,
		"agent-token":      token,
		"token-file":       token,
		"agent-token-file": token,
		"server":           join,
		"cluster-init":     join,
	}
}()

// k3sConfig checks the keys of one K3s config: the cluster-wide one (h nil) or a host's override.
func (v *validator) k3sConfig(cfg K3sConfig, base string, h *Host) {
	role, host := k3s.Server, ""
	if h != nil {
		role, host = h.Role.FlagRole(), h.Name
	}
	for _, key := range cfg.Keys() {
		path := base + "." + key
		name := strings.TrimSuffix(key, "+")
		if m, ok := managedKeys[name]; ok {
			v.add(path, atKey, host, fmt.Sprintf("K3s config key %s: %s", key, m.msg), m.fix)
			continue
		}
		kind, ok := v.table.Lookup(role, key)
		if !ok {
			if _, srv := v.table.Lookup(k3s.Server, key); srv && role == k3s.Agent {
				v.add(path, atKey, host, fmt.Sprintf("K3s config key %s is a server flag, and this host is an agent", key),
					"move it to spec.k3s.config (k3strap drops server flags for agents there) or to a server's k3s.config")
				continue
			}
			fix := fmt.Sprintf("see k3s %s --help for the flags K3s %s accepts", role, k3s.FlagsVersion)
			if s, ok := v.table.Closest(role, name); ok {
				fix = "did you mean " + s + "?"
			}
			v.add(path, atKey, host, "unknown K3s config key "+key, fix)
			continue
		}
		if h != nil && h.Role == RoleServer && v.perHostCritical(name, cfg) {
			v.add(path, atKey, host, fmt.Sprintf("K3s config key %s must be the same on every server (K3s refuses a joining server whose value differs: critical configuration value mismatch)", key),
				"set it in spec.k3s.config for the whole cluster instead of per host")
			continue
		}
		if val, extra := cfg.Extra[key]; extra {
			if msg, fix := kindProblem(key, kind, val); msg != "" {
				w := atValue
				if val == nil {
					w = atKey // an empty value has no position of its own worth pointing at
				}
				v.add(path, w, host, msg, fix)
			}
		}
	}
}

// perHostCritical reports whether a server's own k3s.config sets critical key name (k3s.IsCriticalKey,
// K3s's CriticalControlArgs; docs/k3s.md) to a value that can differ from the cluster's. For
// the disable list only the servicelb entry is critical: a per-host list is refused only when
// it disables servicelb differently from the cluster-wide one.
func (v *validator) perHostCritical(name string, hostCfg K3sConfig) bool {
	if !k3s.IsCriticalKey(name) {
		return false
	}
	if name != k3s.KeyDisable {
		return true
	}
	cluster := v.c.Spec.K3s.Config
	return k3s.Disables(cluster.Merge(hostCfg).Disable, k3s.ServiceLB) != k3s.Disables(cluster.Disable, k3s.ServiceLB)
}

// kindProblem checks a free-form config value against its flag's kind. Values are never
// echoed: a config value may be a credential (datastore-endpoint, etcd-s3-secret-key).
func kindProblem(key string, kind k3s.Kind, val any) (msg, fix string) {
	want := map[k3s.Kind]string{
		k3s.Bool:   "true or false",
		k3s.String: "one value",
		k3s.List:   "one value or a list of values",
	}[kind]
	fix = fmt.Sprintf("write %s: followed by %s", key, want)
	if val == nil {
		return fmt.Sprintf("K3s config key %s has no value", key), fix + ", or remove the key"
	}
	switch reflect.ValueOf(val).Kind() {
	case reflect.Map:
		return fmt.Sprintf("K3s config key %s is a mapping; it takes %s", key, want), fix
	case reflect.Slice:
		if kind != k3s.List {
			return fmt.Sprintf("K3s config key %s is a list; it takes %s", key, want), fix
		}
		items, _ := val.([]any)
		for _, item := range items {
			if item == nil {
				return fmt.Sprintf("K3s config key %s has an empty list item", key), "remove the lone '-'"
			}
			if k := reflect.ValueOf(item).Kind(); k == reflect.Map || k == reflect.Slice {
				return fmt.Sprintf("K3s config key %s has a list item that is not a plain value", key), fix
			}
		}
	default:
		if kind == k3s.Bool {
			// K3s turns the value into --key=VALUE, parsed with strconv.ParseBool.
			if _, err := strconv.ParseBool(fmt.Sprint(val)); err != nil {
				return fmt.Sprintf("K3s config key %s takes true or false", key), fix
			}
		}
	}
	return "", ""
}
