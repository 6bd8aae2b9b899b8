// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/k3s"
)

// Proxy is the HTTP(S) proxy the hosts reach the internet through (docs/proxy.md):
// spec.proxy for every host, spec.hosts[].proxy to override it per host (a field set there
// replaces the cluster-wide one; zero fields inherit). k3strap writes HTTP_PROXY, HTTPS_PROXY
// and the complete NO_PROXY (Cluster.NoProxy) into K3s's service environment, the way the
// official install script does, and runs the online install through the proxy.
type Proxy struct {
	// HTTP is the proxy for http:// URLs (HTTP_PROXY), e.g. http://proxy.example.com:3128.
	// A user may stand in it (http://user@proxy:3128); the password never does: it comes from
	// PasswordEnv or PasswordFile.
	HTTP string `yaml:"http,omitempty"`
	// HTTPS is the proxy for https:// URLs (HTTPS_PROXY); usually the same URL as HTTP.
	HTTPS string `yaml:"https,omitempty"`
	// NoProxy are extra NO_PROXY entries (hosts, domains such as .corp.example.com, IPs,
	// CIDRs) added after the ones k3strap computes.
	NoProxy []string `yaml:"noProxy,omitempty"`
	// LocalMirrors marks the registry mirrors of the host's registries (spec.registries or
	// the host's own) as local: their hosts go into NO_PROXY so pulls reach them directly.
	LocalMirrors bool `yaml:"localMirrors,omitempty"`
	// PasswordEnv names an environment variable holding the proxy user's password;
	// PasswordFile a file (mode 0600) holding it. At most one; only with a user in the URL.
	PasswordEnv  string `yaml:"passwordEnv,omitempty"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
}

// HostProxy returns the proxy settings of h: spec.proxy with h's non-empty fields put over
// it; nil when neither sets an HTTP or HTTPS proxy.
func (c *Cluster) HostProxy(h *Host) *Proxy {
	var p Proxy
	if c.Spec.Proxy != nil {
		p = *c.Spec.Proxy
	}
	if o := h.Proxy; o != nil {
		if o.HTTP != "" {
			p.HTTP = o.HTTP
		}
		if o.HTTPS != "" {
			p.HTTPS = o.HTTPS
		}
		if len(o.NoProxy) > 0 {
			p.NoProxy = o.NoProxy
		}
		if o.LocalMirrors {
			p.LocalMirrors = true
		}
		if o.PasswordEnv != "" || o.PasswordFile != "" {
			p.PasswordEnv, p.PasswordFile = o.PasswordEnv, o.PasswordFile
		}
	}
	if p.HTTP == "" && p.HTTPS == "" {
		return nil
	}
	return &p
}

// HasCredentials reports whether the proxy needs a password (PasswordEnv or PasswordFile).
func (p *Proxy) HasCredentials() bool {
	return p != nil && (p.PasswordEnv != "" || p.PasswordFile != "")
}

// WithPassword returns the proxy URL u with password put into its user information; u
// unchanged when it has no user or password is empty.
func WithPassword(u, password string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.User == nil || password == "" {
		return u
	}
	pu.User = url.UserPassword(pu.User.Username(), password)
	return pu.String()
}

// RequiredNoProxy returns the NO_PROXY entries in-cluster traffic needs, whatever proxy is
// set and by whom: loopback, every node address (each host's inventory address and
// node-ip), the effective cluster and service CIDRs and cluster domain (the first server's
// config, as ClusterCIDRs), and the API endpoint (spec.k3s.apiEndpoint, its kube-vip VIP,
// --api-address). Preflight judges a NO_PROXY against it; k3s.NoProxy is the rule.
func (c *Cluster) RequiredNoProxy() []string { return k3s.NoProxy(c.noProxyInput(nil)) }

// NoProxy returns the complete NO_PROXY k3strap writes for h: RequiredNoProxy, then the
// hosts of h's registry mirrors when the proxy marks them local, then the user's noProxy
// entries (k3s.NoProxy: each once, order stable).
func (c *Cluster) NoProxy(h *Host) []string { return k3s.NoProxy(c.noProxyInput(h)) }

func (c *Cluster) noProxyInput(h *Host) k3s.NoProxyInput {
	in := k3s.NoProxyInput{}
	for i := range c.Spec.Hosts {
		host := &c.Spec.Hosts[i]
		in.NodeAddresses = append(in.NodeAddresses, host.Address)
		for _, ip := range c.HostConfig(host).NodeIP {
			in.NodeAddresses = append(in.NodeAddresses, strings.Split(ip, ",")...)
		}
	}
	in.ClusterCIDRs, in.ServiceCIDRs = c.ClusterCIDRs()
	if fs := c.FirstServer(); fs != nil {
		in.ClusterDomain = c.HostConfig(fs).ClusterDomain
	}
	if a := c.EndpointAddress(); a != "" {
		in.Endpoints = append(in.Endpoints, a)
	}
	if e := c.Spec.K3s.APIEndpoint; e != nil {
		in.Endpoints = append(in.Endpoints, e.Address, e.VIP())
	}
	if h == nil {
		return in
	}
	p := c.HostProxy(h)
	if p == nil {
		return in
	}
	if p.LocalMirrors {
		if r, _ := c.RegistriesOf(h); r != nil {
			in.Registries = mirrorHosts(r)
		}
	}
	in.Extra = p.NoProxy
	return in
}

// mirrorHosts returns the hosts (host or host:port as the endpoint names them) of every
// mirror endpoint and configs key of r, sorted by registry name, each once.
func mirrorHosts(r *Registries) []string {
	var out []string
	for _, name := range sortedKeys(r.Mirrors) {
		for _, ep := range r.Mirrors[name].Endpoint {
			if u, err := url.Parse(ep); err == nil && u.Host != "" {
				out = append(out, u.Hostname())
			}
		}
	}
	for _, k := range r.RegistryHosts() {
		host := k
		if h, _, err := net.SplitHostPort(k); err == nil {
			host = h
		}
		out = append(out, host)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// proxy validates spec.proxy and every spec.hosts[].proxy (docs/proxy.md): URLs http:// or
// https:// with a host and no path, no password in a URL (it would stand in the file in
// clear: PasswordEnv or PasswordFile instead), a password only with a user, at most one of
// PasswordEnv and PasswordFile, a password file that exists and only its owner may read, and
// noProxy entries that are single entries (no commas, no spaces). Messages never quote a URL:
// it may hold a password.
func (v *validator) proxy() {
	if p := v.c.Spec.Proxy; p != nil {
		v.proxySection(p, "spec.proxy", "", true)
	}
	for i := range v.c.Spec.Hosts {
		h := &v.c.Spec.Hosts[i]
		if h.Proxy != nil {
			v.proxySection(h.Proxy, fmt.Sprintf("spec.hosts[%d].proxy", i), h.Name, false)
			if v.c.HostProxy(h) == nil {
				v.add(fmt.Sprintf("spec.hosts[%d].proxy", i), atKey, h.Name, "the host's proxy section has no http or https proxy, and spec.proxy sets none",
					"set proxy.http (and https) for this host, or spec.proxy for every host; noProxy alone does nothing")
			}
		}
		if p := v.c.HostProxy(h); p != nil && !p.HasCredentials() && (proxyUser(p.HTTP) || proxyUser(p.HTTPS)) {
			v.add(fmt.Sprintf("spec.hosts[%d]", i), atKey, h.Name, "the proxy URL names a user but no password source",
				"set proxy.passwordEnv (an environment variable) or proxy.passwordFile (a file, mode 0600) with the proxy password, or remove the user from the URL")
		}
	}
}

func (v *validator) proxySection(p *Proxy, base, host string, clusterWide bool) {
	if clusterWide && p.HTTP == "" && p.HTTPS == "" {
		v.add(base, atKey, host, "the proxy section sets neither http nor https",
			"set proxy.http and proxy.https to the proxy URL, e.g. http://proxy.example.com:3128, or remove the section")
	}
	v.proxyURL(p.HTTP, base+".http", host)
	v.proxyURL(p.HTTPS, base+".https", host)
	if p.PasswordEnv != "" && p.PasswordFile != "" {
		v.add(base+".passwordFile", atKey, host, "proxy.passwordEnv and proxy.passwordFile are both set",
			"keep one of them")
	}
	if p.PasswordEnv != "" && !envNameRE.MatchString(p.PasswordEnv) {
		v.add(base+".passwordEnv", atValue, host, "proxy.passwordEnv is not an environment variable name",
			"write the name of the variable (letters, digits, _), e.g. PROXY_PASSWORD, not its value")
	}
	if p.HasCredentials() && !proxyUser(p.HTTP) && !proxyUser(p.HTTPS) && (p.HTTP != "" || p.HTTPS != "") {
		v.add(base, atKey, host, "a proxy password source is set but no proxy URL names a user",
			"put the user in the URL (http://USER@proxy.example.com:3128)")
	}
	v.secretFile(base+".passwordFile", host, p.PasswordFile, "proxy password file")
	for j, e := range p.NoProxy {
		path := fmt.Sprintf("%s.noProxy[%d]", base, j)
		switch {
		case strings.TrimSpace(e) == "":
			v.add(path, atValue, host, "the noProxy entry is empty", "remove it")
		case strings.ContainsAny(e, ", \t"):
			v.add(path, atValue, host, "the noProxy entry holds a comma or a space",
				"write one host, domain (.example.com), IP or CIDR per list item")
		case strings.Contains(e, "://"):
			v.add(path, atValue, host, "the noProxy entry is a URL",
				"write the host name or address alone, without scheme (NO_PROXY matches hosts, not URLs)")
		}
	}
}

// proxyURL judges one proxy URL (empty is fine).
func (v *validator) proxyURL(raw, path, host string) {
	if raw == "" {
		return
	}
	const example = "http://proxy.example.com:3128"
	if !strings.Contains(raw, "://") {
		v.add(path, atValue, host, "the proxy URL has no scheme",
			"write it as a URL with http:// in front, e.g. "+example)
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		v.add(path, atValue, host, "the proxy URL cannot be parsed (not shown: it may hold a password)",
			"write it as scheme://host:port, e.g. "+example+"; escape special characters of a user name with %XX")
		return
	}
	switch u.Scheme {
	case "http", "https":
	default:
		v.add(path, atValue, host, fmt.Sprintf("the proxy URL's scheme %s is not supported", shownScheme(u.Scheme)),
			"use an http:// (or https://) proxy URL, as K3s, containerd, curl and wget all read it")
	}
	if u.Hostname() == "" {
		v.add(path, atValue, host, "the proxy URL has no host", "write it as "+example)
	}
	if port := u.Port(); port != "" {
		if _, err := ParsePort(port); err != nil {
			v.add(path, atValue, host, "the proxy URL's port: "+err.Error(), "write it as "+example)
		}
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		v.add(path, atValue, host, "the proxy URL has a path or query", "write only scheme://host:port, e.g. "+example)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			v.add(path, atValue, host, "the proxy URL holds a password in clear (not shown)",
				"remove it from the URL (keep http://USER@host:port) and give it with proxy.passwordEnv or proxy.passwordFile (mode 0600)")
		}
	}
}

func shownScheme(s string) string {
	if fieldNameRE.MatchString(s) {
		return `"` + s + `"`
	}
	return "(not shown)"
}

func proxyUser(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil && u.User.Username() != ""
}

// ProxyPassword reads the password of h's proxy from its environment variable or file (a
// file readable by group or others is refused); "" when the proxy has none. The value never
// appears in an error.
func (c *Cluster) ProxyPassword(p *Proxy) (string, error) {
	switch {
	case p == nil:
		return "", nil
	case p.PasswordEnv != "":
		v := os.Getenv(p.PasswordEnv)
		if v == "" {
			return "", fmt.Errorf("proxy.passwordEnv names $%s, which is not set or empty: export it before running k3strap", p.PasswordEnv)
		}
		return v, nil
	case p.PasswordFile != "":
		file := c.ResolvePath(p.PasswordFile)
		st, err := os.Stat(file)
		if err != nil {
			return "", fmt.Errorf("proxy.passwordFile: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("proxy.passwordFile %s is readable by group or others (mode %04o): run chmod 600 %s", file, st.Mode().Perm(), file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("proxy.passwordFile: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}
