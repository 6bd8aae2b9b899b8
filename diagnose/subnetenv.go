// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// SubnetEnv is flannel's /run/flannel/subnet.env (docs/k3s.md#flannel): keys in order
// FLANNEL_NETWORK, FLANNEL_SUBNET, optional FLANNEL_IPV6_NETWORK / FLANNEL_IPV6_SUBNET,
// FLANNEL_MTU, FLANNEL_IPMASQ.
type SubnetEnv struct {
	// Network is the cluster CIDR, e.g. 10.42.0.0/16.
	Network string
	// Subnet is the first address of the node's lease with its mask, e.g. 10.42.0.1/24.
	Subnet      string
	IPv6Network string
	IPv6Subnet  string
	// MTU in bytes (vxlan: 1450).
	MTU    int
	IPMasq bool
}

// ParseSubnetEnv parses subnet.env text (lines KEY=VALUE; also accepts the pairs separated by
// spaces, as the supervisor's probe prints them on one line). It requires FLANNEL_NETWORK,
// FLANNEL_SUBNET and FLANNEL_MTU and returns an error naming what is missing or malformed.
func ParseSubnetEnv(text string) (SubnetEnv, error) {
	var s SubnetEnv
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			return s, fmt.Errorf("subnet.env: %q is not KEY=VALUE", sc.Text())
		}
		seen[k] = true
		switch k {
		case "FLANNEL_NETWORK":
			s.Network = v
		case "FLANNEL_SUBNET":
			s.Subnet = v
		case "FLANNEL_IPV6_NETWORK":
			s.IPv6Network = v
		case "FLANNEL_IPV6_SUBNET":
			s.IPv6Subnet = v
		case "FLANNEL_MTU":
			m, err := strconv.Atoi(v)
			if err != nil || m <= 0 {
				return s, fmt.Errorf("subnet.env: FLANNEL_MTU %q is not a positive number", v)
			}
			s.MTU = m
		case "FLANNEL_IPMASQ":
			s.IPMasq = v == "true"
		}
	}
	for _, k := range []string{"FLANNEL_NETWORK", "FLANNEL_SUBNET", "FLANNEL_MTU"} {
		if !seen[k] {
			return s, fmt.Errorf("subnet.env: %s missing", k)
		}
	}
	return s, nil
}

// String is "network N, subnet S, MTU M".
func (s SubnetEnv) String() string {
	return fmt.Sprintf("network %s, subnet %s, MTU %d", s.Network, s.Subnet, s.MTU)
}
