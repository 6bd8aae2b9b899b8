// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

// TCP port bounds: ports are 16 bits and 0 is no port (RFC 793). The one rule for every port
// k3strap reads — inventory fields (the decoder's intFieldRanges), K3STRAP_SSH_PORT and
// --ssh-port, doctor --ssh host:port, registry host:port.
const (
	MinPort = 1
	MaxPort = 65535
)

// ParsePort reads a TCP port written as text: decimal digits without sign or leading zeros
// ("022" is refused: YAML 1.1 and C read it as octal 18), from MinPort to MaxPort.
//
// Errors say what is wrong and how to write it; they quote s (a port is no secret).
func ParsePort(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a whole number: write a TCP port from %d to %d in decimal digits", s, MinPort, MaxPort)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("port %q has a leading zero: write it without (e.g. %s)", s, strings.TrimLeft(s, "0"))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < MinPort || n > MaxPort {
		return 0, fmt.Errorf("port %s is out of range: write a TCP port from %d to %d", s, MinPort, MaxPort)
	}
	return n, nil
}
