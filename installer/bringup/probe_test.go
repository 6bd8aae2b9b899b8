// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package bringup

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/k3s"
)

// The parser reads probe.sh's lines as the real K3s gives them (the Node JSON, subnet.env and
// /readyz of the real captures), carries /readyz over ticks (the probe stops asking once it
// answered ok), tells a Node from kubectl's error, and ignores what it does not know.
func TestParser(t *testing.T) {
	node, err := json.Marshal(readNode(t, "node-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	readyz := strings.TrimSpace(string(readCapture(t, "readyz-default.txt")))
	subnet := subnetLine(t)
	tests := []struct {
		name  string
		lines []string
		check func(t *testing.T, o Observation)
	}{
		{"full tick of a server that is up", []string{
			"@service active 0", "@start 1795390505", "@subnet-mtime 1795390520", "@subnet " + subnet, "@readyz " + readyz, "@node " + string(node), "@end",
		}, func(t *testing.T, o Observation) {
			if o.Service != "active" || o.Restarts != 0 || o.Start != 1795390505 || o.SubnetMtime != 1795390520 || o.Readyz != "ok" || o.Quick {
				t.Errorf("%+v", o)
			}
			if o.Subnet == nil || o.Subnet.String() == "" || o.SubnetRaw != subnet {
				t.Errorf("subnet.env %v %q", o.Subnet, o.SubnetRaw)
			}
			if o.Node == nil || o.Node.Name != "vm" || o.Node.Spec.PodCIDR != "10.42.0.0/24" || o.NodeErr != "" {
				t.Errorf("node %+v err %q", o.Node, o.NodeErr)
			}
			if o.Taint(k3s.TaintUninitialized) != nil || o.Taint("dedicated") == nil {
				t.Error("the real node's taints")
			}
		}},
		{"the API refused", []string{
			"@service activating 2", "@start 1795390600", "@subnet-missing", "@readyz ", "@node The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?", "@end",
		}, func(t *testing.T, o Observation) {
			if o.Service != "activating" || o.Restarts != 2 || o.Readyz != "" || o.Node != nil || !strings.HasPrefix(o.NodeErr, "The connection to the server") || o.Subnet != nil {
				t.Errorf("%+v", o)
			}
		}},
		{"a node that is not JSON", []string{"@service active", "@node {not json", "@end"}, func(t *testing.T, o Observation) {
			if o.Node != nil || o.NodeErr != "{not json" || o.Restarts != 0 {
				t.Errorf("%+v", o)
			}
		}},
		{"garbage", []string{"", "@service", "@start yesterday", "@subnet-mtime -", "@subnet not=a subnet env", "hello", "@end"}, func(t *testing.T, o Observation) {
			if o.Service != "" || o.Start != 0 || o.SubnetMtime != 0 || o.Subnet != nil || o.SubnetRaw != "not=a subnet env" {
				t.Errorf("%+v", o)
			}
		}},
		{"quick tick", []string{"@quick", "@service active 0", "@subnet-mtime 1795390520", "@subnet " + subnet, "@end"}, func(t *testing.T, o Observation) {
			if !o.Quick || o.Subnet == nil || o.Node != nil {
				t.Errorf("%+v", o)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Parser
			var got []Observation
			for _, l := range tt.lines {
				if o, ok := p.Line(l); ok {
					got = append(got, o)
				}
			}
			if len(got) != 1 {
				t.Fatalf("%d observations", len(got))
			}
			tt.check(t, got[0])
		})
	}
}

// /readyz carries over ticks, nothing else does; Pending is the tick being assembled.
func TestParserCarriesReadyz(t *testing.T) {
	var p Parser
	for _, l := range []string{"@service active 0", "@readyz ok", "@subnet-mtime 5", "@node {}", "@end", "@service active 0"} {
		p.Line(l)
	}
	if o := p.Pending(); o.Readyz != "ok" || o.SubnetMtime != 0 || o.Node != nil || o.Service != "active" {
		t.Errorf("pending %+v", o)
	}
	o, ok := p.Line("@end")
	if !ok || o.Readyz != "ok" {
		t.Errorf("second tick %+v", o)
	}
	p.Line("@readyz ")
	if o, _ := p.Line("@end"); o.Readyz != "" {
		t.Errorf("readyz after the API refused: %q", o.Readyz)
	}
}
