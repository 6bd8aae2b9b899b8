// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// The nodes as a cluster: NotReady nodes, version skew, embedded etcd's members.

// checkNotReady: nodes whose Ready condition is not True, with the conditions' reasons.
func checkNotReady(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, n := range in.View.Nodes {
		var ready *corev1.NodeCondition
		var ev []finding.Evidence
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = &n.Status.Conditions[i]
			}
			if c.Type == corev1.NodeReady || c.Status == corev1.ConditionTrue {
				ev = append(ev, finding.Evidence{Text: fmt.Sprintf("condition %s=%s %s: %s (since %s)", c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339)), Source: nodeSrc(n.Name)})
			}
		}
		if ready != nil && ready.Status == corev1.ConditionTrue {
			continue
		}
		reason := "no Ready condition"
		if ready != nil {
			reason = fmt.Sprintf("Ready=%s (%s: %s)", ready.Status, ready.Reason, ready.Message)
		}
		out = append(out, finding.Finding{ID: checkid.NodeNotReady, Severity: finding.Error, Host: n.Name,
			Title:    "node " + n.Name + " is NotReady",
			Message:  "Node " + n.Name + " is not Ready: " + reason + ".",
			Evidence: ev,
			Fixes:    []string{"look at the node's K3s unit (`systemctl status k3s` or k3s-agent, `journalctl -u ...`) and its kubelet's conditions"}})
	}
	return out
}

// checkVersionSkew: nodes on different K3s releases (kubelet version), or a binary newer than
// what its node runs (upgraded but not restarted).
func checkVersionSkew(in *Input) []finding.Finding {
	var out []finding.Finding
	versions := map[string][]string{}
	for _, n := range in.View.Nodes {
		v := n.Status.NodeInfo.KubeletVersion
		if v != "" {
			versions[v] = append(versions[v], n.Name)
		}
	}
	if len(versions) > 1 {
		var parts []string
		var ev []finding.Evidence
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			sort.Strings(versions[v])
			parts = append(parts, v+": "+strings.Join(versions[v], ", "))
			ev = append(ev, finding.Evidence{Text: v + " on " + strings.Join(versions[v], ", "), Source: "kubectl get nodes (status.nodeInfo.kubeletVersion)"})
		}
		// The odd ones out: the nodes not on the newest release.
		newest := slices.MaxFunc(slices.Collect(maps.Keys(versions)), compareRelease)
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			if v == newest {
				continue
			}
			for _, n := range versions[v] {
				out = append(out, finding.Finding{ID: checkid.VersionSkew, Severity: finding.Warning, Host: n,
					Title:    fmt.Sprintf("%s runs %s, other nodes %s", n, v, newest),
					Message:  "The cluster's nodes run different K3s releases (" + strings.Join(parts, "; ") + "). Agents may lag servers during an upgrade, never lead them; finish the upgrade.",
					Evidence: ev,
					Fixes:    []string{"upgrade the lagging nodes (`k3strap upgrade -f FILE`, or the install script with INSTALL_K3S_VERSION=" + newest + ")"}})
			}
		}
	}
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		n := in.node(ne.Node)
		if ne.Facts == nil || n == nil || ne.Facts.K3s.BinaryVersion == "" {
			continue
		}
		if kv := n.Status.NodeInfo.KubeletVersion; kv != "" && kv != ne.Facts.K3s.BinaryVersion {
			out = append(out, finding.Finding{ID: checkid.VersionSkew, Severity: finding.Warning, Host: n.Name,
				Title:   fmt.Sprintf("the K3s binary on %s is %s but the node runs %s", n.Name, ne.Facts.K3s.BinaryVersion, kv),
				Message: "The binary was replaced but K3s was not restarted (or failed to start the new one).",
				Evidence: []finding.Evidence{{Text: ne.Facts.K3s.VersionLine(), Source: hostSrc(ne, "k3s --version")},
					{Text: "kubeletVersion " + kv, Source: nodeSrc(n.Name)}},
				Fixes: []string{"restart K3s on the node: `systemctl restart " + unitOf(ne) + "`"}})
		}
	}
	return out
}

func compareRelease(a, b string) int {
	ra, oka := k3s.ParseRelease(a)
	rb, okb := k3s.ParseRelease(b)
	if !oka || !okb {
		return strings.Compare(a, b)
	}
	return ra.Compare(rb)
}

// checkEtcd: embedded etcd members (servers with the etcd role) NotReady or missing, and
// whether quorum is lost or one failure away.
func checkEtcd(in *Input) []finding.Finding {
	var members, down, cps []string
	for _, n := range in.View.Nodes {
		if _, ok := n.Labels[k3s.LabelControlPlane]; ok {
			cps = append(cps, n.Name)
		}
		if n.Labels[k3s.LabelEtcd] != "true" {
			continue
		}
		members = append(members, n.Name)
		if !nodeReady(n) {
			down = append(down, n.Name)
		}
	}
	if len(members) == 0 {
		return nil
	}
	var out []finding.Finding
	ev := []finding.Evidence{{Text: fmt.Sprintf("etcd members (servers with %s=true): %s; NotReady: %s", k3s.LabelEtcd, strings.Join(members, ", "), orNone(strings.Join(down, ", "))), Source: "kubectl get nodes"}}
	n, up := len(members), len(members)-len(down)
	quorum := n/2 + 1
	switch {
	case up < quorum:
		out = append(out, finding.Finding{ID: checkid.EtcdQuorum, Severity: finding.Error, Title: fmt.Sprintf("etcd has lost quorum: %d of %d members up, %d needed", up, n, quorum),
			Message: "With fewer than a majority of etcd members the datastore refuses writes: the cluster cannot change.", Evidence: ev,
			Fixes: []string{"bring the down servers back; if they are gone for good, restore from a snapshot (`k3s server --cluster-reset`) on one server"}})
	case n > 1 && up-1 < quorum:
		out = append(out, finding.Finding{ID: checkid.EtcdQuorum, Severity: finding.Warning, Title: fmt.Sprintf("etcd quorum at risk: %d of %d members up; one more failure loses it", up, n),
			Message: "etcd needs a majority of its members; an even member count (or a member down) leaves no margin.", Evidence: ev,
			Fixes: []string{"bring down members back, and run an odd number of servers (3 or 5)"}})
	}
	for _, cp := range cps {
		if !slices.Contains(members, cp) {
			out = append(out, finding.Finding{ID: checkid.EtcdMemberMissing, Severity: finding.Warning, Host: cp,
				Title:    "server " + cp + " is not an etcd member",
				Message:  "The cluster uses embedded etcd but server " + cp + " carries no etcd role: it did not join etcd (or uses another datastore).",
				Evidence: ev, Fixes: []string{"look at `journalctl -u k3s` on " + cp + " for etcd join errors"}})
		}
	}
	return out
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
