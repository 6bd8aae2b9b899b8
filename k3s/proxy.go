// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"net/netip"
	"net/url"
	"strings"
)

// HTTP proxy facts (docs/proxy.md). K3s reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY from its
// service environment and passes them to the embedded containerd and kubelet; the
// CONTAINERD_HTTP_PROXY, CONTAINERD_HTTPS_PROXY and CONTAINERD_NO_PROXY variants apply to
// containerd (image pulls) only. The official install script copies these variables from its
// own environment into the unit's env file, /etc/systemd/system/k3s.service.env or
// k3s-agent.service.env (K3s docs "Configuring an HTTP proxy", docs.k3s.io/advanced). A
// NO_PROXY that misses the cluster and service CIDRs, .svc, .cluster.local or the node
// addresses sends in-cluster traffic to the proxy (k3s-io/k3s #194, #6195; k3s-ansible #144).

// proxyEnvNames are the variables the K3s service reads for its proxy, in the order
// k3strap writes them: upper case first (Go's net/http/httpproxy, hence K3s, kubelet and
// containerd, reads them first), then the lower-case forms curl and wget read (curl ignores
// upper-case HTTP_PROXY; wget reads only lower case).
var proxyEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

// ProxyEnvNames returns the proxy variable names k3strap writes, in order (a new slice).
func ProxyEnvNames() []string { return append([]string(nil), proxyEnvNames...) }

// IsProxyEnv reports whether name is a proxy variable of the K3s service: HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY in either case, or their CONTAINERD_ forms.
func IsProxyEnv(name string) bool {
	u := strings.TrimPrefix(strings.ToUpper(name), "CONTAINERD_")
	return u == "HTTP_PROXY" || u == "HTTPS_PROXY" || u == "NO_PROXY"
}

// NoProxyLoopback are the loopback entries every NO_PROXY needs: the API server, the
// supervisor and the kubelet talk to each other over loopback.
var noProxyLoopback = []string{"127.0.0.0/8", "::1", "localhost"}

// NoProxyInput is what the complete NO_PROXY of a cluster is made of.
type NoProxyInput struct {
	// NodeAddresses are every node's addresses (IPs or DNS names) in inventory order.
	NodeAddresses []string
	// ClusterCIDRs and ServiceCIDRs are the effective cluster-cidr and service-cidr entries
	// (IPv4, IPv6 or both); empty means K3s's defaults (DefaultClusterCIDR, DefaultServiceCIDR).
	ClusterCIDRs, ServiceCIDRs []string
	// ClusterDomain is cluster-domain; empty means DefaultClusterDomain.
	ClusterDomain string
	// Endpoints are the API endpoint addresses (a fixed registration address, a kube-vip
	// VIP, --api-address), without scheme or port.
	Endpoints []string
	// Registries are local registry mirror hosts (host or host:port) pulls must reach
	// directly.
	Registries []string
	// Extra are the user's own entries, added last.
	Extra []string
}

// NoProxy returns the complete NO_PROXY list: loopback (127.0.0.0/8, ::1, localhost), the
// node addresses, the cluster and service CIDRs, .svc and .<cluster-domain>, the API
// endpoints, the local registries and the extra entries, in that order, each once (the first
// occurrence kept; names compared case-insensitively, IPv6 addresses and CIDRs in canonical
// form). Source: K3s docs "Configuring an HTTP proxy"; k3s-io/k3s #194, #6195.
func NoProxy(in NoProxyInput) []string {
	var out []string
	seen := map[string]bool{}
	add := func(entries ...string) {
		for _, e := range entries {
			e = normalizeNoProxyEntry(e)
			if e == "" || seen[strings.ToLower(e)] {
				continue
			}
			seen[strings.ToLower(e)] = true
			out = append(out, e)
		}
	}
	add(noProxyLoopback...)
	add(in.NodeAddresses...)
	add(orDefault(in.ClusterCIDRs, DefaultClusterCIDR)...)
	add(orDefault(in.ServiceCIDRs, DefaultServiceCIDR)...)
	add(requiredDomains(in.ClusterDomain)...)
	add(in.Endpoints...)
	add(in.Registries...)
	add(in.Extra...)
	return out
}

