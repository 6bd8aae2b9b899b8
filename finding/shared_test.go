// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package finding_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/diagnose"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/preflight"
)

// sharedCase is the evidence captured from a real K3s v1.36.3 cluster (cp1, a1, a2; a1's
// nftables drops UDP 8472; diagnose/testdata/vxlan-blocked), with nm-cloud-setup enabled and
// NetworkManager running on a1 as on a RHEL host. The same parsed network facts of every host
// feed preflight (facts.Host.Network) and doctor (facts.DoctorNode.Network).
func sharedCase(t *testing.T) (*preflight.Input, diagnose.Input) {
	t.Helper()
	var nodes corev1.NodeList
	b, err := os.ReadFile("../diagnose/testdata/vxlan-blocked/nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &nodes); err != nil {
		t.Fatal(err)
	}
	c := &inventory.Cluster{APIVersion: inventory.APIVersion, Kind: inventory.Kind, Metadata: inventory.Metadata{Name: "shared"},
		Spec: inventory.Spec{K3s: inventory.K3s{Version: "v1.36.3+k3s1"}}}
	pre := &preflight.Input{Cluster: c, Facts: map[string]*facts.Host{}}
	doc := diagnose.Input{View: facts.ClusterView{Nodes: nodes.Items}}
	// The inventory lists the hosts in the order the API lists the nodes (by name): a finding
	// naming peers names them in the cluster's order, the inventory's for preflight and the
	// API's for doctor.
	for _, name := range []string{"a1", "a2", "cp1"} {
		i := map[string]int{"cp1": 0, "a1": 1, "a2": 2}[name]
		out, err := os.ReadFile(fmt.Sprintf("../diagnose/testdata/vxlan-blocked/node-h%d.txt", i+1))
		if err != nil {
			t.Fatal(err)
		}
		dn := facts.ParseDoctorNode(out)
		if dn.Network == nil {
			t.Fatalf("%s: no network facts parsed", name)
		}
		if name == "a1" {
			nm := &dn.Network.NetworkManager
			nm.Enabled = map[string]string{"nm-cloud-setup.service": "enabled", "NetworkManager.service": "enabled"}
			nm.Active = map[string]string{"nm-cloud-setup.service": "inactive", "NetworkManager.service": "active"}
		}
		role := inventory.RoleAgent
		if name == "cp1" {
			role = inventory.RoleServer
		}
		addr := fmt.Sprintf("10.129.0.%d", 11+i)
		c.Spec.Hosts = append(c.Spec.Hosts, inventory.Host{Name: name, Address: addr, Role: role})
		pre.Facts[name] = &facts.Host{Name: name, Network: dn.Network}
		doc.Nodes = append(doc.Nodes, diagnose.NodeEvidence{Host: name, Node: name, Address: addr, Facts: &dn})
	}
	return pre, doc
}

// byKey indexes findings by "ID@host".
func byKey(fs []finding.Finding) map[string]finding.Finding {
	m := map[string]finding.Finding{}
	for _, f := range fs {
		m[f.ID+"@"+f.Host] = f
	}
	return m
}

// TestSharedJudgementsOneFinding: a host-network check preflight and doctor both run
// (checkid.Shared) yields the same Finding from both judges — ID, severity, host, title,
// message, evidence, fixes and commands — and only Source tells them apart. NodePaths is the
// one that differs by design: doctor adds flannel's own state (its FDB entries) to the
// evidence preflight has.
func TestSharedJudgementsOneFinding(t *testing.T) {
	pre, doc := sharedCase(t)
	pf := byKey(preflight.Run(pre, preflight.Ignore{}).Findings)
	df := byKey(diagnose.Findings(doc))
	for _, key := range []string{"NMCloudSetup@a1", "NetworkManager@a1"} {
		p, okp := pf[key]
		d, okd := df[key]
		if !okp || !okd {
			t.Fatalf("%s: preflight found it %v, doctor %v (preflight %v, doctor %v)", key, okp, okd, slices.Collect(mapKeys(pf)), slices.Collect(mapKeys(df)))
		}
		if p.Source != finding.Preflight || d.Source != finding.Doctor {
			t.Errorf("%s: sources %q and %q", key, p.Source, d.Source)
		}
		p.Source, d.Source = "", ""
		if !reflect.DeepEqual(p, d) {
			t.Errorf("%s differs:\npreflight %+v\ndoctor    %+v", key, p, d)
		}
		if len(p.Evidence) == 0 || len(p.Fixes) == 0 {
			t.Errorf("%s: no evidence or fix: %+v", key, p)
		}
	}
	p, d := pf["NodePaths@a1"], df["NodePaths@a1"]
	if p.ID == "" || d.ID == "" {
		t.Fatalf("NodePaths@a1: preflight %+v, doctor %+v", p, d)
	}
	if p.Severity != d.Severity || p.Message != d.Message || !slices.Equal(p.Fixes, d.Fixes) || !slices.Equal(p.Commands, d.Commands) {
		t.Errorf("NodePaths differs:\npreflight %+v\ndoctor    %+v", p, d)
	}
	if len(d.Evidence) <= len(p.Evidence) || !reflect.DeepEqual(d.Evidence[:len(p.Evidence)], p.Evidence) {
		t.Errorf("doctor's NodePaths evidence does not extend preflight's:\npreflight %v\ndoctor    %v", p.Evidence, d.Evidence)
	}
}

func mapKeys(m map[string]finding.Finding) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
