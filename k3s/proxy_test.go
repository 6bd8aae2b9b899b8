// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"reflect"
	"strings"
	"testing"
)

// TestNoProxy: the complete NO_PROXY in its fixed order — loopback, nodes, cluster and service
// CIDRs (K3s's defaults when none), .svc and the cluster domain, endpoints, local registries,
// the user's extras — each once, IPs and CIDRs canonical.
func TestNoProxy(t *testing.T) {
	loop := []string{"127.0.0.0/8", "::1", "localhost"}
	cases := []struct {
		name string
		in   NoProxyInput
		want []string
	}{
		{"defaults", NoProxyInput{NodeAddresses: []string{"10.0.0.1", "10.0.0.2"}},
			append(loop, "10.0.0.1", "10.0.0.2", "10.42.0.0/16", "10.43.0.0/16", ".svc", ".cluster.local")},
		{"custom CIDRs and domain", NoProxyInput{NodeAddresses: []string{"node1.example.com"},
			ClusterCIDRs: []string{"172.20.0.0/16"}, ServiceCIDRs: []string{"172.21.0.0/16"}, ClusterDomain: "k8s.internal"},
			append(loop, "node1.example.com", "172.20.0.0/16", "172.21.0.0/16", ".svc", ".k8s.internal")},
		{"dual-stack pairs, IPv6 canonical, comma lists split", NoProxyInput{NodeAddresses: []string{"10.0.0.1", "[2001:DB8::1]"},
			ClusterCIDRs: []string{"10.42.0.0/16,2001:db8:42:0::/56"}, ServiceCIDRs: []string{"10.43.0.0/16", "2001:db8:43::/112"}},
			append(loop, "10.0.0.1", "2001:db8::1", "10.42.0.0/16", "2001:db8:42::/56", "10.43.0.0/16", "2001:db8:43::/112", ".svc", ".cluster.local")},
		{"IPv6-only", NoProxyInput{NodeAddresses: []string{"fd00::10"}, ClusterCIDRs: []string{"fd42::/56"}, ServiceCIDRs: []string{"fd43::/112"}},
			append(loop, "fd00::10", "fd42::/56", "fd43::/112", ".svc", ".cluster.local")},
		{"VIP, endpoint, registries, extras; duplicates once, first kept", NoProxyInput{
			NodeAddresses: []string{"10.0.0.1", "10.0.0.1", "LocalHost"},
			Endpoints:     []string{"k3s.example.com", "10.0.0.100", "10.0.0.1"},
			Registries:    []string{"mirror.local", "mirror.local"},
			Extra:         []string{".corp.example.com", "10.42.0.0/16", " 192.168.0.0/16 ", "K3S.example.com"}},
			append(loop, "10.0.0.1", "10.42.0.0/16", "10.43.0.0/16", ".svc", ".cluster.local", "k3s.example.com", "10.0.0.100",
				"mirror.local", ".corp.example.com", "192.168.0.0/16")},
		{"a CIDR is masked to its network", NoProxyInput{ClusterCIDRs: []string{"10.42.7.9/16"}},
			append(loop, "10.42.0.0/16", "10.43.0.0/16", ".svc", ".cluster.local")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NoProxy(c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("NoProxy =\n %v\nwant\n %v", got, c.want)
			}
			// Stable: the same input gives the same list.
			if again := NoProxy(c.in); !reflect.DeepEqual(again, got) {
				t.Errorf("NoProxy is not stable: %v then %v", got, again)
			}
		})
	}
}

// TestNoProxyMissing: what a given NO_PROXY misses of the required entries, with CIDR
// containment, domain suffixes and "*".
func TestNoProxyMissing(t *testing.T) {
	req := NoProxy(NoProxyInput{NodeAddresses: []string{"10.0.0.1", "cp1.example.com"}, ClusterCIDRs: []string{"10.42.0.0/16", "fd42::/56"}})
	cases := []struct {
		name string
		list []string
		want []string
	}{
		{"complete", req, nil},
		{"star", []string{"*"}, nil},
		{"the K3s docs' example misses IPv6, the name and the domains", []string{"127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"},
			[]string{"::1", "localhost", "cp1.example.com", "fd42::/56", ".svc", ".cluster.local"}},
		{"wider CIDRs and suffixes cover", []string{"127.0.0.1/8", "::1/128", "localhost", "10.0.0.0/8", ".example.com", "fd00::/8", "svc", "cluster.local"}, nil},
		{"missing the cluster CIDR", []string{"127.0.0.0/8,::1,localhost,10.0.0.1,cp1.example.com,10.43.0.0/16,fd42::/56,.svc,.cluster.local"},
			[]string{"10.42.0.0/16"}},
		{"a narrower CIDR does not cover", []string{"127.0.0.0/8,::1,localhost,10.0.0.1,cp1.example.com,10.42.0.0/24,10.43.0.0/16,fd42::/56,.svc,.cluster.local"},
			[]string{"10.42.0.0/16"}},
		{"a name does not cover an address", []string{"localhost"}, []string{"127.0.0.0/8", "::1", "10.0.0.1", "cp1.example.com", "10.42.0.0/16", "fd42::/56", "10.43.0.0/16", ".svc", ".cluster.local"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NoProxyMissing(c.list, req); !reflect.DeepEqual(got, c.want) {
				t.Errorf("NoProxyMissing = %v, want %v", got, c.want)
			}
		})
	}
}

// TestMaskProxyPassword: a URL's password is masked by MaskProxyURL and by Mask in any text;
// the user, host and port stay readable.
func TestMaskProxyPassword(t *testing.T) {
	const pw = "s3cr%40t-pw"
	u := "http://alice:" + pw + "@proxy.example.com:3128"
	if got := MaskProxyURL(u); got != "http://alice:"+Masked+"@proxy.example.com:3128" {
		t.Errorf("MaskProxyURL = %q", got)
	}
	if got := MaskProxyURL("http://proxy:3128"); got != "http://proxy:3128" {
		t.Errorf("MaskProxyURL without password = %q", got)
	}
	for _, text := range []string{
		"HTTP_PROXY=" + u,
		"https_proxy='" + u + "'",
		"curl: (56) could not connect via " + u + "/ refused",
	} {
		got := Mask(text)
		if strings.Contains(got, "s3cr") || !strings.Contains(got, "alice:"+Masked+"@proxy.example.com:3128") {
			t.Errorf("Mask(%q) = %q", text, got)
		}
	}
	if !ProxyURLHasPassword(u) || ProxyURLHasPassword("http://alice@proxy:3128") {
		t.Error("ProxyURLHasPassword")
	}
	if !IsProxyEnv("no_proxy") || !IsProxyEnv("CONTAINERD_HTTPS_PROXY") || IsProxyEnv("ALL_PROXY") {
		t.Error("IsProxyEnv")
	}
}
