// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestRenderProxyMasked: `render` of examples/proxy.yaml shows every host's proxy environment
// (the complete NO_PROXY, the proxy URLs) with the password masked — with the password
// variable set, and without it (render reads no password).
func TestRenderProxyMasked(t *testing.T) {
	const pw = "Sup3r-Secret-Proxy-PW"
	for _, env := range []string{pw, ""} {
		t.Setenv("PROXY_PASSWORD", env)
		code, stdout, stderr := runArgs("render", "-f", "../../examples/proxy.yaml")
		if code != 0 {
			t.Fatalf("render exit %d: %s", code, stderr)
		}
		if strings.Contains(stdout+stderr, "Secret-Proxy") {
			t.Fatalf("render shows the proxy password:\n%s", stdout)
		}
		for _, want := range []string{
			"--- /etc/rancher/k3s/proxy.env (mode 0600, secrets masked)",
			"HTTPS_PROXY='http://k3s:********@proxy.factory.example:3128'",
			"http_proxy='http://k3s:********@proxy.hall2.factory.example:3128'",
			"NO_PROXY=127.0.0.0/8,::1,localhost,10.0.10.11,10.0.10.21,10.0.20.21,10.42.0.0/16,fd42::/56,10.43.0.0/16,fd43::/112,.svc,.cluster.local,k3s.factory.example,registry.factory.example,.factory.example,192.168.50.0/24\n",
			"K3STRAP_PROXY_ENV=/etc/rancher/k3s/proxy.env",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("render lacks %q", want)
			}
		}
		if n := strings.Count(stdout, "--- /etc/rancher/k3s/proxy.env"); n != 3 {
			t.Errorf("render shows %d proxy files, want one per host (3)", n)
		}
	}
}