func orDefault(l []string, def string) []string {
	var out []string
	for _, e := range l {
		for _, s := range strings.Split(e, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return []string{def}
	}
	return out
}

func requiredDomains(domain string) []string {
	if domain == "" {
		domain = DefaultClusterDomain
	}
	return []string{".svc", "." + strings.TrimPrefix(domain, ".")}
}

// normalizeNoProxyEntry trims e and writes IP addresses and CIDRs in canonical form (a CIDR
// masked to its network, IPv6 compressed, brackets removed).
func normalizeNoProxyEntry(e string) string {
	e = strings.TrimSpace(e)
	if p, err := netip.ParsePrefix(e); err == nil {
		return p.Masked().String()
	}
	if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		return a.String()
	}
	return e
}

// NoProxyMissing returns the entries of required (NoProxy's) that list does not cover, in
// required's order. An entry is covered by an equal entry (case-insensitive), an address or
// CIDR by a CIDR that contains it, a name by a domain suffix entry (".example.com" or
// "example.com" covers "a.example.com", as Go's httpproxy matches), and everything by "*".
// The user's Extra entries of required are not judged: pass only what must be there.
func NoProxyMissing(list []string, required []string) []string {
	var have []string
	for _, e := range list {
		for _, s := range strings.Split(e, ",") {
			if s = normalizeNoProxyEntry(s); s != "" {
				if s == "*" {
					return nil
				}
				have = append(have, s)
			}
		}
	}
	var missing []string
	for _, r := range required {
		if !noProxyCovers(have, normalizeNoProxyEntry(r)) {
			missing = append(missing, r)
		}
	}
	return missing
}

func noProxyCovers(have []string, r string) bool {
	rp, rIsPrefix := parsePrefixOrAddr(r)
	for _, h := range have {
		if strings.EqualFold(h, r) {
			return true
		}
		if rIsPrefix {
			if hp, err := netip.ParsePrefix(h); err == nil && hp.Bits() <= rp.Bits() && hp.Contains(rp.Addr()) {
				return true
			}
			continue
		}
		// A name: a suffix entry covers it and its subdomains (".svc" covers "x.svc").
		lh, lr := strings.ToLower(h), strings.ToLower(r)
		if strings.HasPrefix(lr, ".") {
			// A required domain suffix is covered by the same suffix with or without the dot.
			if lh == lr[1:] || lh == lr || strings.HasSuffix(lr, "."+strings.TrimPrefix(lh, ".")) {
				return true
			}
			continue
		}
		if strings.HasSuffix(lr, "."+strings.TrimPrefix(lh, ".")) {
			return true
		}
	}
	return false
}

func parsePrefixOrAddr(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// MaskProxyURL returns u with the password of its user information replaced by Masked
// ("http://user:********@proxy:3128"); a URL without a password comes back unchanged, and
// text that does not parse as a URL but holds '@' is masked whole.
func MaskProxyURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		if strings.Contains(u, "@") {
			return Masked
		}
		return u
	}
	if p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); !ok {
		return u
	}
	// Keep the text but the password: net/url would escape Masked's asterisks.
	p.User = url.UserPassword(p.User.Username(), "k3strap-masked")
	return strings.Replace(p.String(), ":k3strap-masked@", ":"+Masked+"@", 1)
}

// ProxyURLHasPassword reports whether u carries a password in its user information.
func ProxyURLHasPassword(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return false
	}
	_, ok := p.User.Password()
	return ok
}

// PathProxyEnv is the proxy environment k3strap keeps on a host with a proxy (mode 0600: a
// proxy password may stand in it), sh syntax: k3strap's install step reads it before it runs
// the install script, which copies the variables into the unit's env file
// (DirSystemd/UNIT.service.env) as the official script does; the script's own downloads go
// through the proxy with it.
const PathProxyEnv = DirConfig + "/proxy.env"

// GoProxyEnv returns the value Go's net/http/httpproxy (hence K3s, its kubelet and
// containerd) takes for the proxy variable upper (HTTP_PROXY, HTTPS_PROXY or NO_PROXY) from
// lookup: the upper-case variable when set and not empty, else the lower-case one.
func GoProxyEnv(upper string, lookup func(name string) string) string {
	if v := lookup(upper); v != "" {
		return v
	}
	return lookup(strings.ToLower(upper))
}

// InClusterProxied is the one rule preflight and doctor judge a K3s service environment by
// (docs/proxy.md): when an HTTP or HTTPS proxy is set, the required NO_PROXY entries (NoProxy
// of the cluster without the user's extras) that noProxy does not cover (NoProxyMissing) —
// traffic to them would go to the proxy. nil when no proxy is set or nothing is missing.
func InClusterProxied(httpProxy, httpsProxy, noProxy string, required []string) []string {
	if httpProxy == "" && httpsProxy == "" {
		return nil
	}
	return NoProxyMissing([]string{noProxy}, required)
}
