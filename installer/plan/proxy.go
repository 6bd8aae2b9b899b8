// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"

	"al.essio.dev/pkg/shellescape"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// proxyEnvVar is the install environment variable that names the proxy file for
// installer/scripts/install.sh (sourced before the install script runs). Not secret: a path.
const proxyEnvVar = "K3STRAP_PROXY_ENV"

// proxyFile adds h's proxy environment (k3s.PathProxyEnv) when h has a proxy
// (inventory.Cluster.HostProxy): HTTP_PROXY, HTTPS_PROXY and the complete NO_PROXY
// (Cluster.NoProxy), upper and lower case (k3s.ProxyEnvNames), one sh assignment a line. The
// install step sources it, so the install script's downloads (the script, the binary, the
// checksums) go through the proxy and the script writes the variables into the unit's env
// file. With a proxy password the file is Secret and Shown holds it with the password masked;
// a MaskedOnly planner (render) reads no password.
func (pl *Planner) proxyFile(p *HostPlan) error {
	c := pl.Cluster
	px := c.HostProxy(p.Host)
	if px == nil {
		return nil
	}
	password := ""
	if px.HasCredentials() && !pl.MaskedOnly {
		pw, err := c.ProxyPassword(px)
		if err != nil {
			return err
		}
		password = pw
	}
	shown := ProxyEnv(px, c.NoProxy(p.Host), k3s.Masked)
	real := shown
	if px.HasCredentials() {
		if pl.MaskedOnly {
			real = shown
		} else {
			real = ProxyEnv(px, c.NoProxy(p.Host), password)
		}
	}
	f := contentFile(k3s.PathProxyEnv, 0o600, real, true)
	f.Shown = shown
	f.Secret = px.HasCredentials()
	p.Files = append(p.Files, f)
	p.InstallEnv = append(p.InstallEnv, proxyEnvVar+"="+k3s.PathProxyEnv)
	return nil
}

// ProxyEnv renders the proxy environment file: HTTP_PROXY and HTTPS_PROXY (each falls back to
// the other when only one is set: the install downloads are https, the release mirror may be
// http), NO_PROXY joined with commas, then the same three in lower case (curl and wget read
// those), as shell assignments. password, when not empty, goes into the URLs' user
// information (k3s.Masked for the shown form).
func ProxyEnv(px *inventory.Proxy, noProxy []string, password string) []byte {
	httpURL, httpsURL := px.HTTP, px.HTTPS
	if httpURL == "" {
		httpURL = httpsURL
	}
	if httpsURL == "" {
		httpsURL = httpURL
	}
	if password != "" {
		httpURL, httpsURL = withPassword(httpURL, password), withPassword(httpsURL, password)
	}
	vals := map[string]string{"HTTP_PROXY": httpURL, "HTTPS_PROXY": httpsURL, "NO_PROXY": strings.Join(noProxy, ",")}
	var b strings.Builder
	b.WriteString("# Managed by k3strap (spec.proxy, docs/proxy.md): read by the install step; the install\n")
	b.WriteString("# script copies these variables into the K3s unit's env file.\n")
	for _, name := range k3s.ProxyEnvNames() {
		b.WriteString(name + "=" + shellescape.Quote(vals[strings.ToUpper(name)]) + "\n")
	}
	return []byte(b.String())
}

// withPassword is inventory.WithPassword, keeping k3s.Masked readable (net/url would escape
// its asterisks).
func withPassword(u, password string) string {
	if password == k3s.Masked {
		return k3s.MaskProxyURL(inventory.WithPassword(u, "k3strap-masked"))
	}
	return inventory.WithPassword(u, password)
}
