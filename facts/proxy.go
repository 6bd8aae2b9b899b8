// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	_ "embed"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/k3strap/k3strap/k3s"
)

// ProxyScript reads the proxy environment of a K3s unit where systemd takes it from and
// optionally probes a proxy (proxy.sh, the host paths of k3s.ShellVars before it; run as
// root: the unit's env file is 0600). ProxyArgs builds its arguments; ParseProxy reads its
// output. Preflight (the proxy checks) and doctor (the no-proxy finding) use it.
var ProxyScript = k3s.ShellVars() + proxyScript

//go:embed proxy.sh
var proxyScript string

// ProxyProbeLimit bounds the proxy probe on a host, in seconds: a proxy that does not answer
// within it is reported as not answering.
const ProxyProbeLimit = 10

// ProxyArgs returns ProxyScript's arguments for unit (k3s or k3s-agent): without proxyURL
// only the environment is read; with it (its user information removed here: with auth the
// caller sends user and password on standard input, ProxyStdin) the proxy is probed for
// target ("" probes only that the proxy accepts a connection).
func ProxyArgs(unit, proxyURL, target string, auth bool) []string {
	if proxyURL == "" {
		return []string{unit}
	}
	a := "none"
	if auth {
		a = "auth"
	}
	return []string{unit, withoutUser(proxyURL), target, a, strconv.Itoa(ProxyProbeLimit)}
}

// ProxyStdin is what ProxyScript reads on standard input for a proxy with credentials: a
// first line "# proxy-url URL" with the proxy URL carrying user and password (for wget, which
// reads the proxy from its environment; a comment to curl), then the curl config (-K -) line
// giving the user and password. Secret: the caller sends it as Stdin, never as an argument.
func ProxyStdin(proxyURL, user, password string) []byte {
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace
	withPW := proxyURL
	if p, err := url.Parse(proxyURL); err == nil {
		p.User = url.UserPassword(user, password)
		withPW = p.String()
	}
	return []byte("# proxy-url " + withPW + "\n" + `proxy-user = "` + esc(user+":"+password) + "\"\n")
}

// withoutUser removes the user information: curl would take it over the config's
// proxy-user.
func withoutUser(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}

// ProxyLayer is one place a unit's environment comes from and the proxy variables it sets
// there (values as written, quotes removed; may hold a proxy password: mask before showing).
type ProxyLayer struct {
	// Source is "unit Environment=" or the env file's path.
	Source string
	Vars   map[string]string
}

// ProxyFacts is what ProxyScript printed, parsed.
type ProxyFacts struct {
	// Layers in systemd's order: a later layer's variable wins.
	Layers []ProxyLayer
	// Probe is the proxy probe; nil when none ran.
	Probe *ProxyProbe
}

// ProxyProbe is the result of one proxy probe.
type ProxyProbe struct {
	// Tool is curl, wget, tcp (bash's /dev/tcp) or none (nothing to probe with).
	Tool string
	// Exit is the tool's exit status (curl: 5 proxy name not resolved, 7 no connection, 28
	// timeout, 56 CONNECT refused, ...; tcp: 124 timeout).
	Exit int
	// HTTP is the target's HTTP status through the proxy; Connect the proxy's answer to
	// CONNECT (https targets); 0 when none.
	HTTP, Connect int
	// Err is the tool's first error line, masked (k3s.Mask).
	Err string
}

// Effective returns the value systemd gives the unit for name: the last layer that sets it.
func (p *ProxyFacts) Effective(name string) (value, source string) {
	if p == nil {
		return "", ""
	}
	for i := len(p.Layers) - 1; i >= 0; i-- {
		if v, ok := p.Layers[i].Vars[name]; ok {
			return v, p.Layers[i].Source
		}
	}
	return "", ""
}

