// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// Proxy checks (docs/proxy.md). Their evidence is Input.Proxy: the K3s unit's proxy
// environment read on each host and, for hosts with spec.proxy, one probe through the proxy
// (facts.ProxyScript). Nothing here shows a proxy password: URLs pass k3s.MaskProxyURL.

// checkProxy: a host whose proxy does not answer, refuses the credentials, or (online
// installs) cannot fetch the install script through it is an error naming the host, the
// proxy and what failed. The probe fetches with curl, else wget, else only connects (bash);
// a host with nothing to probe with is a warning.
func checkProxy(in *Input) []finding.Finding {
	if in.Proxy == nil {
		return nil
	}
	c := in.Cluster
	online := c.Spec.K3s.Install != inventory.Airgap
	return eachHost(in, func(_ int, h *inventory.Host, _ *facts.Host) []finding.Finding {
		px := c.HostProxy(h)
		pf := in.Proxy[h.Name]
		if px == nil || pf == nil {
			return nil
		}
		proxy, target := ProxyProbeTarget(c, px)
		shown := k3s.MaskProxyURL(proxy)
		p := pf.Probe
		if p == nil {
			return []finding.Finding{warnf(h.Name, "run `k3strap preflight` again; the probe runs with every preflight",
				"the proxy %s was not probed from this host", shown)}
		}
		detail := ""
		if p.Err != "" {
			detail = " (" + p.Err + ")"
		}
		code := p.HTTP
		if p.Connect != 0 && p.Connect != 200 {
			code = p.Connect
		}
		switch {
		case p.Tool == "none":
			return []finding.Finding{warnf(h.Name, "install curl on the host (the official install script needs curl or wget anyway)",
				"cannot probe the proxy %s: the host has neither curl nor bash", shown)}
		case code == 407 || code == 401:
			// tinyproxy answers a plain-HTTP request with wrong credentials 401, not 407.
			what := "407 Proxy Authentication Required"
			if code == 401 {
				what = "401 Unauthorized (tinyproxy's answer to wrong credentials; or the site wants a login)"
			}
			return []finding.Finding{errorf(h.Name, "set the proxy user in the URL and its password with proxy.passwordEnv or proxy.passwordFile; check them with the proxy's administrators",
				"the proxy %s refuses the request from this host: %s — proxy credentials missing or wrong", shown, what)}
		case p.Tool == "tcp" && p.Exit != 0, p.Tool == "wget" && code == 0 && p.Exit != 0,
			p.Tool == "curl" && code == 0 && p.Exit != 0 && (target == "" || proxyDown(p.Exit)):
			return []finding.Finding{errorf(h.Name, "check the proxy address and port in spec.proxy, that the proxy runs, and that this host may reach it (firewall, routes)",
				"the proxy %s does not answer from this host: %s%s", shown, probeFailure(p), detail)}
		case target == "" || !online || p.Tool == "tcp":
			// Airgap installs need only the connection; a TCP probe (no curl on the host)
			// cannot fetch, and the connection is all it proves.
			return nil
		case p.Exit != 0 || code >= 400 || code == 0:
			what := probeFailure(p)
			if code >= 400 {
				what = fmt.Sprintf("HTTP %d", code)
			}
			return []finding.Finding{errorf(h.Name, "let the proxy allow "+hostOf(target)+" (the install script and the K3s release downloads), or set spec.k3s.installScriptURL and releaseURL to a mirror it allows",
				"the proxy %s answers but the install script %s cannot be fetched through it: %s%s", shown, target, what, detail)}
		}
		return nil
	})
}

// ProxyProbeTarget returns the proxy URL a host's probe goes through (the https proxy, else
// the http one; with its user, without password) and the URL it fetches: the online install
// script (spec.k3s.installScriptURL, default https://get.k3s.io) through the proxy that
// carries it, or "" for airgap installs (the probe then only connects to the proxy).
func ProxyProbeTarget(c *inventory.Cluster, px *inventory.Proxy) (proxy, target string) {
	if c.Spec.K3s.Install == inventory.Airgap {
		proxy = px.HTTPS
		if proxy == "" {
			proxy = px.HTTP
		}
		return proxy, ""
	}
	target = c.Spec.K3s.InstallScriptURL
	if target == "" {
		target = inventory.DefaultInstallScriptURL
	}
	proxy = px.HTTPS
	if strings.HasPrefix(target, "http://") && px.HTTP != "" || proxy == "" {
		proxy = px.HTTP
	}
	return proxy, target
}

