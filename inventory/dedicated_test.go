// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"strings"
	"testing"
)

const dedicatedInv = `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata: {name: lab}
spec:
  k3s: {version: v1.36.3+k3s1}
  hosts:
    - {name: cp1, address: 10.0.0.1, role: server}
    - {name: etcd1, address: 10.0.0.2, role: server, dedicated: etcd}
    - {name: api1, address: 10.0.0.3, role: server, dedicated: control-plane}
`

func TestDedicatedRendered(t *testing.T) {
	c, err := Parse("lab.yaml", []byte(dedicatedInv), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := c.HostConfig(c.Host("etcd1")).Extra
	if e["disable-apiserver"] != true || e["disable-controller-manager"] != true || e["disable-scheduler"] != true || e["disable-etcd"] != nil {
		t.Errorf("etcd-only: %v", e)
	}
	a := c.HostConfig(c.Host("api1")).Extra
	if a["disable-etcd"] != true || a["disable-apiserver"] != nil {
		t.Errorf("control-plane-only: %v", a)
	}
	if !c.Host("etcd1").EtcdMember() || c.Host("api1").EtcdMember() || !c.Host("cp1").EtcdMember() {
		t.Error("EtcdMember")
	}
}

func TestDedicatedRefused(t *testing.T) {
	bad := strings.Replace(dedicatedInv, "{name: cp1, address: 10.0.0.1, role: server}", "{name: cp1, address: 10.0.0.1, role: server, dedicated: control-plane}", 1)
	bad += "    - {name: a1, address: 10.0.0.4, role: agent, dedicated: etcd}\n    - {name: x1, address: 10.0.0.5, role: server, dedicated: worker}\n"
	_, err := Parse("lab.yaml", []byte(bad), LoadOptions{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"the first server cannot be dedicated", "only a server can have a dedicated role", `unknown dedicated role "worker"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
