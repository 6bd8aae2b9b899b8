// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package controllers

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/sched"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// packaged reports whether a pod belongs to one of K3s's packaged add-ons (they start fast).
func packaged(p *corev1.Pod) bool {
	if p.Namespace != "kube-system" {
		return false
	}
	_, name := owner(p)
	switch name {
	case "coredns", "local-path-provisioner", "metrics-server", "traefik":
		return true
	}
	return strings.HasPrefix(name, "svclb-")
}

func (c *Controller) startDelay(p *corev1.Pod) time.Duration {
	kind, _ := owner(p)
	switch {
	case kind == "Job":
		return c.cfg.Clock.D(jobStartDelay)
	case packaged(p):
		return c.cfg.Clock.D(addonStartDelay)
	}
	return c.deploymentDelay()
}

// pods is kube-scheduler plus the kubelets' pod status: bind pending pods to a node they fit
// (fewest pods first), report Unschedulable with the scheduler's message otherwise, start
// bound pods once their node's network exists, finish job pods, evict pods from nodes with
// an untolerated NoExecute taint and remove pods of deleted nodes.
func (c *Controller) pods(now time.Time) {
	nodes, err := store.ListTyped[corev1.Node](c.cfg.Store, store.Nodes, "")
	if err != nil {
		return
	}
	byName := map[string]*corev1.Node{}
	load := map[string]int{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	pods := c.listPods()
	for i := range pods {
		if pods[i].Spec.NodeName != "" {
			load[pods[i].Spec.NodeName]++
		}
	}
	live := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		live[string(p.UID)] = true
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			c.schedule(p, nodes, load)
			continue
		}
		n := byName[p.Spec.NodeName]
		if n == nil {
			c.deletePod(p) // pod GC: its node is gone
			continue
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed &&
			len(sched.UntoleratedNoExecute(n, p.Spec.Tolerations)) > 0 {
			c.deletePod(p) // taint manager eviction
			continue
		}
		if p.Labels[sucPlanLabel] != "" {
			continue // a pod of the SUC stand-in's jobs: suc.go runs it
		}
		switch p.Status.Phase {
		case corev1.PodPending, "":
			c.maybeStart(p, n, now)
		case corev1.PodRunning:
			if kind, _ := owner(p); kind == "Job" {
				c.maybeFinishJobPod(p, now)
			}
		}
	}
	for uid := range c.startable {
		if !live[uid] {
			delete(c.startable, uid)
		}
	}
	for uid := range c.running {
		if !live[uid] {
			delete(c.running, uid)
		}
	}
}

func (c *Controller) schedule(p *corev1.Pod, nodes []corev1.Node, load map[string]int) {
	fit, msg := sched.Filter(&p.Spec, nodes)
	if len(fit) == 0 {
		cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}
		if old := podCondition(p, corev1.PodScheduled); old != nil && old.Status == cond.Status && old.Message == cond.Message {
			return
		}
		c.mutatePod(p, func(x *corev1.Pod) {
			cond.LastTransitionTime = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
			x.Status.Phase = corev1.PodPending
			x.Status.Conditions = []corev1.PodCondition{cond}
		})
		return
	}
	best := fit[0]
	for _, n := range fit[1:] {
		if load[n.Name] < load[best.Name] {
			best = n
		}
	}
	load[best.Name]++
	c.mutatePod(p, func(x *corev1.Pod) {
		x.Spec.NodeName = best.Name
		x.Status.Phase = corev1.PodPending
		x.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().UTC().Truncate(time.Second))}}
	})
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func (c *Controller) mutatePod(p *corev1.Pod, fn func(*corev1.Pod)) {
	_, _ = store.MutateTyped(c.cfg.Store, store.Pods, p.Namespace, p.Name, func(x *corev1.Pod) bool {
		before := x.DeepCopy()
		fn(x)
		return !equality.Semantic.DeepEqual(before, x)
	})
}

