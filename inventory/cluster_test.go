// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import "testing"

// K3s's embedded flannel runs unless the first server's flannel-backend is none: set by hand,
// or by a CNI k3strap deploys (Calico, standalone flannel) or one the user brings (none).
func TestEmbeddedFlannel(t *testing.T) {
	tests := []struct {
		name    string
		cni     CNIType
		backend string
		want    bool
	}{
		{"default", CNIFlannel, "", true},
		{"wireguard-native", CNIFlannel, "wireguard-native", true},
		{"flannel-backend none by hand", CNIFlannel, "none", false},
		{"calico", CNICalico, "", false},
		{"standalone flannel", CNIFlannelStandalone, "", false},
		{"the user's CNI", CNINone, "", false},
	}
	for _, tt := range tests {
		c, err := Load("testdata/minimal.yaml", LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.CNI.Type = tt.cni
		c.Spec.K3s.Config.FlannelBackend = tt.backend
		if got := c.EmbeddedFlannel(); got != tt.want {
			t.Errorf("%s: EmbeddedFlannel() = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := (&Cluster{}).EmbeddedFlannel(); got {
		t.Error("no server: EmbeddedFlannel() = true")
	}
}
