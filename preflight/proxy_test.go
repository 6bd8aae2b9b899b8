// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/inventory"
)

// proxyOut is facts.ProxyScript output for a host whose /etc/default/k3s sets a proxy with
// the given NO_PROXY, and an optional probe line.
func proxyOut(noProxy, probe string) *facts.ProxyFacts {
	out := "@unitenv\n@file /etc/default/k3s\nexport HTTP_PROXY=\"http://alice:hunter2@proxy.corp:3128\"\nhttps_proxy=http://alice:hunter2@proxy.corp:3128\n"
	if noProxy != "" {
		out += "NO_PROXY='" + noProxy + "'\n"
	}
	out += "@file /etc/systemd/system/k3s.service.env\n" + probe
	pf := facts.ParseProxy([]byte(out))
	return &pf
}

// TestNoProxyCheck: a NO_PROXY given by hand on the host that misses the cluster CIDR (or
// more) is an error naming the missing entries and the file, never the proxy password; a
// complete one, no proxy at all, or spec.proxy (k3strap's env file wins) is fine.
func TestNoProxyCheck(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent))
	c.Spec.Hosts[0].Address, c.Spec.Hosts[1].Address = "10.0.0.10", "10.0.0.11"
	complete := strings.Join(c.RequiredNoProxy(), ",")
	noCIDR := strings.Replace(complete, "10.42.0.0/16,", "", 1)

	with := func(noProxy string) *Input {
		in := input(c, nil)
		in.Proxy = map[string]*facts.ProxyFacts{"cp1": proxyOut(noProxy, ""), "w1": proxyOut(complete, "")}
		return in
	}
	withSpec := with(noCIDR)
	specC := *c
	specC.Spec.Proxy = &inventory.Proxy{HTTP: "http://proxy.corp:3128"}
	withSpec.Cluster = &specC
	noProxyVar := input(c, nil)
	pf := facts.ParseProxy([]byte("@unitenv\n@file /etc/default/k3s\nFOO=bar\n"))
	noProxyVar.Proxy = map[string]*facts.ProxyFacts{"cp1": &pf}

	runCases(t, checkid.NoProxy, []checkCase{
		{"complete", with(complete), nil},
		{"missing the cluster CIDR", with(noCIDR), []want{errW("cp1", "misses 10.42.0.0/16:", "set in /etc/default/k3s").withFix("add 10.42.0.0/16 to NO_PROXY", "in /etc/default/k3s", "spec.proxy")}},
		{"the K3s docs' example", with("127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"), []want{errW("cp1", "misses ::1, localhost, .svc, .cluster.local")}},
		{"NO_PROXY not set", with(""), []want{errW("cp1", "NO_PROXY not set", "misses 127.0.0.0/8, ::1, localhost, 10.0.0.10, 10.0.0.11, 10.42.0.0/16, 10.43.0.0/16, .svc, .cluster.local")}},
		{"spec.proxy's env file wins", withSpec, nil},
		{"no proxy set", noProxyVar, nil},
		{"not gathered", input(c, nil), nil},
	})
	got := checkByID(t, checkid.NoProxy).Run(with(noCIDR))
	for _, f := range got {
		all := f.Message + f.Fix()
		for _, e := range f.Evidence {
			all += e.Text + e.Source
		}
		if strings.Contains(all, "hunter2") {
			t.Errorf("the finding shows the proxy password: %+v", f)
		}
		if !strings.Contains(all, "HTTP_PROXY=http://alice:********@proxy.corp:3128 (/etc/default/k3s)") {
			t.Errorf("the evidence does not show the masked proxy and its source: %+v", f.Evidence)
		}
	}
}

