// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/sched"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/simlog"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

const cidrAux = "ipam/nodeCIDRs"

// ExternalCCMActive reports when an external cloud controller was applied: any Deployment or
// DaemonSet in kube-system whose name contains "cloud-controller-manager" (e2e/k3ssim/README.md,
// "What it does"). It returns the first time one was seen (zero if none).
func (c *Controller) externalCCM(now time.Time) (time.Time, bool) {
	present := map[string]bool{}
	for _, gr := range []store.GR{store.Deployments, store.DaemonSets} {
		items, _ := c.cfg.Store.List(gr, "kube-system")
		for _, b := range items {
			name := metaName(b)
			if strings.Contains(name, "cloud-controller-manager") {
				key := gr.Resource + "/" + name
				present[key] = true
				if _, ok := c.extCCMSeen[key]; !ok {
					c.extCCMSeen[key] = now
				}
			}
		}
	}
	var first time.Time
	for k, t := range c.extCCMSeen {
		if !present[k] {
			delete(c.extCCMSeen, k)
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, !first.IsZero()
}

func (c *Controller) nodes(now time.Time) {
	nodes, err := store.ListTyped[corev1.Node](c.cfg.Store, store.Nodes, "")
	if err != nil {
		return
	}
	live := map[string]bool{}
	extAt, ext := c.externalCCM(now)
	for i := range nodes {
		n := &nodes[i]
		live[n.Name] = true
		if _, ok := c.nodeSeen[n.Name]; !ok {
			c.nodeSeen[n.Name] = now
		}
		seen := c.nodeSeen[n.Name]
		if hasTaint(n, sched.TaintUninitialized) {
			if _, ok := c.taintSeen[n.Name]; !ok {
				c.taintSeen[n.Name] = now
			}
		} else {
			delete(c.taintSeen, n.Name)
		}
		c.nodeLifecycle(n, now, seen, extAt, ext)
	}
	for name := range c.nodeSeen {
		if !live[name] {
			delete(c.nodeSeen, name)
			delete(c.taintSeen, name)
		}
	}
	c.releaseCIDRs(live)
}

func (c *Controller) nodeLifecycle(n *corev1.Node, now, seen, extAt time.Time, ext bool) {
	d := c.cfg.Clock.D
	// wrangler's node controller finalizer (node-events-default.jsonl, +1.2 s).
	if !contains(n.Finalizers, "wrangler.cattle.io/node") && c.due(now, seen.Add(d(finalizerAfter))) {
		c.mutateNode(n.Name, func(x *corev1.Node) bool {
			if contains(x.Finalizers, "wrangler.cattle.io/node") {
				return false
			}
			x.Finalizers = append(x.Finalizers, "wrangler.cattle.io/node")
			return true
		})
	}
	// Cloud controller: embedded (3.7 s after the taint is seen) or external (3 s after it
	// was applied). With the crdStall knob the taint stays until 70 s after start.
	if ts, tainted := c.taintSeen[n.Name]; tainted {
		stallOK := !c.cfg.Knobs.CRDStall || c.due(now, c.cfg.Clock.At(crdStallRelease))
		switch {
		case c.cfg.EmbeddedCCM && stallOK && c.due(now, ts.Add(d(ccmInitAfter))):
			c.cfg.Log.KlogText("node_controller.go:432", fmt.Sprintf("Initializing node %s with cloud provider", n.Name))
			c.mutateNode(n.Name, func(x *corev1.Node) bool {
				x.Spec.Taints = withoutTaint(x.Spec.Taints, sched.TaintUninitialized)
				if x.Spec.ProviderID == "" {
					x.Spec.ProviderID = "k3s://" + x.Name
				}
				if x.Labels == nil {
					x.Labels = map[string]string{}
				}
				x.Labels["beta.kubernetes.io/instance-type"] = "k3s"
				x.Labels["node.kubernetes.io/instance-type"] = "k3s"
				return true
			})
			c.cfg.Log.KlogText("node_controller.go:477", fmt.Sprintf("Successfully initialized node %s with cloud provider", n.Name))
			delete(c.taintSeen, n.Name)
		case !c.cfg.EmbeddedCCM && ext && stallOK && c.due(now, extAt.Add(d(externalCCMDelay))) && c.due(now, ts.Add(d(0.5))):
			c.mutateNode(n.Name, func(x *corev1.Node) bool {
				x.Spec.Taints = withoutTaint(x.Spec.Taints, sched.TaintUninitialized)
				if x.Spec.ProviderID == "" {
					x.Spec.ProviderID = "external://" + x.Name
				}
				return true
			})
			delete(c.taintSeen, n.Name)
		}
	}
	// kube-controller-manager: PodCIDR, then the not-ready taint (the node is Ready by then).
	if (c.cfg.AllocateNodeCIDRs && n.Spec.PodCIDR == "" || hasTaint(n, sched.TaintNotReady)) && c.due(now, seen.Add(d(ipamAfter))) {
		if c.cfg.AllocateNodeCIDRs && n.Spec.PodCIDR == "" {
			if cidr, err := c.allocateCIDR(n.Name); err == nil {
				c.cfg.Log.Klog("range_allocator.go:433", "Set node PodCIDR", "node", n.Name, "podCIDRs", simlog.Raw(fmt.Sprintf("[%q]", cidr)))
				c.mutateNode(n.Name, func(x *corev1.Node) bool {
					if x.Spec.PodCIDR != "" {
						return false
					}
					x.Spec.PodCIDR, x.Spec.PodCIDRs = cidr, []string{cidr}
					return true
				})
			} else {
				c.cfg.Log.Errorf("failed to allocate PodCIDR for node %s: %v", n.Name, err)
			}
		}
		if isReady(n) && hasTaint(n, sched.TaintNotReady) {
			c.mutateNode(n.Name, func(x *corev1.Node) bool {
				before := len(x.Spec.Taints)
				x.Spec.Taints = withoutTaint(x.Spec.Taints, sched.TaintNotReady)
				return len(x.Spec.Taints) != before
			})
		}
	}
	if n.Annotations["node.alpha.kubernetes.io/ttl"] == "" && c.due(now, seen.Add(d(ttlAfter))) {
		c.mutateNode(n.Name, func(x *corev1.Node) bool {
			if x.Annotations == nil {
				x.Annotations = map[string]string{}
			}
			if x.Annotations["node.alpha.kubernetes.io/ttl"] != "" {
				return false
			}
			x.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
			return true
		})
	}
	// Cordon: the node lifecycle controller mirrors spec.unschedulable as a taint.
	hasU := hasTaint(n, sched.TaintUnschedulable)
	if n.Spec.Unschedulable != hasU {
		c.mutateNode(n.Name, func(x *corev1.Node) bool {
			if x.Spec.Unschedulable == hasTaint(x, sched.TaintUnschedulable) {
				return false
			}
			if x.Spec.Unschedulable {
				x.Spec.Taints = append(x.Spec.Taints, corev1.Taint{Key: sched.TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: nil})
			} else {
				x.Spec.Taints = withoutTaint(x.Spec.Taints, sched.TaintUnschedulable)
			}
			return true
		})
	}
}

func (c *Controller) mutateNode(name string, fn func(*corev1.Node) bool) {
	_, _ = store.MutateTyped(c.cfg.Store, store.Nodes, "", name, func(x *corev1.Node) bool {
		before := x.DeepCopy()
		if !fn(x) {
			return false
		}
		return !equality.Semantic.DeepEqual(before, x)
	})
}

// allocateCIDR returns the node's /24 out of the cluster CIDR: the lowest index not held by
// another node, kept in the store so restarts and deletions behave like the range allocator.
func (c *Controller) allocateCIDR(node string) (string, error) {
	_, ipn, err := net.ParseCIDR(c.cfg.ClusterCIDR)
	if err != nil {
		return "", err
	}
	base := ipn.IP.To4()
	if base == nil {
		return "", fmt.Errorf("cluster-cidr %s is not IPv4", c.cfg.ClusterCIDR)
	}
	ones, _ := ipn.Mask.Size()
	if ones > 24 {
		return "", fmt.Errorf("cluster-cidr %s is smaller than a /24", c.cfg.ClusterCIDR)
	}
	max := 1 << (24 - ones)
	idx := map[string]int{}
	var cidr string
	err = c.cfg.Store.UpdateAux(cidrAux, &idx, func() error {
		if i, ok := idx[node]; ok {
			cidr = cidrAt(base, i)
			return nil
		}
		used := map[int]bool{}
		for _, i := range idx {
			used[i] = true
		}
		for i := 0; i < max; i++ {
			if !used[i] {
				idx[node] = i
				cidr = cidrAt(base, i)
				return nil
			}
		}
		return fmt.Errorf("no free /24 left in %s", c.cfg.ClusterCIDR)
	})
	return cidr, err
}

func cidrAt(base net.IP, i int) string {
	v := binary.BigEndian.Uint32(base) + uint32(i)<<8
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip.String() + "/24"
}

func (c *Controller) releaseCIDRs(live map[string]bool) {
	idx := map[string]int{}
	var stale []string
	if ok, _ := c.cfg.Store.GetAux(cidrAux, &idx); !ok {
		return
	}
	for n := range idx {
		if !live[n] {
			stale = append(stale, n)
		}
	}
	if len(stale) == 0 {
		return
	}
	sort.Strings(stale)
	_ = c.cfg.Store.UpdateAux(cidrAux, &idx, func() error {
		for _, n := range stale {
			delete(idx, n)
		}
		return nil
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func withoutTaint(ts []corev1.Taint, key string) []corev1.Taint {
	out := ts[:0:0]
	for _, t := range ts {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// networkReady: flannel has annotated the node (it does so when it writes subnet.env), or
// the cluster runs without flannel.
func (c *Controller) networkReady(n *corev1.Node) bool {
	return c.cfg.FlannelBackend == "none" || n.Annotations["flannel.alpha.coreos.com/backend-type"] != ""
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