func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func (c *Controller) maybeStart(p *corev1.Pod, n *corev1.Node, now time.Time) {
	ok := p.Spec.HostNetwork || (isReady(n) && c.networkReady(n) && n.Spec.PodCIDR != "") ||
		(isReady(n) && c.cfg.FlannelBackend == "none")
	uid := string(p.UID)
	t0 := metav1.NewTime(now.UTC().Truncate(time.Second))
	if !ok {
		delete(c.startable, uid)
		if podCondition(p, corev1.PodScheduled) != nil && len(p.Status.ContainerStatuses) == 0 {
			c.mutatePod(p, func(x *corev1.Pod) { x.Status = waitingStatus(x, n, t0) })
		}
		return
	}
	since, seen := c.startable[uid]
	if !seen {
		c.startable[uid] = now
		since = now
		if len(p.Status.ContainerStatuses) == 0 {
			c.mutatePod(p, func(x *corev1.Pod) { x.Status = waitingStatus(x, n, t0) })
		}
	}
	if !c.due(now, since.Add(c.startDelay(p))) {
		return
	}
	ip := nodeIP(n)
	if !p.Spec.HostNetwork {
		ip = podIP(n.Spec.PodCIDR, string(p.UID))
	}
	c.running[uid] = now
	c.mutatePod(p, func(x *corev1.Pod) {
		x.Status.Phase = corev1.PodRunning
		x.Status.HostIP, x.Status.HostIPs = nodeIP(n), []corev1.HostIP{{IP: nodeIP(n)}}
		x.Status.PodIP, x.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		x.Status.StartTime = &t0
		x.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		}
		x.Status.ContainerStatuses = nil
		for _, ct := range x.Spec.Containers {
			id, _ := pki.RandomHex(32)
			x.Status.ContainerStatuses = append(x.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: ct.Name, Image: ct.Image, ImageID: ct.Image, ContainerID: "containerd://" + id,
				Ready: true, Started: ptr(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}},
			})
		}
	})
}

func waitingStatus(x *corev1.Pod, n *corev1.Node, t metav1.Time) corev1.PodStatus {
	st := x.Status
	st.Phase = corev1.PodPending
	st.HostIP, st.HostIPs = nodeIP(n), []corev1.HostIP{{IP: nodeIP(n)}}
	st.StartTime = &t
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: t},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: t, Reason: "ContainersNotReady", Message: "containers with unready status: [" + containerNames(x) + "]"},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: t, Reason: "ContainersNotReady", Message: "containers with unready status: [" + containerNames(x) + "]"},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
	}
	st.ContainerStatuses = nil
	for _, ct := range x.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: ct.Name, Image: ct.Image,
			Started: ptr(false), State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	}
	return st
}

func containerNames(p *corev1.Pod) string {
	var n []string
	for _, c := range p.Spec.Containers {
		n = append(n, c.Name)
	}
	return strings.Join(n, " ")
}

// podIP picks a stable address in the node's PodCIDR (from .2 up, by pod uid).
func podIP(podCIDR, uid string) string {
	_, ipn, err := net.ParseCIDR(podCIDR)
	if err != nil || ipn.IP.To4() == nil {
		return ""
	}
	h := uint32(0)
	for _, b := range []byte(uid) {
		h = h*31 + uint32(b)
	}
	ones, bits := ipn.Mask.Size()
	size := uint32(1) << uint(bits-ones)
	off := 2 + h%(size-3)
	v := binary.BigEndian.Uint32(ipn.IP.To4()) + off
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip.String()
}

func (c *Controller) maybeFinishJobPod(p *corev1.Pod, now time.Time) {
	uid := string(p.UID)
	since, ok := c.running[uid]
	if !ok {
		c.running[uid] = now
		since = now
	}
	if !c.due(now, since.Add(c.deploymentDelay())) {
		return
	}
	fail, logText := c.jobPodOutcome(p)
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	_ = c.cfg.Store.SetAux(store.PodLogKey(p.Namespace, p.Name), logText)
	c.mutatePod(p, func(x *corev1.Pod) {
		phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
		if fail {
			phase, code, reason = corev1.PodFailed, 1, "Error"
		}
		x.Status.Phase = phase
		for i := range x.Status.Conditions {
			if x.Status.Conditions[i].Type == corev1.PodReady || x.Status.Conditions[i].Type == corev1.ContainersReady {
				x.Status.Conditions[i].Status = corev1.ConditionFalse
				x.Status.Conditions[i].Reason = "PodCompleted"
				x.Status.Conditions[i].LastTransitionTime = t
			}
		}
		for i := range x.Status.ContainerStatuses {
			cs := &x.Status.ContainerStatuses[i]
			started := metav1.Time{}
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.Ready, cs.Started = false, ptr(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason,
				StartedAt: started, FinishedAt: t, ContainerID: cs.ContainerID}}
		}
	})
}

// jobPodOutcome decides a job pod's result and log: HelmChart install jobs fail when the
// chart is listed in the failHelmCharts knob; other jobs succeed.
func (c *Controller) jobPodOutcome(p *corev1.Pod) (fail bool, log string) {
	_, job := owner(p)
	chart := p.Labels["helmcharts.helm.cattle.io/chart"]
	if chart == "" {
		return false, fmt.Sprintf("job %s completed (k3strap K3s simulator)\n", job)
	}
	return c.helmJobLog(p.Namespace, chart)
}
