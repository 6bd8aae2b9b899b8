// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func TestCheckIDs(t *testing.T) {
	want := []string{"SSH", "Sudo", "OS", "Arch", "InitSystem", "KernelConfig", "CNIKernel", "Cgroups", "Swap",
		"Port-6443", "Port-10250", "Port-2379", "Port-2380", "Port-8472", "Port-51820", "Port-51821", "Port-179", "Port-4789", "Port-5473",
		"Mem", "Disk", "UploadSpace", "Hostname", "MachineID", "ClockSkew", "DefaultRoute", "IPFamilies", "Proxy", "NoProxy",
		"NodePaths", "PathMTU", "NodeAddress", "HostFirewall", "IptablesBackends", "NMCloudSetup", "NetworkManager", "ResolvConf", "SELinux", "ExistingInstall", "ServerCount", "CriticalConfig", "CloudController", "FirstNodeTaints",
		"RancherAgentTolerations", "RancherVersion", "AirgapRelease"}
	var got []string
	for _, c := range Checks() {
		got = append(got, c.ID())
	}
	if !slices.Equal(got, want) {
		t.Errorf("check IDs = %v\nwant %v", got, want)
	}
}

// f1Cluster is the F1 inventory: the real K3s v1.36.3 capture's config.yaml
// (fixtures/real-k3s-v1.36.3/config-f1.yaml, copied to testdata) as spec.k3s.config of a single
// server named like the captured node.
func f1Cluster(t *testing.T) *inventory.Cluster {
	t.Helper()
	b, err := os.ReadFile("testdata/config-f1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg inventory.K3sConfig
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	c := newCluster(host("vm", inventory.RoleServer))
	c.Spec.K3s.Config = cfg
	c.Source = "cluster.yaml"
	c.Positions = inventory.Positions{"spec.k3s.config.disable-cloud-controller": {Line: 14, Column: 7}}
	return c
}

func TestF1FixtureInventory(t *testing.T) {
	c := f1Cluster(t)
	// the capturing machine used cgroup v1, hence fail-cgroupv1=false in the fixture.
	in := input(c, func(_ string, f *facts.Host) {
		f.Cgroup = facts.Cgroup{Version: 1, Controllers: []string{"cpuset", "cpu", "memory"}}
	})
	r := Run(in, Ignore{})
	if !r.HasErrors() {
		t.Fatal("the F1 inventory passed preflight")
	}
	errs := r.Errors()
	if len(errs) != 1 {
		t.Fatalf("want exactly the CloudController error, got %v", errs)
	}
	e := errs[0]
	if e.ID != "CloudController" || e.Host != "vm" {
		t.Fatalf("got %s", e)
	}
	for _, s := range []string{
		"kubelet-arg cloud-provider=external (spec.k3s.config.kubelet-arg)",
		"spec.k3s.config.disable-cloud-controller: true (cluster.yaml:14)",
		"node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule",
		"nothing ever removes it",
		"CoreDNS",
		"Pending",
	} {
		if !strings.Contains(e.Message, s) {
			t.Errorf("message lacks %q:\n%s", s, e.Message)
		}
	}
	for _, s := range []string{
		"keep K3s's embedded cloud controller (remove spec.k3s.config.disable-cloud-controller",
		"spec.k3s.cloudController: external with spec.k3s.externalCloudController.manifest",
		"drop cloud-provider=external from spec.k3s.config.kubelet-arg",
	} {
		if !strings.Contains(e.Fix(), s) {
			t.Errorf("fix lacks %q:\n%s", s, e.Fix())
		}
	}
	if got := e.String(); !strings.HasPrefix(got, "[ERROR CloudController] vm: the kubelet gets") {
		t.Errorf("String() = %q", got)
	}
	// The fixture disables every packaged add-on, so its NoSchedule-free node has no F3 issue,
	// and its fail-cgroupv1=false satisfies Cgroups on v1.
	for _, f := range r.Findings {
		if f.ID == "FirstNodeTaints" || f.ID == "Cgroups" {
			t.Errorf("unexpected %s", f)
		}
	}

	// Fixing it either way clears the error.
	keep := f1Cluster(t)
	keep.Spec.K3s.Config.DisableCloudController = nil
	if r := Run(input(keep, nil), Ignore{}); r.HasErrors() {
		t.Errorf("embedded controller kept: %v", r.Errors())
	}
	ext := f1Cluster(t)
	ext.Spec.K3s.CloudController = inventory.CloudControllerExternal
	ext.Spec.K3s.ExternalCloudController = &inventory.ExternalCloudController{Manifest: "ccm.yaml"}
	if r := Run(input(ext, nil), Ignore{}); r.HasErrors() {
		t.Errorf("external controller declared: %v", r.Errors())
	}
}

func TestParseIgnore(t *testing.T) {
	tests := []struct {
		name    string
		list    []string
		has     []string
		hasNot  []string
		wantErr string
	}{
		{"none", nil, nil, []string{"Swap", "CloudController"}, ""},
		{"case-insensitive, comma-separated", []string{"port-6443,SWAP", " cloudcontroller "}, []string{"Port-6443", "Swap", "CloudController", "swap"}, []string{"Port-10250", "Mem"}, ""},
		{"all", []string{"ALL"}, []string{"Swap", "FirstNodeTaints", "Port-51820"}, nil, ""},
		{"empty items skipped", []string{"", "Mem,,"}, []string{"Mem"}, []string{"Disk"}, ""},
		{"unknown", []string{"Swap,Nope"}, nil, nil, `unknown preflight check "Nope"`},
		{"all with others", []string{"all,Swap"}, nil, nil, "do not list individual checks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ign, err := ParseIgnore(tc.list)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "unknown") && !strings.Contains(err.Error(), "Port-6443, Port-10250") {
					t.Errorf("error does not list the known checks: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.has {
				if !ign.Has(id) {
					t.Errorf("Has(%q) = false", id)
				}
			}
			for _, id := range tc.hasNot {
				if ign.Has(id) {
					t.Errorf("Has(%q) = true", id)
				}
			}
		})
	}
}