// ParseProxy reads ProxyScript's output. It never fails: what it cannot read is left out.
func ParseProxy(out []byte) ProxyFacts {
	var f ProxyFacts
	var cur *ProxyLayer
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case line == "@unitenv":
			f.Layers = append(f.Layers, ProxyLayer{Source: "unit Environment=", Vars: map[string]string{}})
			cur = &f.Layers[len(f.Layers)-1]
		case strings.HasPrefix(line, "@file "):
			f.Layers = append(f.Layers, ProxyLayer{Source: strings.TrimPrefix(line, "@file "), Vars: map[string]string{}})
			cur = &f.Layers[len(f.Layers)-1]
		case strings.HasPrefix(line, "@probe-err "):
			if f.Probe != nil {
				f.Probe.Err = k3s.Mask(strings.TrimSpace(strings.TrimPrefix(line, "@probe-err ")))
			}
		case strings.HasPrefix(line, "@probe "):
			fs := strings.Fields(strings.TrimPrefix(line, "@probe "))
			if len(fs) >= 4 {
				p := &ProxyProbe{Tool: fs[0]}
				p.Exit, _ = strconv.Atoi(fs[1])
				p.HTTP, _ = strconv.Atoi(fs[2])
				p.Connect, _ = strconv.Atoi(fs[3])
				f.Probe = p
			}
			cur = nil
		case cur != nil:
			if k, v, ok := parseEnvLine(line); ok {
				cur.Vars[k] = v
			}
		}
	}
	return f
}

// parseEnvLine reads NAME=VALUE as systemd's EnvironmentFile and sh read the simple cases:
// an optional "export ", the value's surrounding single or double quotes removed.
func parseEnvLine(line string) (string, string, bool) {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "export ")
	k, v, ok := strings.Cut(line, "=")
	if !ok || k == "" {
		return "", "", false
	}
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '\'' && v[len(v)-1] == '\'' || v[0] == '"' && v[len(v)-1] == '"') {
		v = v[1 : len(v)-1]
	}
	return strings.TrimSpace(k), v, true
}

// ProxyJudgement is what ProxyFacts.Judge found: the proxy variables in effect (masked), the
// required NO_PROXY entries missing, where NO_PROXY was set, and the fix.
type ProxyJudgement struct {
	// Vars are the effective HTTP_PROXY, HTTPS_PROXY and NO_PROXY as "NAME=value (source)",
	// proxy passwords masked.
	Vars []string
	// Missing are the required entries NO_PROXY lacks, in NoProxy's order.
	Missing []string
	// NoProxySource says where NO_PROXY was set ("not set" when nowhere).
	NoProxySource string
	Fix           string
}

// Judge applies k3s.InClusterProxied to the environment systemd gives the unit (pf's layers,
// the last setting a variable wins; Go's upper-then-lower case lookup): nil when no proxy is
// set or NO_PROXY covers every required entry. Preflight (NoProxy) and doctor
// (in-cluster-proxied) both judge with it.
func (pf *ProxyFacts) Judge(required []string) *ProxyJudgement {
	sources := map[string]string{}
	lookup := func(name string) string {
		v, src := pf.Effective(name)
		if v != "" {
			sources[strings.ToUpper(name)] = src
		}
		return v
	}
	httpP := k3s.GoProxyEnv("HTTP_PROXY", lookup)
	httpsP := k3s.GoProxyEnv("HTTPS_PROXY", lookup)
	noP := k3s.GoProxyEnv("NO_PROXY", lookup)
	missing := k3s.InClusterProxied(httpP, httpsP, noP, required)
	if len(missing) == 0 {
		return nil
	}
	j := &ProxyJudgement{Missing: missing, NoProxySource: "NO_PROXY not set"}
	for _, v := range []struct{ name, val string }{{"HTTP_PROXY", httpP}, {"HTTPS_PROXY", httpsP}, {"NO_PROXY", noP}} {
		if v.val == "" {
			continue
		}
		shown := v.val
		if v.name != "NO_PROXY" {
			shown = k3s.MaskProxyURL(v.val)
		}
		j.Vars = append(j.Vars, fmt.Sprintf("%s=%s (%s)", v.name, shown, sources[v.name]))
	}
	if src := sources["NO_PROXY"]; src != "" {
		j.NoProxySource = "set in " + src
	}
	j.Fix = "add " + strings.Join(missing, ",") + " to NO_PROXY (and no_proxy)"
	if src := sources["NO_PROXY"]; src != "" && strings.HasPrefix(src, "/") {
		j.Fix += " in " + src
	}
	j.Fix += ", or declare spec.proxy in the inventory: k3strap then writes the complete NO_PROXY into the unit's env file"
	return j
}