// TestProxyCheck: the probe's outcome per host: answers, refuses the credentials (407), does
// not answer (curl 7, tcp timeout), cannot fetch the install script (online), not probed.
func TestProxyCheck(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer))
	c.Spec.Proxy = &inventory.Proxy{HTTP: "http://alice@proxy.corp:3128", PasswordEnv: "PW"}
	airgap := *c
	airgap.Spec.K3s.Install = inventory.Airgap
	with := func(c *inventory.Cluster, probe string) *Input {
		in := input(c, nil)
		in.Proxy = map[string]*facts.ProxyFacts{"cp1": proxyOut("*", probe)}
		return in
	}
	runCases(t, checkid.Proxy, []checkCase{
		{"answers", with(c, "@probe curl 0 200 200\n@probe-err \n"), nil},
		{"407", with(c, "@probe curl 56 000 407\n@probe-err curl: (56) CONNECT tunnel failed, response 407\n"),
			[]want{errW("cp1", "http://alice@proxy.corp:3128", "407 Proxy Authentication Required").withFix("passwordEnv")}},
		{"refused", with(c, "@probe curl 7 000 000\n@probe-err curl: (7) Failed to connect to proxy.corp port 3128\n"),
			[]want{errW("cp1", "does not answer from this host", "connection refused", "Failed to connect").withFix("proxy address and port")}},
		{"tcp timeout", with(&airgap, "@probe tcp 124 000 000\n"), []want{errW("cp1", "no TCP connection within 10 s")}},
		{"target refused by the proxy", with(c, "@probe curl 56 000 403\n@probe-err curl: (56) CONNECT tunnel failed, response 403\n"),
			[]want{errW("cp1", "answers but the install script https://get.k3s.io cannot be fetched", "HTTP 403").withFix("get.k3s.io")}},
		{"airgap: answering is enough", with(&airgap, "@probe curl 0 400 000\n"), nil},
		{"no curl: a TCP connect is all the probe proves", with(c, "@probe tcp 0 000 000\n"), nil},
		{"wget fetched", with(c, "@probe wget 0 200 000\n"), nil},
		{"tinyproxy's 401", with(c, "@probe wget 1 401 000\n@probe-err wget: server returned error: HTTP/1.0 401 Unauthorized\n"),
			[]want{errW("cp1", "401 Unauthorized", "credentials missing or wrong").withFix("passwordEnv")}},
		{"wget: 407", with(c, "@probe wget 1 407 000\n@probe-err wget: server returned error: HTTP/1.1 407 Proxy Authentication Required\n"),
			[]want{errW("cp1", "407 Proxy Authentication Required")}},
		{"wget: proxy down", with(c, "@probe wget 1 000 000\n@probe-err wget: can't connect to remote host (10.0.0.9): Connection refused\n"),
			[]want{errW("cp1", "does not answer from this host: wget exit 1", "Connection refused")}},
		{"wget: the proxy cannot fetch", with(c, "@probe wget 1 502 000\n"), []want{errW("cp1", "cannot be fetched through it: HTTP 502")}},
		{"nothing to probe with", with(c, "@probe none 0 000 000\n"), []want{warnW("cp1", "neither curl nor bash")}},
		{"not probed", with(c, ""), []want{warnW("cp1", "was not probed")}},
	})
}

// TestProxyProbeTarget: online installs fetch the install script through the proxy that
// carries its scheme; airgap installs only connect.
func TestProxyProbeTarget(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer))
	px := &inventory.Proxy{HTTP: "http://h:1", HTTPS: "http://s:2"}
	if p, tg := ProxyProbeTarget(c, px); p != "http://s:2" || tg != inventory.DefaultInstallScriptURL {
		t.Errorf("online: %s %s", p, tg)
	}
	c.Spec.K3s.InstallScriptURL = "http://mirror.local/install.sh"
	if p, _ := ProxyProbeTarget(c, px); p != "http://h:1" {
		t.Errorf("http target: %s", p)
	}
	c.Spec.K3s.Install = inventory.Airgap
	if p, tg := ProxyProbeTarget(c, px); p != "http://s:2" || tg != "" {
		t.Errorf("airgap: %s %s", p, tg)
	}
}