func TestRunIgnoreTurnsErrorsIntoWarnings(t *testing.T) {
	in := input(f1Cluster(t), func(_ string, f *facts.Host) { f.SwapTotalKiB = 1 << 20 })
	ign, err := ParseIgnore([]string{"cloudcontroller"})
	if err != nil {
		t.Fatal(err)
	}
	r := Run(in, ign)
	if r.HasErrors() {
		t.Fatalf("errors remain: %v", r.Errors())
	}
	var cc, swap *finding.Finding
	for i, f := range r.Findings {
		switch f.ID {
		case "CloudController":
			cc = &r.Findings[i]
		case "Swap":
			swap = &r.Findings[i]
		}
	}
	if cc == nil || cc.Severity != finding.Warning || !cc.Ignored {
		t.Errorf("CloudController finding = %+v, want an ignored warning", cc)
	}
	if !strings.HasPrefix(cc.String(), "[WARNING CloudController] vm: ") {
		t.Errorf("String() = %q", cc.String())
	}
	if swap == nil || swap.Ignored {
		t.Errorf("a plain warning must not be marked ignored: %+v", swap)
	}
	if len(r.Warnings()) != 2 || len(r.Errors()) != 0 {
		t.Errorf("Warnings %d, Errors %d", len(r.Warnings()), len(r.Errors()))
	}
	// Ignoring another check leaves the error.
	ign, _ = ParseIgnore([]string{"Swap"})
	if r := Run(in, ign); !r.HasErrors() {
		t.Error("ignoring Swap removed the CloudController error")
	}
}

func TestRunSortsByHostThenCheck(t *testing.T) {
	c := newCluster(host("cp1", inventory.RoleServer), host("w1", inventory.RoleAgent), host("w2", inventory.RoleAgent))
	in := input(c, func(n string, f *facts.Host) {
		switch n {
		case "cp1":
			f.DefaultRoute = nil
			f.MachineID = "same"
		case "w2":
			f.MemTotalKiB = 100 << 10
			f.SwapTotalKiB = 1 << 20
			f.MachineID = "same"
			f.ClockSkew = 90 * time.Second
		}
	})
	delete(in.Facts, "w1")
	in.Unreachable = map[string]error{"w1": errors.New("connection refused")}
	r := Run(in, Ignore{})
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.ID+"@"+f.Host)
	}
	want := []string{
		"MachineID@cp1, w2", "DefaultRoute@cp1",
		"SSH@w1",
		"Swap@w2", "Mem@w2", "ClockSkew@w2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v\nwant    %v", got, want)
	}
	if n := len(r.Errors()); n != 5 {
		t.Errorf("Errors() = %d, want 5", n)
	}
	if n := len(r.Warnings()); n != 1 {
		t.Errorf("Warnings() = %d, want 1", n)
	}
}

func TestRunWithoutCluster(t *testing.T) {
	r := Run(&Input{}, Ignore{})
	if !r.HasErrors() {
		t.Fatal("no inventory must be an error")
	}
}

func TestFindingString(t *testing.T) {
	f := finding.Finding{ID: "Port-6443", Host: "cp1", Severity: finding.Error, Message: "TCP port 6443 is in use"}
	if got := f.String(); got != "[ERROR Port-6443] cp1: TCP port 6443 is in use" {
		t.Errorf("String() = %q", got)
	}
	f.Severity = finding.Warning
	if got := f.String(); got != "[WARNING Port-6443] cp1: TCP port 6443 is in use" {
		t.Errorf("String() = %q", got)
	}
}

func TestK3sVersionCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"v1.36.3+k3s1", "v1.36.3+k3s1", 0},
		{"v1.36.4+k3s1", "v1.36.3+k3s1", 1},
		{"v1.36.3+k3s2", "v1.36.3+k3s1", 1},
		{"v1.35.9+k3s1", "v1.36.0+k3s1", -1},
		{"v1.36.3-rc1+k3s1", "v1.36.3+k3s1", -1},
		{"v2.0.0+k3s1", "v1.99.0+k3s1", 1},
	}
	for _, tc := range tests {
		a, okA := k3s.ParseRelease(tc.a)
		b, okB := k3s.ParseRelease(tc.b)
		if !okA || !okB {
			t.Fatalf("parse %q %q", tc.a, tc.b)
		}
		if got := a.Compare(b); got != tc.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"", "stable", "v1.36", "v1.x.3"} {
		if _, ok := k3s.ParseRelease(bad); ok {
			t.Errorf("k3s.ParseRelease(%q) ok", bad)
		}
	}
}
