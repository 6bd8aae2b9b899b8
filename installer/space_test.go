// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"reflect"
	"testing"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// TestPlannedWrites: what preflight's UploadSpace is told k3strap will write — files the host
// does not hold yet, an upload as root twice (partial file and copy), another user's staged in
// /var/tmp too, an online install's download — and nothing for files already in place.
func TestPlannedWrites(t *testing.T) {
	c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{
		{Name: "cp1", Address: "192.0.2.1", Role: inventory.RoleServer},
		{Name: "w1", Address: "192.0.2.2", Role: inventory.RoleAgent},
		{Name: "w2", Address: "192.0.2.3", Role: inventory.RoleAgent},
	}}}
	s := New(c, Options{}, &events.Recorder{}).newSession(commandFor("preflight"))
	bin := plan.File{Path: "/usr/local/bin/k3s", LocalPath: "/art/k3s", SHA256: "aa", Size: 70 << 20}
	cfg := plan.File{Path: "/etc/rancher/k3s/config.yaml", Content: []byte("x"), SHA256: "bb", Size: 1}
	for _, hs := range s.hosts {
		hs.plan = &plan.HostPlan{Host: hs.host, Airgap: true, Files: []plan.File{bin, cfg}}
		hs.facts = &facts.Host{Sudo: facts.Sudo{Root: true}, K3s: facts.K3sInstall{Files: map[string]string{}}}
	}
	w1, w2 := s.state("w1"), s.state("w2")
	w1.facts.Sudo.Root = false
	w2.facts.K3s.Files = map[string]string{bin.Path: "aa", cfg.Path: "bb"} // all in place
	w2.plan.Airgap = false
	got := s.plannedWrites()
	want := map[string][]preflight.Write{
		"cp1": {
			{Dir: "/usr/local/bin", Bytes: 140 << 20, What: "/usr/local/bin/k3s (70 MiB, uploaded then copied into place)"},
			{Dir: "/etc/rancher/k3s", Bytes: 1, What: "/etc/rancher/k3s/config.yaml (1 B)"},
		},
		"w1": {
			{Dir: "/var/tmp", Bytes: 70 << 20, What: "/var/tmp staged for /usr/local/bin/k3s (70 MiB)"},
			{Dir: "/usr/local/bin", Bytes: 70 << 20, What: "/usr/local/bin/k3s (70 MiB)"},
			{Dir: "/var/tmp", Bytes: 1, What: "/var/tmp staged for /etc/rancher/k3s/config.yaml (1 B)"},
			{Dir: "/etc/rancher/k3s", Bytes: 1, What: "/etc/rancher/k3s/config.yaml (1 B)"},
		},
		// Online, K3s not installed: the install script downloads the binary.
		"w2": {
			{Dir: "/tmp", Bytes: onlineBinaryEstimate, What: "the K3s binary the install script downloads (about 80 MiB)"},
			{Dir: "/usr/local/bin", Bytes: onlineBinaryEstimate, What: "/usr/local/bin/k3s (about 80 MiB, downloaded)"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plannedWrites:\n got %+v\nwant %+v", got, want)
	}
}
