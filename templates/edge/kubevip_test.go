// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package edge

import (
	"strings"
	"testing"

	"github.com/k3strap/k3strap/inventory"
)

// TestKubeVIPFamilies: the VIP is held as a host address of its family, /32 or /128, and the
// address reaches kube-vip bare (no brackets).
func TestKubeVIPFamilies(t *testing.T) {
	for _, tc := range []struct{ vip, cidr string }{
		{"192.0.2.100", `{name: vip_cidr, value: "32"}`},
		{"fd00:123::100", `{name: vip_cidr, value: "128"}`},
	} {
		out, err := KubeVIP(&inventory.APIEndpoint{Address: tc.vip, KubeVIP: &inventory.KubeVIP{Interface: "eth0"}})
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		if !strings.Contains(s, tc.cidr) || !strings.Contains(s, tc.vip) || strings.Contains(s, "["+tc.vip) {
			t.Errorf("%s: want %s and the bare address in\n%s", tc.vip, tc.cidr, s)
		}
	}
}
