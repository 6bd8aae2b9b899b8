// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"os"
	"testing"
)

func TestSubnetEnvMatchesFixture(t *testing.T) {
	want, err := os.ReadFile("../../../../testdata/real-k3s-v1.36.3/subnet.env")
	if err != nil {
		t.Fatalf("real K3s fixture: %v", err)
	}
	got, err := SubnetEnv("10.42.0.0/16", "10.42.0.0/24", "vxlan")
	if err != nil || got != string(want) {
		t.Fatalf("got %q want %q (%v)", got, want, err)
	}
	if got, _ := SubnetEnv("10.52.0.0/16", "10.52.3.0/24", "host-gw"); got != "FLANNEL_NETWORK=10.52.0.0/16\nFLANNEL_SUBNET=10.52.3.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n" {
		t.Fatalf("host-gw: %q", got)
	}
	if MTU("wireguard-native") != 1420 {
		t.Fatal("wireguard-native MTU")
	}
}
