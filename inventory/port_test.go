// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"strings"
	"testing"
)

// TestParsePort: decimal 1–65535 only, at and beyond the bounds.
func TestParsePort(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "22": 22, "65535": 65535, " 2222 ": 2222} {
		if got, err := ParsePort(in); err != nil || got != want {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"0": "out of range", "65536": "out of range", "99999999999999999999": "out of range",
		"022": "leading zero", "-1": "not a whole number", "+22": "not a whole number",
		"22.5": "not a whole number", "0x16": "not a whole number", "": "not a whole number", "ssh": "not a whole number",
	} {
		if _, err := ParsePort(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParsePort(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

// TestRegistryHostPort: a registry host:port needs a valid port.
func TestRegistryHostPort(t *testing.T) {
	for in, want := range map[string]bool{"mirror.lan:5000": true, "mirror.lan": true, "[fd00::5]:5000": true,
		"mirror.lan:0": false, "mirror.lan:70000": false, "mirror.lan:": false, "mirror.lan:05000": false} {
		if got := registryHost(in); got != want {
			t.Errorf("registryHost(%q) = %v, want %v", in, got, want)
		}
	}
}
