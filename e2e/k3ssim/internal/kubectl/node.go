// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func (k *kubectl) getNode(name string) (*corev1.Node, error) {
	data, err := k.do("GET", "/api/v1/nodes/"+url.PathEscape(name), "", nil)
	if err != nil {
		return nil, serverErr(err, "")
	}
	n := &corev1.Node{}
	return n, json.Unmarshal(data, n)
}

func (k *kubectl) patch(r resInfo, ns, name string, patch any) error {
	body, _ := json.Marshal(patch)
	_, err := k.do("PATCH", r.path(ns, name), "application/merge-patch+json", body)
	return serverErr(err, "")
}

var nodeRes = resInfo{version: "v1", plural: "nodes", singular: "node", kind: "Node"}

// taint implements `kubectl taint nodes NAME key[=value]:Effect | key[:Effect]-`. Like
// kubectl it sends the whole new taint list as a patch without resourceVersion.
func (k *kubectl) taint() error {
	if len(k.in.pos) < 3 {
		return failf("error: at least one taint update is required")
	}
	if r, err := k.resolve(k.in.pos[0]); err != nil || r.plural != "nodes" {
		return failf("error: invalid resource type %s, only node types are supported", k.in.pos[0])
	}
	name := k.in.pos[1]
	n, err := k.getNode(name)
	if err != nil {
		return err
	}
	taints := append([]corev1.Taint{}, n.Spec.Taints...)
	removed, added := false, false
	for _, spec := range k.in.pos[2:] {
		if strings.HasSuffix(spec, "-") {
			key, eff, _ := strings.Cut(strings.TrimSuffix(spec, "-"), ":")
			var keep []corev1.Taint
			found := false
			for _, t := range taints {
				if t.Key == key && (eff == "" || string(t.Effect) == eff) {
					found = true
					continue
				}
				keep = append(keep, t)
			}
			if !found {
				return failf("error: taint %q not found", strings.TrimSuffix(spec, "-"))
			}
			taints, removed = keep, true
			continue
		}
		kv, eff, ok := strings.Cut(spec, ":")
		if !ok || (eff != "NoSchedule" && eff != "PreferNoSchedule" && eff != "NoExecute") {
			return failf("error: invalid taint spec: %s, unsupported taint effect", spec)
		}
		key, val, _ := strings.Cut(kv, "=")
		nt := corev1.Taint{Key: key, Value: val, Effect: corev1.TaintEffect(eff)}
		replaced := false
		for i, t := range taints {
			if t.Key == key && t.Effect == nt.Effect {
				if !k.in.bool("overwrite") {
					return failf("error: node %s already has %s taint(s) with same effect(s) and --overwrite is false", name, key)
				}
				taints[i], replaced = nt, true
			}
		}
		if !replaced {
			taints = append(taints, nt)
		}
		added = true
	}
	if taints == nil {
		taints = []corev1.Taint{}
	}
	if err := k.patch(nodeRes, "", name, map[string]any{"spec": map[string]any{"taints": taints}}); err != nil {
		return err
	}
	verb := "tainted"
	if removed && !added {
		verb = "untainted"
	}
	fmt.Fprintf(k.opts.Stdout, "node/%s %s\n", name, verb)
	return nil
}

// labelOrAnnotate implements `kubectl label|annotate TYPE NAME k=v k2-` (--overwrite).
func (k *kubectl) labelOrAnnotate(field, did, undid string) error {
	args := k.in.pos
	if len(args) < 2 {
		return failf("error: one or more resources must be specified as <resource> <name> or <resource>/<name>")
	}
	var typ, name string
	var changes []string
	if t, n, ok := strings.Cut(args[0], "/"); ok {
		typ, name, changes = t, n, args[1:]
	} else {
		if len(args) < 3 {
			return failf("error: at least one %s update is required", strings.TrimSuffix(field, "s"))
		}
		typ, name, changes = args[0], args[1], args[2:]
	}
	r, err := k.resolve(typ)
	if err != nil {
		return err
	}
	ns := ""
	if r.namespaced {
		ns = k.namespace()
	}
	data, err := k.do("GET", r.path(ns, name), "", nil)
	if err != nil {
		return serverErr(err, "")
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	cur, _ := get(obj, "metadata", field).(map[string]any)
	patch := map[string]any{}
	onlyRemovals := true
	for _, c := range changes {
		if key, ok := strings.CutSuffix(c, "-"); ok && !strings.Contains(c, "=") {
			patch[key] = nil
			continue
		}
		key, val, ok := strings.Cut(c, "=")
		if !ok {
			return failf("error: invalid %s format: %s", strings.TrimSuffix(field, "s"), c)
		}
		if old, exists := cur[key]; exists && old != val && !k.in.bool("overwrite") {
			return failf("error: '%s' already has a value (%v), and --overwrite is false", key, old)
		}
		patch[key] = val
		onlyRemovals = false
	}
	if err := k.patch(r, ns, name, map[string]any{"metadata": map[string]any{field: patch}}); err != nil {
		return err
	}
	verb := did
	if onlyRemovals {
		verb = undid
	}
	fmt.Fprintf(k.opts.Stdout, "%s/%s %s\n", r.typeName(), name, verb)
	return nil
}

// cordon implements `kubectl cordon|uncordon NAME`.
func (k *kubectl) cordon(on bool) error {
	if len(k.in.pos) == 0 {
		return failf("error: USAGE: cordon NODE [flags]")
	}
	for _, name := range k.in.pos {
		if err := k.setUnschedulable(name, on); err != nil {
			return err
		}
	}
	return nil
}

func (k *kubectl) setUnschedulable(name string, on bool) error {
	n, err := k.getNode(name)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "cordoned", false: "uncordoned"}[on]
	if n.Spec.Unschedulable == on {
		fmt.Fprintf(k.opts.Stdout, "node/%s already %s\n", name, verb)
		return nil
	}
	var v any = true
	if !on {
		v = nil
	}
	if err := k.patch(nodeRes, "", name, map[string]any{"spec": map[string]any{"unschedulable": v}}); err != nil {
		return err
	}
	fmt.Fprintf(k.opts.Stdout, "node/%s %s\n", name, verb)
	return nil
}

