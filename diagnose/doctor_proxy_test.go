// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"os"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
)

// TestDoctorInClusterProxied: a node (the real v1.36.3 capture) whose k3s.service.env was
// edited by hand to a NO_PROXY without the cluster CIDR is an in-cluster-proxied error with
// the variables as evidence — the password masked — and the fix; the complete NO_PROXY, or no
// proxy, is no finding.
func TestDoctorInClusterProxied(t *testing.T) {
	b, err := os.ReadFile("testdata/proxy-env-edited.txt")
	if err != nil {
		t.Fatal(err)
	}
	in := doctorInput(t, "node-default.json", "")
	pf := facts.ParseProxy(b)
	in.Nodes[0].Facts.Proxy = &pf
	f := has(t, Findings(in), checkid.InClusterProxied+"@vm")
	if f.Severity != finding.Error || !strings.Contains(f.Message, "misses 10.42.0.0/16:") ||
		!strings.Contains(f.Message, "set in /etc/systemd/system/k3s.service.env") {
		t.Errorf("finding %+v", f)
	}
	text := f.Title + f.Message + strings.Join(f.Fixes, "") + strings.Join(f.Commands, "")
	for _, e := range f.Evidence {
		text += e.Text + e.Source
	}
	if strings.Contains(text, "Pr0xy-Pa55") {
		t.Errorf("the finding shows the proxy password: %s", text)
	}
	for _, want := range []string{"HTTP_PROXY=http://proxyuser:********@10.250.0.9:8888 (/etc/systemd/system/k3s.service.env)", "missing from NO_PROXY: 10.42.0.0/16", "add 10.42.0.0/16 to NO_PROXY (and no_proxy) in /etc/systemd/system/k3s.service.env", "systemctl restart k3s"} {
		if !strings.Contains(text, want) {
			t.Errorf("finding lacks %q: %+v", want, f)
		}
	}

	complete := facts.ParseProxy([]byte(strings.Replace(string(b), ",10.43.0.0/16", ",10.42.0.0/16,10.43.0.0/16", 1)))
	in.Nodes[0].Facts.Proxy = &complete
	for _, f := range Findings(in) {
		if f.ID == checkid.InClusterProxied {
			t.Errorf("complete NO_PROXY judged: %+v", f)
		}
	}
	// The node's address is required: dropping it is found too.
	noNode := facts.ParseProxy([]byte(strings.Replace(string(b), "10.250.0.2,", "10.42.0.0/16,", 1)))
	in.Nodes[0].Facts.Proxy = &noNode
	if f := has(t, Findings(in), checkid.InClusterProxied+"@vm"); !strings.Contains(f.Message, "misses 10.250.0.2:") {
		t.Errorf("finding %+v", f)
	}
}
