// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bytes"
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/preflight"
)

// proxyEvidenceTimeout bounds the proxy command on one host: the probe's own limit
// (facts.ProxyProbeLimit) plus the reading of a few files.
const proxyEvidenceTimeout = time.Duration(facts.ProxyProbeLimit+10) * time.Second

// gatherProxy runs facts.ProxyScript on every reachable host at once (one SSH command each,
// as root: the unit's env file is 0600) and returns the parsed evidence by host name for the
// Proxy and NoProxy preflight checks (docs/proxy.md). A host with spec.proxy also probes the
// proxy (preflight.ProxyProbeTarget); its password travels on standard input
// (facts.ProxyStdin), never on the command line. A host whose command fails has no entry (the checks skip it).
func (s *session) gatherProxy(ctx context.Context) (map[string]*facts.ProxyFacts, error) {
	c := s.in.cluster
	out := map[string]*facts.ProxyFacts{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, hs := range s.hosts {
		if hs.c() == nil || hs.connErr != nil || hs.facts == nil {
			continue
		}
		cmd := proxyCommand(c, hs.host)
		wg.Add(1)
		go func(hs *hostState, cmd remote.Cmd) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, proxyEvidenceTimeout)
			defer cancel()
			res, err := hs.c().Run(cctx, cmd)
			if err != nil || res == nil {
				return
			}
			pf := facts.ParseProxy(res.Stdout)
			mu.Lock()
			out[hs.host.Name] = &pf
			mu.Unlock()
		}(hs, cmd)
	}
	wg.Wait()
	return out, ctx.Err()
}

// proxyCommand is the proxy command for h: the environment read, and with spec.proxy the
// probe (credentials on stdin). When the password cannot be read the probe runs without it
// (the plan step reports the missing password).
func proxyCommand(c *inventory.Cluster, h *inventory.Host) remote.Cmd {
	unit := k3s.Unit(string(h.Role))
	cmd := remote.Script("read the proxy environment", facts.ProxyScript, facts.ProxyArgs(unit, "", "", false)...).AsRoot()
	px := c.HostProxy(h)
	if px == nil {
		return cmd
	}
	proxy, target := preflight.ProxyProbeTarget(c, px)
	auth := false
	if px.HasCredentials() {
		if pw, err := c.ProxyPassword(px); err == nil {
			auth = true
			user := ""
			if u, err := url.Parse(proxy); err == nil && u.User != nil {
				user = u.User.Username()
			}
			cmd = cmd.WithStdin(bytes.NewReader(facts.ProxyStdin(proxy, user, pw)))
		}
	}
	cmd.Args = facts.ProxyArgs(unit, proxy, target, auth)
	cmd.Label = "probe the proxy"
	return cmd
}