// drain implements `kubectl drain NAME [--ignore-daemonsets] [--delete-emptydir-data]
// [--force] [--timeout=D]`: cordon, evict every pod on the node, wait for them to go.
func (k *kubectl) drain() error {
	if len(k.in.pos) != 1 {
		return failf("error: USAGE: drain NODE [flags]")
	}
	name := k.in.pos[0]
	if err := k.setUnschedulable(name, true); err != nil {
		return err
	}
	data, err := k.do("GET", "/api/v1/pods?fieldSelector="+url.QueryEscape("spec.nodeName="+name), "", nil)
	if err != nil {
		return serverErr(err, "")
	}
	var list corev1.PodList
	if err := json.Unmarshal(data, &list); err != nil {
		return err
	}
	var evict []corev1.Pod
	var ignored, problems []string
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			evict = append(evict, p)
			continue
		}
		ctrl := ""
		for _, o := range p.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				ctrl = o.Kind
			}
		}
		if ctrl == "DaemonSet" {
			if !k.in.bool("ignore-daemonsets") {
				problems = append(problems, fmt.Sprintf("cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): %s/%s", p.Namespace, p.Name))
				continue
			}
			ignored = append(ignored, p.Namespace+"/"+p.Name)
			continue
		}
		if ctrl == "" && !k.in.bool("force") {
			problems = append(problems, fmt.Sprintf("cannot delete Pods that declare no controller (use --force to override): %s/%s", p.Namespace, p.Name))
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil && !k.in.bool("delete-emptydir-data") {
				problems = append(problems, fmt.Sprintf("cannot delete Pods with local storage (use --delete-emptydir-data to override): %s/%s", p.Namespace, p.Name))
			}
		}
		evict = append(evict, p)
	}
	if len(problems) > 0 {
		return failf("error: unable to drain node %q due to error: %s, continuing command...\nThere are pending nodes to be drained:\n %s\nerror: %s",
			name, strings.Join(problems, ", "), name, strings.Join(problems, ", "))
	}
	if len(ignored) > 0 {
		fmt.Fprintf(k.opts.Stderr, "Warning: ignoring DaemonSet-managed Pods: %s\n", strings.Join(ignored, ", "))
	}
	timeout := 0 * time.Second
	if d, err := time.ParseDuration(k.in.flag("timeout")); err == nil {
		timeout = d
	}
	deadline := time.Now().Add(timeout)
	for _, p := range evict {
		fmt.Fprintf(k.opts.Stdout, "evicting pod %s/%s\n", p.Namespace, p.Name)
		body, _ := json.Marshal(map[string]any{"apiVersion": "policy/v1", "kind": "Eviction",
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace}})
		if _, err := k.do("POST", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/eviction", p.Namespace, p.Name), "application/json", body); err != nil && !isNotFound(err) {
			return serverErr(err, "")
		}
	}
	for _, p := range evict {
		for {
			data, err := k.do("GET", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", p.Namespace, p.Name), "", nil)
			if isNotFound(err) {
				break
			}
			if err != nil {
				return serverErr(err, "")
			}
			var cur corev1.Pod
			if json.Unmarshal(data, &cur) == nil && cur.UID != p.UID {
				break
			}
			if timeout > 0 && time.Now().After(deadline) {
				return failf("error: unable to drain node %q due to error: global timeout reached: %s, continuing command...", name, timeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Fprintf(k.opts.Stdout, "pod/%s evicted\n", p.Name)
	}
	fmt.Fprintf(k.opts.Stdout, "node/%s drained\n", name)
	return nil
}
