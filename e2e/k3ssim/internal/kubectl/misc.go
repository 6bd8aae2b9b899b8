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
	"k8s.io/apimachinery/pkg/version"
)

// logs implements `kubectl logs [-n NS] POD|pod/NAME|job/NAME|deployment/NAME [--tail N]`.
func (k *kubectl) logs() error {
	if len(k.in.pos) == 0 {
		return failf("error: expected 'logs [-f] [-p] (POD | TYPE/NAME) [-c CONTAINER]'.")
	}
	ns := k.namespace()
	arg := k.in.pos[0]
	pod := arg
	if typ, name, ok := strings.Cut(arg, "/"); ok {
		r, err := k.resolve(typ)
		if err != nil {
			return err
		}
		switch r.plural {
		case "pods":
			pod = name
		case "jobs", "deployments", "daemonsets", "replicasets", "statefulsets":
			if _, err := k.do("GET", r.path(ns, name), "", nil); err != nil {
				return serverErr(err, "")
			}
			p, err := k.podOf(ns, r.kind, name)
			if err != nil {
				return err
			}
			pod = p
		default:
			return failf("error: cannot get the logs from %s", r.typeName())
		}
	}
	path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log", url.PathEscape(ns), url.PathEscape(pod))
	if t := k.in.flag("tail"); t != "" && t != "-1" {
		path += "?tailLines=" + url.QueryEscape(t)
	}
	data, err := k.do("GET", path, "", nil)
	if err != nil {
		return serverErr(err, "")
	}
	_, _ = k.opts.Stdout.Write(data)
	return nil
}

// podOf finds a pod owned by the workload (jobs: the newest pod with job-name=NAME).
func (k *kubectl) podOf(ns, kind, name string) (string, error) {
	data, err := k.do("GET", fmt.Sprintf("/api/v1/namespaces/%s/pods", url.PathEscape(ns)), "", nil)
	if err != nil {
		return "", serverErr(err, "")
	}
	var list corev1.PodList
	if err := json.Unmarshal(data, &list); err != nil {
		return "", err
	}
	best := ""
	for _, p := range list.Items {
		match := false
		switch kind {
		case "Job":
			match = p.Labels["job-name"] == name
		default:
			for _, o := range p.OwnerReferences {
				if o.Name == name || (o.Kind == "ReplicaSet" && strings.HasPrefix(o.Name, name+"-")) {
					match = true
				}
			}
		}
		if match {
			best = p.Name
		}
	}
	if best == "" {
		return "", failf("error: timed out waiting for the condition")
	}
	return best, nil
}

// wait implements `kubectl wait --for=condition=C[=V]|delete TYPE/NAME [--timeout=D]`.
func (k *kubectl) wait() error {
	forArg := k.in.flag("for")
	if forArg == "" || len(k.in.pos) == 0 {
		return failf("error: --for must be specified")
	}
	timeout := 30 * time.Second
	if d, err := time.ParseDuration(k.in.flag("timeout")); err == nil {
		timeout = d
	}
	var targets [][2]string
	for _, a := range k.in.pos {
		typ, name, ok := strings.Cut(a, "/")
		if !ok && len(k.in.pos) == 2 {
			targets = append(targets, [2]string{k.in.pos[0], k.in.pos[1]})
			break
		}
		targets = append(targets, [2]string{typ, name})
	}
	for _, t := range targets {
		r, err := k.resolve(t[0])
		if err != nil {
			return err
		}
		ns := ""
		if r.namespaced {
			ns = k.namespace()
		}
		deadline := time.Now().Add(timeout)
		for {
			data, err := k.do("GET", r.path(ns, t[1]), "", nil)
			done := false
			switch {
			case forArg == "delete":
				done = isNotFound(err)
			case err != nil && !isNotFound(err):
				return serverErr(err, "")
			case err == nil && strings.HasPrefix(forArg, "condition="):
				cond, want, ok := strings.Cut(strings.TrimPrefix(forArg, "condition="), "=")
				if !ok {
					want = "True"
				}
				var o map[string]any
				_ = json.Unmarshal(data, &o)
				conds, _ := get(o, "status", "conditions").([]any)
				for _, c := range conds {
					if strings.EqualFold(gs(c, "type"), cond) && strings.EqualFold(gs(c, "status"), want) {
						done = true
					}
				}
			}
			if done {
				verb := "condition met"
				if forArg == "delete" {
					verb = "deleted"
				}
				fmt.Fprintf(k.opts.Stdout, "%s/%s %s\n", r.typeName(), t[1], verb)
				break
			}
			if time.Now().After(deadline) {
				return failf("error: timed out waiting for the condition on %s/%s", r.plural, t[1])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// rollout implements `kubectl rollout status deployment/NAME|daemonset/NAME`.
func (k *kubectl) rollout() error {
	if len(k.in.pos) < 2 || k.in.pos[0] != "status" {
		return failf("error: only 'rollout status' is supported by the simulator")
	}
	typ, name, ok := strings.Cut(k.in.pos[1], "/")
	if !ok && len(k.in.pos) > 2 {
		typ, name = k.in.pos[1], k.in.pos[2]
	}
	r, err := k.resolve(typ)
	if err != nil {
		return err
	}
	timeout := 10 * time.Minute
	if d, err := time.ParseDuration(k.in.flag("timeout")); err == nil && d > 0 {
		timeout = d
	}
	deadline := time.Now().Add(timeout)
	for {
		data, err := k.do("GET", r.path(k.namespace(), name), "", nil)
		if err != nil {
			return serverErr(err, "")
		}
		var o map[string]any
		_ = json.Unmarshal(data, &o)
		switch r.plural {
		case "deployments":
			if gi(o, "status", "availableReplicas") >= specReplicas(o) && gi(o, "status", "updatedReplicas") >= specReplicas(o) {
				fmt.Fprintf(k.opts.Stdout, "deployment %q successfully rolled out\n", name)
				return nil
			}
		case "daemonsets":
			if gi(o, "status", "numberAvailable") >= gi(o, "status", "desiredNumberScheduled") && gi(o, "status", "observedGeneration") > 0 {
				fmt.Fprintf(k.opts.Stdout, "daemon set %q successfully rolled out\n", name)
				return nil
			}
		default:
			return failf("error: no status viewer has been implemented for %s", r.kind)
		}
		if time.Now().After(deadline) {
			return failf("error: timed out waiting for the condition")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// version implements `kubectl version`.
func (k *kubectl) version() error {
	data, err := k.do("GET", "/version", "", nil)
	fmt.Fprintf(k.opts.Stdout, "Client Version: %s\nKustomize Version: v5.7.1\n", k.opts.Version)
	if err != nil {
		return serverErr(err, "")
	}
	var v version.Info
	_ = json.Unmarshal(data, &v)
	fmt.Fprintf(k.opts.Stdout, "Server Version: %s\n", v.GitVersion)
	return nil
}
