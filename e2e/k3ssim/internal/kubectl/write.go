// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/objects"
)

// target resolves an object's resource and namespace (object namespace, else -n, else
// "default" for namespaced types).
func (k *kubectl) target(obj map[string]any) (resInfo, string, string) {
	md := objects.Meta(obj)
	ns := objects.Str(md, "namespace")
	r := k.resolveKind(objects.Str(obj, "apiVersion"), objects.Str(obj, "kind"), ns+k.in.flag("namespace"))
	if r.namespaced {
		if ns == "" {
			ns = k.namespace()
			md["namespace"] = ns
		}
	} else {
		ns = ""
	}
	return r, ns, objects.Str(md, "name")
}

// apply implements `kubectl apply -f`: create, or merge into the live object and update
// (retrying on 409 Conflict), printing created / configured / unchanged.
func (k *kubectl) apply() error {
	objs, err := k.readFiles()
	if err != nil {
		return err
	}
	var failed []string
	for _, no := range objs {
		r, ns, name := k.target(no.obj)
		msg, err := k.applyOne(r, ns, name, no.obj)
		if err != nil {
			failed = append(failed, serverErr(err, fmt.Sprintf("error when applying patch to %s %q: ", r.typeName(), name)).Error())
			continue
		}
		fmt.Fprintf(k.opts.Stdout, "%s/%s %s\n", r.typeName(), name, msg)
	}
	if len(failed) > 0 {
		return failf("%s", strings.Join(failed, "\n"))
	}
	return nil
}

func (k *kubectl) applyOne(r resInfo, ns, name string, obj map[string]any) (string, error) {
	for attempt := 0; ; attempt++ {
		cur, err := k.do("GET", r.path(ns, name), "", nil)
		if isNotFound(err) {
			objects.SetLastApplied(obj, obj)
			body, _ := json.Marshal(obj)
			if _, err := k.do("POST", r.path(ns, ""), "application/json", body); err != nil {
				return "", err
			}
			return "created", nil
		}
		if err != nil {
			return "", err
		}
		var existing map[string]any
		if err := json.Unmarshal(cur, &existing); err != nil {
			return "", err
		}
		merged, changed := objects.MergeApplied(existing, obj)
		if !changed {
			return "unchanged", nil
		}
		body, _ := json.Marshal(merged)
		_, err = k.do("PUT", r.path(ns, name), "application/json", body)
		if isConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return "", err
		}
		return "configured", nil
	}
}

// create implements `kubectl create -f`.
func (k *kubectl) create() error {
	if len(k.in.pos) >= 2 && (k.in.pos[0] == "namespace" || k.in.pos[0] == "ns") {
		body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": k.in.pos[1]}})
		if _, err := k.do("POST", "/api/v1/namespaces", "application/json", body); err != nil {
			return serverErr(err, "")
		}
		fmt.Fprintf(k.opts.Stdout, "namespace/%s created\n", k.in.pos[1])
		return nil
	}
	return k.writeEach("POST", "creating", "created")
}

// replace implements `kubectl replace -f`: a full PUT carrying the object's
// resourceVersion, so a stale one fails with 409 Conflict (docs/failure-modes.md F5).
func (k *kubectl) replace() error {
	return k.writeEach("PUT", "replacing", "replaced")
}

// writeEach sends every object of the -f files with method (POST creates at the collection,
// PUT replaces the named object) and prints "TYPE/NAME done" per object, kubectl's way;
// failures are collected and returned together.
func (k *kubectl) writeEach(method, doing, done string) error {
	objs, err := k.readFiles()
	if err != nil {
		return err
	}
	var failed []string
	for _, no := range objs {
		r, ns, name := k.target(no.obj)
		body, _ := json.Marshal(no.obj)
		at := r.path(ns, name)
		if method == "POST" {
			at = r.path(ns, "")
		}
		if _, err := k.do(method, at, "application/json", body); err != nil {
			failed = append(failed, serverErr(err, fmt.Sprintf("error when %s %q: ", doing, no.source)).Error())
			continue
		}
		fmt.Fprintf(k.opts.Stdout, "%s/%s %s\n", r.typeName(), name, done)
	}
	if len(failed) > 0 {
		return failf("%s", strings.Join(failed, "\n"))
	}
	return nil
}

// delete implements `kubectl delete TYPE NAME...`, `TYPE/NAME` and `-f FILE`.
func (k *kubectl) delete() error {
	type item struct {
		r        resInfo
		ns, name string
	}
	var items []item
	if len(k.in.multi["filename"]) > 0 {
		objs, err := k.readFiles()
		if err != nil {
			return err
		}
		for _, no := range objs {
			r, ns, name := k.target(no.obj)
			items = append(items, item{r, ns, name})
		}
	} else {
		if len(k.in.pos) == 0 {
			return failf("error: You must provide one or more resources by argument or filename.")
		}
		if strings.Contains(k.in.pos[0], "/") {
			for _, a := range k.in.pos {
				typ, name, _ := strings.Cut(a, "/")
				r, err := k.resolve(typ)
				if err != nil {
					return err
				}
				items = append(items, item{r, k.namespace(), name})
			}
		} else {
			r, err := k.resolve(k.in.pos[0])
			if err != nil {
				return err
			}
			if len(k.in.pos) < 2 {
				return failf("error: resource(s) were provided, but no name was specified")
			}
			for _, n := range k.in.pos[1:] {
				items = append(items, item{r, k.namespace(), n})
			}
		}
	}
	var failed []string
	for _, it := range items {
		if _, err := k.do("DELETE", it.r.path(it.ns, it.name), "", nil); err != nil {
			if isNotFound(err) && k.in.bool("ignore-not-found") {
				continue
			}
			failed = append(failed, serverErr(err, "").Error())
			continue
		}
		fmt.Fprintf(k.opts.Stdout, "%s %q deleted\n", it.r.typeName(), it.name)
	}
	if len(failed) > 0 {
		return failf("%s", strings.Join(failed, "\n"))
	}
	return nil
}