// proxyDown reports curl exit codes that mean the proxy itself did not answer: 5 (proxy
// name not resolved), 7 (connection refused or unreachable), 28 (timeout).
func proxyDown(exit int) bool { return exit == 5 || exit == 7 || exit == 28 }

func probeFailure(p *facts.ProxyProbe) string {
	switch {
	case p.Tool == "tcp" && p.Exit == 124:
		return fmt.Sprintf("no TCP connection within %d s", facts.ProxyProbeLimit)
	case p.Tool == "tcp":
		return "TCP connection failed"
	case p.Tool == "wget" && p.Exit == 124:
		return fmt.Sprintf("no answer within %d s (wget)", facts.ProxyProbeLimit)
	case p.Tool == "wget":
		return fmt.Sprintf("wget exit %d", p.Exit)
	case p.Exit == 5:
		return "the proxy's name does not resolve (curl exit 5)"
	case p.Exit == 7:
		return "connection refused or host unreachable (curl exit 7)"
	case p.Exit == 28:
		return fmt.Sprintf("no answer within %d s (curl exit 28)", facts.ProxyProbeLimit)
	case p.Exit == 56 && p.Connect != 0:
		return fmt.Sprintf("the proxy answered CONNECT with %d (curl exit 56)", p.Connect)
	}
	return fmt.Sprintf("curl exit %d", p.Exit)
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Hostname()
	}
	return u
}

// checkNoProxy: the environment the K3s unit will have — what the host already gives it
// (unit Environment=, /etc/default/UNIT, /etc/sysconfig/UNIT, UNIT.service.env), with the
// proxy variables k3strap writes when spec.proxy is set put last — sets a proxy and a
// NO_PROXY that misses entries in-cluster traffic needs (inventory.Cluster.RequiredNoProxy,
// judged by k3s.InClusterProxied): an error naming the missing entries, the variable and where
// it was set.
func checkNoProxy(in *Input) []finding.Finding {
	if in.Proxy == nil {
		return nil
	}
	c := in.Cluster
	required := c.RequiredNoProxy()
	return eachHost(in, func(_ int, h *inventory.Host, _ *facts.Host) []finding.Finding {
		pf := in.Proxy[h.Name]
		if pf == nil {
			return nil
		}
		env := *pf
		if c.HostProxy(h) != nil {
			// k3strap's env file comes last and sets all six variables.
			env.Layers = append(append([]facts.ProxyLayer(nil), pf.Layers...), facts.ProxyLayer{
				Source: "spec.proxy (k3strap writes it into the unit's env file)", Vars: plannedVars(c, h)})
		}
		j := env.Judge(required)
		if j == nil {
			return nil
		}
		return []finding.Finding{{Host: h.Name, Severity: finding.Error,
			Message: fmt.Sprintf("the K3s service's environment sets a proxy and a NO_PROXY (%s) that misses %s: traffic to them would go to the proxy (nodes, pods and services time out or reach the wrong place)",
				j.NoProxySource, strings.Join(j.Missing, ", ")),
			Fixes:    finding.Fixes(j.Fix),
			Evidence: proxyEvidence(j),
		}}
	})
}

func plannedVars(c *inventory.Cluster, h *inventory.Host) map[string]string {
	px := c.HostProxy(h)
	hp, hsp := px.HTTP, px.HTTPS
	if hp == "" {
		hp = hsp
	}
	if hsp == "" {
		hsp = hp
	}
	np := strings.Join(c.NoProxy(h), ",")
	return map[string]string{"HTTP_PROXY": hp, "HTTPS_PROXY": hsp, "NO_PROXY": np, "http_proxy": hp, "https_proxy": hsp, "no_proxy": np}
}

func proxyEvidence(j *facts.ProxyJudgement) []finding.Evidence {
	var out []finding.Evidence
	for _, v := range j.Vars {
		out = append(out, finding.Evidence{Text: v, Source: "the K3s unit's environment"})
	}
	out = append(out, finding.Evidence{Text: "missing from NO_PROXY: " + strings.Join(j.Missing, ","), Source: "k3s.NoProxy (docs/proxy.md)"})
	return out
}
