// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// `k3strap doctor` (docs/doctor.md): findings over a cluster that already runs, whoever
// installed it. Doctor gathers one facts.DoctorNode per node and one facts.ClusterView, and
// Findings judges them into finding.Finding values (the model preflight shares; Source
// "doctor"); this file holds the input and the ordering, doctor_*.go the checks, one file per
// family. Pure: no I/O, no inventory (the caller passes what the inventory says as plain
// values).

// NodeEvidence is what doctor gathered from one host.
type NodeEvidence struct {
	// Host is the SSH host (inventory name or the --ssh target); Node the Kubernetes node it
	// is ("" when no node matches).
	Host, Node string
	// Address is the address doctor reached the host at (inventory or --ssh address, or the
	// node's InternalIP for a discovered node).
	Address string
	// Err says why nothing could be gathered ("" when Facts is set).
	Err string
	// Facts is the parsed node script.
	Facts *facts.DoctorNode
	// ClockSkew is the host's clock minus the workstation's (round trip corrected).
	ClockSkew time.Duration
}

// Intent is what the inventory declares for one node (doctor -f).
type Intent struct {
	// Registered is false when the cluster has no node of that name.
	Registered bool
	// Missing are the declared taints and labels the node lacks (drift.Diff); Describe
	// one line per difference.
	MissingTaints []corev1.Taint
	Labels        map[string]string
	Describe      []string
}

// Input is everything Findings judges.
type Input struct {
	// Now is the time of the evidence.
	Now time.Time
	// Nodes are the hosts gathered, one each.
	Nodes []NodeEvidence
	// View is the cluster view; ViewHost where it was read ("" when no server answered).
	View     facts.ClusterView
	ViewHost string
	// Intent is the inventory's declaration per node name (nil without an inventory).
	Intent map[string]Intent
	// ExternalCloudController says an external cloud controller is declared (inventory).
	ExternalCloudController bool
	// CNIDaemonSets are "namespace/name" of DaemonSets that are the pod network (known CNIs;
	// the caller passes templates/cni's and the well-known ones).
	CNIDaemonSets []string
	// RancherVersion is the Rancher release found ("" when none); RancherFixed and
	// RancherKnown say whether it has the fix for rancher/rancher#49981 (preflight's rule).
	RancherVersion             string
	RancherFixed, RancherKnown bool
	// TaintGrace is how long the uninitialized taint may stay (default k3s.StallGrace); CertWarn how
	// close to expiry a certificate is reported (default 90 days); ClockSkewMax the tolerated
	// skew (default k3s.ClockSkewWarn, preflight's threshold).
	TaintGrace, CertWarn, ClockSkewMax time.Duration
}

func (in *Input) defaults() {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	if in.TaintGrace <= 0 {
		in.TaintGrace = k3s.StallGrace
	}
	if in.CertWarn <= 0 {
		in.CertWarn = 90 * 24 * time.Hour
	}
	if in.ClockSkewMax <= 0 {
		in.ClockSkewMax = k3s.ClockSkewWarn
	}
}

// check is one doctor check.
type check func(in *Input) []finding.Finding

// checks are run in this order; findings are then sorted by severity, node and ID.
var checks = []check{
	checkUnreachable, checkCrashLoop, checkF1, checkPodNetwork, checkCNIKernel, checkCNIToleration,
	checkPendingOnTaint, checkLostTaints, checkIntent, checkNotReady, checkCerts, checkVersionSkew,
	checkEtcd, checkClockSkew, checkDisk, checkImagePull, checkNetwork, checkInClusterProxied,
}

