// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// checkServerCount: embedded etcd keeps quorum with a majority of servers, so an even number
// of servers tolerates no more failures than one fewer (2 servers: none) — a warning
// (docs/k3s.md#ha).
func checkServerCount(in *Input) []finding.Finding {
	servers := in.Cluster.Servers()
	n := len(servers)
	if n < 2 || n%2 == 1 {
		return nil
	}
	var out []finding.Finding
	for _, h := range servers {
		out = append(out, warnf(h.Name,
			fmt.Sprintf("use %d or %d servers (an odd number), or make the extra hosts agents", n-1, n+1),
			"the inventory has %d servers: embedded etcd needs a majority (%d) to work, so %d servers survive no more failures than %d",
			n, n/2+1, n, n-1))
	}
	return out
}

// checkCriticalConfig: before anything is installed, every server's critical settings
// (k3s.CriticalKeys, K3s's CriticalControlArgs; docs/k3s.md) are compared with the first
// server's, K3s's defaults applied to absent keys (k3s.CriticalMismatches); each differing
// value is shown per server.
func checkCriticalConfig(in *Input) []finding.Finding {
	servers := in.Cluster.Servers()
	if len(servers) < 2 {
		return nil
	}
	first := servers[0]
	want := in.Cluster.HostConfig(first).Values()
	var out []finding.Finding
	for _, h := range servers[1:] {
		var diffs []string
		for _, m := range k3s.CriticalMismatches(in.Cluster.HostConfig(h).Values(), want) {
			diffs = append(diffs, fmt.Sprintf("%s: %s here, %s on %s", m.Key, shownValue(m.A, m.DefaultA), shownValue(m.B, m.DefaultB), first.Name))
		}
		if len(diffs) > 0 {
			out = append(out, errorf(h.Name,
				"set these keys in spec.k3s.config (cluster-wide), not in a server's own k3s.config",
				"critical K3s settings differ from the first server's, so K3s would refuse the join (critical configuration value mismatch): %s",
				strings.Join(diffs, "; ")))
		}
	}
	return out
}

// shownValue quotes a critical value and marks K3s's default.
func shownValue(v string, def bool) string {
	if def {
		return fmt.Sprintf("%q (K3s's default)", v)
	}
	return fmt.Sprintf("%q", v)
}
