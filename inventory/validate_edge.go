// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// selinuxDistributions are the k3s-selinux RPM families (as the official install script names
// them; docs/k3s.md, SELinux).
var selinuxDistributions = []string{"el7", "el8", "el9", "el10", "sle"}

var (
	sha256RE  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// edge validates the edge and enterprise fields: apiEndpoint, the install script, SELinux RPMs and
// registries (spec.registries and every host's own).
func (v *validator) edge() {
	k := &v.c.Spec.K3s
	if e := k.APIEndpoint; e != nil {
		base := "spec.k3s.apiEndpoint"
		switch {
		case e.Address == "":
			v.add(base, atValue, "", "spec.k3s.apiEndpoint has no address",
				"set address: to the DNS name or virtual IP in front of the servers (no scheme, no port)")
		case !hostOrIP(e.Address):
			v.add(base+".address", atValue, "", fmt.Sprintf("apiEndpoint address %q is not a DNS name or an IP address", e.Address),
				"write the bare name or IP, e.g. k3s.example.com or 10.0.0.100 (the port is always 6443)")
		}
		if kv := e.KubeVIP; kv != nil {
			if kv.Interface == "" {
				v.add(base+".kubeVIP", atValue, "", "kubeVIP has no interface",
					"set interface: to the servers' network interface that carries the VIP, e.g. eth0")
			}
			if vip := e.VIP(); vip != "" && net.ParseIP(vip) == nil {
				path := base + ".kubeVIP.address"
				if kv.Address == "" {
					path = base + ".address"
				}
				v.add(path, atValue, "", fmt.Sprintf("kube-vip needs an IP address, not %q", vip),
					"set kubeVIP.address: to a free IP in the servers' subnet (apiEndpoint.address may stay a DNS name for it)")
			}
		}
	}
	online := k.Install != Airgap
	if k.InstallScriptURL != "" {
		if !httpURL(k.InstallScriptURL) {
			v.add("spec.k3s.installScriptURL", atValue, "", fmt.Sprintf("installScriptURL %q is not an http(s) URL", k.InstallScriptURL),
				"write a URL such as https://get.k3s.io or https://mirror.example.com/k3s/install.sh")
		} else if !online {
			v.add("spec.k3s.installScriptURL", atValue, "", "installScriptURL is for online installs; install: airgap never downloads",
				"remove installScriptURL, or give your install.sh as spec.k3s.airgapInstallScript")
		}
	}
	if s := k.InstallScriptSHA256; s != "" {
		if !sha256RE.MatchString(s) {
			v.add("spec.k3s.installScriptSHA256", atValue, "", fmt.Sprintf("installScriptSHA256 %q is not a sha256 (64 hex digits)", s),
				"write the output of: curl -sfL https://get.k3s.io | sha256sum")
		} else if !online {
			v.add("spec.k3s.installScriptSHA256", atValue, "", "installScriptSHA256 is for online installs",
				"remove it: airgap installs upload spec.k3s.airgapInstallScript as it is")
		}
	}
	if k.ReleaseURL != "" {
		if !httpURL(k.ReleaseURL) {
			v.add("spec.k3s.releaseURL", atValue, "", fmt.Sprintf("releaseURL %q is not an http(s) URL", k.ReleaseURL),
				"write the URL that holds download/<version>/k3s, like https://github.com/k3s-io/k3s/releases")
		} else if !online {
			v.add("spec.k3s.releaseURL", atValue, "", "releaseURL is for online installs", "remove releaseURL or set install: online")
		}
	}
	if k.AirgapInstallScript != "" {
		if online {
			v.add("spec.k3s.airgapInstallScript", atValue, "", "airgapInstallScript is only used with install: airgap",
				"set install: airgap, or remove it (online installs run the official script from installScriptURL)")
		} else {
			v.file("spec.k3s.airgapInstallScript", "", v.c.ResolvePath(k.AirgapInstallScript), "airgap install script",
				"download install.sh from https://get.k3s.io (K3s's airgap docs)")
		}
	}
	dists := make([]string, 0, len(k.SELinuxRPMs))
	for d := range k.SELinuxRPMs {
		dists = append(dists, d)
	}
	sort.Strings(dists)
	for _, d := range dists {
		path := "spec.k3s.selinuxRPMs." + d
		if !slices.Contains(selinuxDistributions, d) {
			v.add(path, atKey, "", fmt.Sprintf("unknown k3s-selinux distribution %q", d),
				"use "+strings.Join(selinuxDistributions, ", ")+" (the RPM's family: k3s-selinux-*.el9.noarch.rpm is el9)")
			continue
		}
		if online {
			v.add(path, atValue, "", "selinuxRPMs are for airgap installs; online installs get k3s-selinux from rpm.rancher.io as the official script does",
				"remove selinuxRPMs or set install: airgap")
			continue
		}
		v.file(path, "", v.c.ResolvePath(k.SELinuxRPMs[d]), "k3s-selinux RPM",
			"download k3s-selinux-*."+d+".noarch.rpm from https://github.com/k3s-io/k3s-selinux/releases")
	}
	v.registries(v.c.Spec.Registries, "spec.registries", "")
	for i := range v.c.Spec.Hosts {
		h := &v.c.Spec.Hosts[i]
		v.registries(h.Registries, fmt.Sprintf("spec.hosts[%d].registries", i), h.Name)
	}
}

// registries validates one registries section (spec.registries or a host's own, which has
// the same shape and rules; docs/registries.md) at field path base; host names the host for a
// host's own section, "" for the spec's.
func (v *validator) registries(r *Registries, base, host string) {
	if r == nil {
		return
	}
	names := make([]string, 0, len(r.Mirrors))
	for n := range r.Mirrors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mb := base + ".mirrors." + n
		if n != "*" && !registryHost(n) {
			v.add(mb, atKey, host, fmt.Sprintf("mirror name %q is not a registry host (host[:port]) or \"*\"", n),
				"use the registry part of image names, e.g. docker.io or registry.example.com:5000")
		}
		m := r.Mirrors[n]
		for i, ep := range m.Endpoint {
			if !httpURL(ep) {
				v.add(fmt.Sprintf("%s.endpoint[%d]", mb, i), atValue, host, fmt.Sprintf("mirror endpoint %q is not an http(s) URL", ep),
					"write it with its scheme, e.g. https://mirror.example.com:5000")
			}
		}
		rw := make([]string, 0, len(m.Rewrite))
		for re := range m.Rewrite {
			rw = append(rw, re)
		}
		sort.Strings(rw)
		for _, re := range rw {
			if _, err := regexp.Compile(re); err != nil {
				v.add(mb+".rewrite."+re, atKey, host, fmt.Sprintf("rewrite pattern %q is not a regular expression: %v", re, err),
					`write a Go regular expression, e.g. "^rancher/(.*)": "mirrored/rancher/$1"`)
			}
		}
	}
	for _, reg := range r.RegistryHosts() {
		cb := base + ".configs." + reg
		if !registryHost(reg) && reg != "*" {
			v.add(cb, atKey, host, fmt.Sprintf("configs key %q is not a registry host (host[:port])", reg),
				"use the host of a mirror endpoint or registry, without scheme, e.g. registry.example.com:5000")
		}
		c := r.Configs[reg]
		if a := c.Auth; a != nil {
			ab := cb + ".auth"
			switch {
			case a.PasswordFile != "" && a.PasswordEnv != "":
				v.add(ab, atValue, host, "auth has both passwordFile and passwordEnv", "keep one of them")
			case a.PasswordFile == "" && a.PasswordEnv == "":
				v.add(ab, atValue, host, "auth has no password source",
					"set passwordFile: (a file of mode 0600) or passwordEnv: (an environment variable); passwords never stand in the inventory")
			}
			if a.Username == "" {
				v.add(ab, atValue, host, "auth has no username", "set username:")
			}
			if a.PasswordEnv != "" && !envNameRE.MatchString(a.PasswordEnv) {
				v.add(ab+".passwordEnv", atValue, host, fmt.Sprintf("passwordEnv %q is not an environment variable name", a.PasswordEnv),
					"write the variable's name, e.g. REGISTRY_PASSWORD (not $REGISTRY_PASSWORD, not the password)")
			}
			if a.PasswordFile != "" {
				v.privateFile(ab+".passwordFile", host, a.PasswordFile, "registry password file")
			}
		}
		if t := c.TLS; t != nil {
			tb := cb + ".tls"
			if (t.CertFile == "") != (t.KeyFile == "") {
				v.add(tb, atValue, host, "tls needs certFile and keyFile together (a client certificate and its key)", "set both, or neither")
			}
			v.file(tb+".certFile", host, v.c.ResolvePath(t.CertFile), "registry client certificate", "give the PEM client certificate")
			v.file(tb+".caFile", host, v.c.ResolvePath(t.CAFile), "registry CA file", "give the PEM CA bundle that signed the registry's certificate")
			if t.KeyFile != "" {
				v.privateFile(tb+".keyFile", host, t.KeyFile, "registry client key")
			}
		}
	}
}

// privateFile checks that a file holding a secret exists and only its owner may read it
// (host names the host whose field it is, "" for a cluster-wide field).
func (v *validator) privateFile(path, host, p, what string) {
	v.file(path, host, v.c.ResolvePath(p), what, "create it with mode 0600")
	if v.opts.SkipFileChecks {
		return
	}
	if st, err := os.Stat(v.c.ResolvePath(p)); err == nil && st.Mode().Perm()&0o077 != 0 {
		v.add(path, atValue, host, fmt.Sprintf("%s %s is readable by group or others (mode %04o)", what, p, st.Mode().Perm()),
			"run chmod 600 "+v.c.ResolvePath(p))
	}
}

func hostOrIP(s string) bool {
	if net.ParseIP(s) != nil {
		return true
	}
	return len(validation.IsDNS1123Subdomain(strings.ToLower(s))) == 0
}

func registryHost(s string) bool {
	h := s
	if host, port, err := net.SplitHostPort(s); err == nil {
		if _, err := ParsePort(port); err != nil {
			return false
		}
		h = host
	}
	return hostOrIP(h)
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