// Findings judges in and returns its findings, errors first (then warnings, infos; by node,
// then ID). None means healthy.
func Findings(in Input) []finding.Finding {
	in.defaults()
	var out []finding.Finding
	for _, c := range checks {
		out = append(out, c(&in)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Severity.Rank() != b.Severity.Rank() {
			return a.Severity.Rank() < b.Severity.Rank()
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.ID < b.ID
	})
	return finding.Stamp(out, finding.Doctor)
}

// node returns the Node object called name from the view (nil when absent).
func (in *Input) node(name string) *corev1.Node {
	for i := range in.View.Nodes {
		if in.View.Nodes[i].Name == name {
			return &in.View.Nodes[i]
		}
	}
	return nil
}

// evidenceOf returns the gathered evidence of node name (nil when not gathered).
func (in *Input) evidenceOf(name string) *NodeEvidence {
	for i := range in.Nodes {
		if in.Nodes[i].Node == name && in.Nodes[i].Facts != nil {
			return &in.Nodes[i]
		}
	}
	return nil
}

// label returns where a node's evidence came from: "node" for the SSH host, for sources.
func hostSrc(ne *NodeEvidence, what string) string { return ne.Host + ": " + what }

func nodeSrc(name string) string { return "kubectl get node " + name }

// configArgs merges the node's K3s config files in K3s's order.
func configArgs(f *facts.DoctorNode) map[string][]string {
	var docs []string
	for _, p := range f.ConfigPaths {
		docs = append(docs, f.ConfigFiles[p])
	}
	return MergeConfigFiles(docs)
}

// nodeArgs returns the node's effective K3s arguments: the k3s.io/node-args annotation, else
// its config files.
func (in *Input) nodeArgs(name string) map[string][]string {
	if a := NodeArgs(in.node(name)); a != nil {
		return a
	}
	if ne := in.evidenceOf(name); ne != nil {
		return configArgs(ne.Facts)
	}
	return nil
}

// flannelOn reports whether K3s's embedded flannel runs for the cluster (flannel-backend not
// "none" on a server).
func (in *Input) flannelOn() bool {
	for _, n := range in.View.Nodes {
		a := NodeArgs(&n)
		if a == nil {
			continue
		}
		if v, ok := lastValue(a, "flannel-backend"); ok {
			return v != "none"
		}
	}
	for _, ne := range in.Nodes {
		if ne.Facts != nil {
			if v, ok := lastValue(configArgs(ne.Facts), "flannel-backend"); ok {
				return v != "none"
			}
		}
	}
	return true
}

func unitOf(ne *NodeEvidence) string {
	if ne.Facts != nil && ne.Facts.Unit != "" {
		return ne.Facts.Unit
	}
	return "k3s"
}

// podsOn returns the pods bound to node.
func podsOn(pods []corev1.Pod, node string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// owner returns the pod's workload: "namespace/Kind/name" of its controller, the ReplicaSet's
// hash suffix removed for a Deployment's pods.
func owner(p corev1.Pod) (kind, name string) {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			if o.Kind == "ReplicaSet" {
				if i := strings.LastIndex(o.Name, "-"); i > 0 {
					return "Deployment", o.Name[:i]
				}
			}
			return o.Kind, o.Name
		}
	}
	return "Pod", p.Name
}

// podReason describes why a pod is not running: the waiting or terminated reason and message
// of its containers, or its conditions.
func podReason(p corev1.Pod) string {
	var parts []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, strings.TrimSpace(cs.Name+": "+cs.State.Waiting.Reason+" "+cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s: %s (exit %d) %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)))
		}
		if cs.RestartCount > 0 {
			parts = append(parts, fmt.Sprintf("%s restarted %d times", cs.Name, cs.RestartCount))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s=False %s: %s", c.Type, c.Reason, c.Message))
		}
	}
	if p.Status.Reason != "" || p.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(p.Status.Reason+" "+p.Status.Message))
	}
	return strings.Join(parts, "; ")
}

// podEvents returns the messages of the events about pod ns/name (Warning first, newest last).
// podEventsSince is podEvents without the events last seen at or before since (zero: all).
// Event times and file times have one-second resolution here: an event in the same second as
// since is taken as before it.
func (in *Input) podEventsSince(ns, name string, since time.Time) []string {
	var out []string
	for _, e := range in.View.Events {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == name &&
			(since.IsZero() || eventLastSeen(e).Truncate(time.Second).After(since)) {
			out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)))
		}
	}
	return out
}

// eventLastSeen is when an event last happened: its series' last observation, lastTimestamp,
// eventTime or firstTimestamp, whichever is set first in that order (zero when none is).
func eventLastSeen(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func (in *Input) podEvents(ns, name string) []string {
	var out []string
	for _, e := range in.View.Events {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == name {
			out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)))
		}
	}
	return out
}

func running(p corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready && cs.State.Running == nil {
			return false
		}
	}
	return true
}

func taintString(t corev1.Taint) string { return t.ToString() }

func ptrTrue(b *bool) bool { return b != nil && *b }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// fromDiagnosis turns a supervisor Diagnosis into a finding (its evidence lines get a source
// from their prefix).
func fromDiagnosis(d Diagnosis, sev finding.Severity, node string, ne *NodeEvidence) finding.Finding {
	f := finding.Finding{ID: d.ID, Severity: sev, Host: node, Title: d.Title, Message: d.Message, Fixes: d.Fixes}
	for _, e := range d.Evidence {
		src := nodeSrc(node)
		switch {
		case strings.HasPrefix(e, "journal"), strings.HasPrefix(e, "context: "), fatalRE.MatchString(e):
			if ne != nil {
				src = hostSrc(ne, "journalctl -u "+unitOf(ne))
			}
		case strings.HasPrefix(e, "Pending"), strings.HasPrefix(e, "cloud controller pods"), strings.HasPrefix(e, "no cloud controller"):
			src = "kubectl get pods -A"
		case strings.HasPrefix(e, "kubelet cloud-provider"), strings.HasPrefix(e, "K3s's embedded"):
			// The text says where the setting was read (Evidence.argsSource, a journal line).
			switch {
			case strings.Contains(e, "(journal: ") || strings.Contains(e, ", journal: "):
				if ne != nil {
					src = hostSrc(ne, "journalctl -u "+unitOf(ne))
				}
			case strings.Contains(e, "k3s.io/node-args"):
				src = "kubectl get node " + node + " (annotation k3s.io/node-args)"
			case ne != nil:
				src = hostSrc(ne, "/etc/rancher/k3s/config.yaml and config.yaml.d")
			}
		}
		f.Evidence = append(f.Evidence, finding.Evidence{Text: e, Source: src})
	}
	return f
}
