// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/inventory"
)

// portSpec is one port K3s must be able to bind (docs/k3s.md#ports).
type portSpec struct {
	port  int
	proto string
	what  string
	// leftover is a fix hint for a port a stopped K3s leaves bound (the kernel's VXLAN and
	// WireGuard sockets live as long as flannel's interface).
	leftover string
	// applies reports whether h needs the port in cluster c.
	applies func(c *inventory.Cluster, h *inventory.Host) bool
}

func (p portSpec) id() string { return fmt.Sprintf("Port-%d", p.port) }

func servers(_ *inventory.Cluster, h *inventory.Host) bool { return h.Role == inventory.RoleServer }
func allHosts(*inventory.Cluster, *inventory.Host) bool    { return true }

// flannelBackend reports whether the cluster runs flannel (embedded or standalone) with one of
// the backends.
func flannelBackend(backends ...string) func(c *inventory.Cluster, h *inventory.Host) bool {
	return func(c *inventory.Cluster, _ *inventory.Host) bool {
		t, b := cniChoice(c)
		if t != inventory.CNIFlannel && t != inventory.CNIFlannelStandalone {
			return false
		}
		for _, want := range backends {
			if strings.EqualFold(b, want) {
				return true
			}
		}
		return false
	}
}

// calicoEncap reports whether the cluster runs Calico with one of the encapsulations.
func calicoEncap(encaps ...string) func(c *inventory.Cluster, h *inventory.Host) bool {
	return func(c *inventory.Cluster, _ *inventory.Host) bool {
		t, b := cniChoice(c)
		if t != inventory.CNICalico {
			return false
		}
		for _, want := range encaps {
			if strings.EqualFold(b, want) {
				return true
			}
		}
		return len(encaps) == 0
	}
}

// portSpecs lists the ports in check order: K3s's, flannel's, then Calico's (docs/cni.md:
// TCP 179 BGP with IPIP / None, UDP 4789 VXLAN, TCP 5473 Typha).
func portSpecs() []portSpec {
	wg := flannelBackend("wireguard-native", "wireguard")
	return []portSpec{
		{6443, "tcp", "the K3s API server and supervisor", "", servers},
		{10250, "tcp", "the kubelet", "", allHosts},
		{2379, "tcp", "embedded etcd (clients)", "", servers},
		{2380, "tcp", "embedded etcd (peers)", "", servers},
		{8472, "udp", "flannel VXLAN", "flannel.1", flannelBackend("vxlan")},
		{51820, "udp", "flannel wireguard-native (IPv4)", "flannel-wg", wg},
		{51821, "udp", "flannel wireguard-native (IPv6)", "flannel-wg-v6", func(c *inventory.Cluster, h *inventory.Host) bool {
			_, v6 := clusterFamilies(c)
			return v6 && wg(c, h)
		}},
		{179, "tcp", "Calico BGP", "", calicoEncap("IPIP", "IPIPCrossSubnet", "None")},
		{4789, "udp", "Calico VXLAN", "", calicoEncap("VXLAN", "VXLANCrossSubnet", "WireGuard")},
		{5473, "tcp", "Calico Typha", "", calicoEncap()},
	}
}

// k3sRunning reports whether a K3s service is running on the host: the ports it holds are not
// conflicts (a re-run reconciles that K3s).
func k3sRunning(f *facts.Host) bool {
	switch f.K3s.ServiceActive {
	case "active", "activating", "reloading":
		return f.K3s.Service != ""
	}
	return false
}

func (p portSpec) run(in *Input) []finding.Finding {
	return eachHost(in, func(_ int, h *inventory.Host, f *facts.Host) []finding.Finding {
		if !p.applies(in.Cluster, h) {
			return nil
		}
		var addrs []string
		for _, l := range f.Listening {
			if l.Proto == p.proto && l.Port == p.port {
				addrs = append(addrs, l.Addr)
			}
		}
		if len(addrs) == 0 || k3sRunning(f) {
			return nil
		}
		ss := "ss -ltnp"
		if p.proto == "udp" {
			ss = "ss -lunp"
		}
		why := ""
		if f.K3s.Installed() {
			why = fmt.Sprintf("; K3s is installed but its service is not running (%q), so something else holds it", f.K3s.ServiceActive)
		}
		fix := fmt.Sprintf("find the process with `%s 'sport = :%d'` and stop it or move it to another port", ss, p.port)
		if p.leftover != "" {
			fix += fmt.Sprintf("; a kernel socket without a process is usually the %s interface of an earlier flannel: ip link delete %s", p.leftover, p.leftover)
		}
		return []finding.Finding{errorf(h.Name, fix,
			"%s port %d (%s) is already in use (bound to %s)%s", strings.ToUpper(p.proto), p.port, p.what, strings.Join(addrs, ", "), why)}
	})
}
