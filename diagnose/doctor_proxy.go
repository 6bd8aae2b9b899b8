// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// checkInClusterProxied: a running K3s unit whose environment (whoever set it: unit
// Environment=, /etc/default/UNIT, /etc/sysconfig/UNIT, UNIT.service.env) sets an HTTP(S)
// proxy with a NO_PROXY that misses loopback, a node address, the cluster or service CIDR,
// .svc or the cluster domain sends that traffic to the proxy (k3s-io/k3s #194, #6195;
// docs/proxy.md). The required entries come from the cluster view (every node's addresses)
// and the servers' K3s settings (cluster-cidr, service-cidr, cluster-domain); the rule is
// k3s.InClusterProxied through facts.ProxyFacts.Judge, the one preflight's NoProxy uses.
// Evidence names the variables and where they are set, never a proxy password.
func checkInClusterProxied(in *Input) []finding.Finding {
	required := in.requiredNoProxy()
	var out []finding.Finding
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		if ne.Facts == nil || ne.Facts.Proxy == nil {
			continue
		}
		j := ne.Facts.Proxy.Judge(required)
		if j == nil {
			continue
		}
		name := nameOr(ne.Node, ne.Host)
		unit := "k3s"
		if ne.Facts != nil && ne.Facts.Unit != "" {
			unit = ne.Facts.Unit
		}
		f := finding.Finding{ID: checkid.InClusterProxied, Severity: finding.Error, Host: name,
			Title: fmt.Sprintf("%s on %s sends in-cluster traffic to its HTTP proxy", unit, name),
			Message: fmt.Sprintf("The %s unit's environment sets a proxy and a NO_PROXY (%s) that misses %s: K3s, its kubelet and containerd send requests for those addresses to the proxy, which times them out or answers for the wrong network.",
				unit, j.NoProxySource, strings.Join(j.Missing, ", ")),
			Fixes:    []string{j.Fix},
			Commands: []string{"sudo systemctl restart " + unit + "   # after editing the env file"},
		}
		for _, v := range j.Vars {
			f.Evidence = append(f.Evidence, finding.Evidence{Text: v, Source: ne.Host + ": the " + unit + " unit's environment"})
		}
		f.Evidence = append(f.Evidence, finding.Evidence{Text: "missing from NO_PROXY: " + strings.Join(j.Missing, ","), Source: "k3s.NoProxy over the cluster view"})
		out = append(out, f)
	}
	return out
}

// requiredNoProxy builds k3s.NoProxy's required entries from what doctor sees: every node's
// InternalIP in the view (the addresses nodes reach each other at), the servers' cluster-cidr,
// service-cidr and cluster-domain (K3s's defaults when unset).
func (in *Input) requiredNoProxy() []string {
	var np k3s.NoProxyInput
	for i := range in.View.Nodes {
		n := &in.View.Nodes[i]
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				np.NodeAddresses = append(np.NodeAddresses, a.Address)
			}
		}
		if !isServer(n) {
			continue
		}
		args := in.nodeArgs(n.Name)
		if v := splitList(args["cluster-cidr"]); len(v) > 0 {
			np.ClusterCIDRs = v
		}
		if v := splitList(args["service-cidr"]); len(v) > 0 {
			np.ServiceCIDRs = v
		}
		if v, ok := lastValue(args, "cluster-domain"); ok {
			np.ClusterDomain = v
		}
	}
	return k3s.NoProxy(np)
}
