// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// GetNode returns the Node named name; a missing one is an error for which
// apierrors.IsNotFound holds.
func (a *API) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	n, err := a.Typed.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, a.wrap("get node "+name, err)
	}
	return n, nil
}

// ListNodes returns every Node.
func (a *API) ListNodes(ctx context.Context) ([]corev1.Node, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	l, err := a.Typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, a.wrap("list nodes", err)
	}
	return l.Items, nil
}

// ReplaceNode writes n back (PUT). n must carry the metadata.resourceVersion it was read
// with: a concurrent change makes the API answer 409 and apierrors.IsConflict holds for the
// error (docs/failure-modes.md F5: read-modify-write, never a bare list patch).
func (a *API) ReplaceNode(ctx context.Context, n *corev1.Node) error {
	if n.ResourceVersion == "" {
		return fmt.Errorf("refusing to replace node %s without metadata.resourceVersion", n.Name)
	}
	ctx, cancel := call(ctx)
	defer cancel()
	_, err := a.Typed.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: FieldManager})
	return a.wrap("update node "+n.Name, err)
}

// DeleteNode deletes the Node named name (one already gone is no error) and waits at most
// timeout for it to go. A server's Node of an embedded-etcd cluster carries K3s's finalizer
// wrangler.cattle.io/managed-etcd-controller: it goes once K3s has removed the server's etcd
// member (docs/day2.md), so the wait is bounded.
func (a *API) DeleteNode(ctx context.Context, name string, timeout time.Duration) error {
	dctx, cancel := call(ctx)
	err := a.Typed.CoreV1().Nodes().Delete(dctx, name, metav1.DeleteOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return a.wrap("delete node "+name, err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		_, last = a.Typed.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why := "it is still there (a finalizer holds it)"
		if last != nil {
			why = last.Error()
		}
		return fmt.Errorf("%s: node %s not gone %s after its deletion: %s", a.host, name, timeout, why)
	}
	return nil
}

// DeleteSecret deletes the Secret ns/name; one already gone is no error.
func (a *API) DeleteSecret(ctx context.Context, ns, name string) error {
	ctx, cancel := call(ctx)
	defer cancel()
	err := a.Typed.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return a.wrap("delete secret "+ns+"/"+name, err)
}

// ListPods returns the pods of namespace ns ("" = all namespaces), of node when node is not
// "" (field selector spec.nodeName).
func (a *API) ListPods(ctx context.Context, ns, node string) ([]corev1.Pod, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	opts := metav1.ListOptions{}
	if node != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}
	l, err := a.Typed.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, a.wrap("list pods", err)
	}
	return l.Items, nil
}

// ListPDBs returns every PodDisruptionBudget.
func (a *API) ListPDBs(ctx context.Context) ([]policyv1.PodDisruptionBudget, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	l, err := a.Typed.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, a.wrap("list poddisruptionbudgets", err)
	}
	return l.Items, nil
}

// GetDeployment returns the Deployment ns/name.
func (a *API) GetDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	d, err := a.Typed.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	return d, a.wrap("get deployment "+ns+"/"+name, err)
}

// GetDaemonSet returns the DaemonSet ns/name.
func (a *API) GetDaemonSet(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	d, err := a.Typed.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	return d, a.wrap("get daemonset "+ns+"/"+name, err)
}

// GetJob returns the Job ns/name.
func (a *API) GetJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	j, err := a.Typed.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	return j, a.wrap("get job "+ns+"/"+name, err)
}

// Logs returns the last tail lines of a pod's log (its first container): target is a pod
// name, or "job/NAME" or "deployment/NAME" for the newest pod of that workload (as
// `kubectl logs job/NAME` picks one). tail <= 0 means 20 lines.
func (a *API) Logs(ctx context.Context, ns, target string, tail int) (string, error) {
	if tail <= 0 {
		tail = 20
	}
	ctx, cancel := call(ctx)
	defer cancel()
	pod := target
	if kind, name, ok := strings.Cut(target, "/"); ok {
		var sel labels.Selector
		switch kind {
		case "job":
			sel = labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: name})
		case "deployment":
			d, err := a.Typed.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", a.wrap("logs "+target, err)
			}
			if sel, err = metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil {
				return "", a.wrap("logs "+target, err)
			}
		default:
			return "", fmt.Errorf("%s: logs %s: only job/NAME, deployment/NAME or a pod name", a.host, target)
		}
		l, err := a.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return "", a.wrap("logs "+target, err)
		}
		if len(l.Items) == 0 {
			return "", a.wrap("logs "+target, apierrors.NewNotFound(corev1.Resource("pods"), target))
		}
		sort.Slice(l.Items, func(i, j int) bool {
			return l.Items[j].CreationTimestamp.Before(&l.Items[i].CreationTimestamp)
		})
		pod = l.Items[0].Name
	}
	lines := int64(tail)
	b, err := a.Typed.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		return "", a.wrap("logs "+ns+"/"+pod, err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// mapping returns the resource of gvk, reading the API's discovery again once when it does
// not know the kind (a CRD created a moment ago).
func (a *API) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// Apply creates or updates every object of manifest (YAML or JSON, several documents, kind
// List expanded), in order, and returns one line per object, "resource/name created" or
// "resource/name configured" or "resource/name unchanged" (the write changed nothing), as
// `kubectl apply` prints them. An existing object is read and
// the manifest's fields are merged into it (a JSON merge patch carrying the resourceVersion
// read: fields the manifest leaves out, such as those controllers set, stay); a concurrent
// change answers 409 and the object is read and merged again (retry.RetryOnConflict). A
// namespaced object without a namespace goes to "default". The error of a kind the API does
// not know (its CRD is not established yet) satisfies meta.IsNoMatchError: apply again later.
func (a *API) Apply(ctx context.Context, manifest []byte) (string, error) {
	objs, err := Decode(manifest)
	if err != nil {
		return "", fmt.Errorf("%s: apply: %w", a.host, err)
	}
	var out []string
	for _, o := range objs {
		line, err := a.applyOne(ctx, o)
		if err != nil {
			return strings.Join(out, "\n"), a.wrap("apply "+o.GetKind()+" "+o.GetName(), err)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n"), nil
}

func (a *API) applyOne(ctx context.Context, o *unstructured.Unstructured) (string, error) {
	m, err := a.mapping(o.GroupVersionKind())
	if err != nil {
		return "", err
	}
	ri := a.Dynamic.Resource(m.Resource)
	var r dynamic.ResourceInterface = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			o.SetNamespace(metav1.NamespaceDefault)
		}
		r = ri.Namespace(o.GetNamespace())
	}
	name := m.Resource.Resource
	if g := m.Resource.Group; g != "" {
		name += "." + g
	}
	name += "/" + o.GetName()
	verb := "configured"
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cctx, cancel := call(ctx)
		defer cancel()
		cur, err := r.Get(cctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = r.Create(cctx, o, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Created since the read: read it again (a conflict retries).
				return apierrors.NewConflict(m.Resource.GroupResource(), o.GetName(), err)
			}
			verb = "created"
			return err
		}
		if err != nil {
			return err
		}
		patch := o.DeepCopy()
		patch.SetResourceVersion(cur.GetResourceVersion())
		body, err := patch.MarshalJSON()
		if err != nil {
			return err
		}
		got, err := r.Patch(cctx, o.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		verb = "configured"
		if err == nil && sameObject(cur, got) {
			verb = "unchanged"
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return name + " " + verb, nil
}

// sameObject reports whether a write left the object as it was: equal but for
// metadata.resourceVersion and managedFields.
func sameObject(a, b *unstructured.Unstructured) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	for _, u := range []*unstructured.Unstructured{x, y} {
		u.SetResourceVersion("")
		u.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(x.Object, y.Object)
}

// Decode splits a manifest (YAML or JSON documents; a kind List expanded) into objects; empty
// documents are skipped. An object without kind, apiVersion or name is an error naming its
// position.
func Decode(manifest []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d of the manifest: %w", doc, err)
		}
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: raw}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d of the manifest: %w", doc, err)
			}
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
			continue
		}
		objs = append(objs, u)
	}
}

// List returns the objects of one or more resource types (comma-separated, a group may follow
// the resource: "helmcharts,jobs,deployments", "plans.upgrade.cattle.io,jobs.batch,pods") of
// namespace ns ("" = every namespace) matching the label selector (""= all), with kind and
// raw JSON, through the dynamic client. A resource the API does not serve is an error for
// which meta.IsNoMatchError holds.
func (a *API) List(ctx context.Context, resources, ns, selector string) ([]Object, error) {
	var objs []Object
	for _, res := range strings.Split(resources, ",") {
		gr := schema.ParseGroupResource(strings.TrimSpace(res))
		gvr, err := a.mapper.ResourceFor(gr.WithVersion(""))
		if meta.IsNoMatchError(err) {
			a.mapper.Reset()
			gvr, err = a.mapper.ResourceFor(gr.WithVersion(""))
		}
		if err != nil {
			return nil, a.wrap("list "+res, err)
		}
		cctx, cancel := call(ctx)
		l, err := a.Dynamic.Resource(gvr).Namespace(ns).List(cctx, metav1.ListOptions{LabelSelector: selector})
		cancel()
		if err != nil {
			return nil, a.wrap("list "+res, err)
		}
		for i := range l.Items {
			it := &l.Items[i]
			raw, err := it.MarshalJSON()
			if err != nil {
				return nil, a.wrap("list "+res, err)
			}
			objs = append(objs, Object{Kind: it.GetKind(), Namespace: it.GetNamespace(), Name: it.GetName(), Raw: raw})
		}
	}
	return objs, nil
}

// ListJSON returns the list of one resource type of every namespace as the API's JSON
// ({"kind":"...List","items":[...]}), for a support bundle.
func (a *API) ListJSON(ctx context.Context, resource string) ([]byte, error) {
	objs, err := a.List(ctx, resource, "", "")
	if err != nil {
		return nil, err
	}
	items := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		items[i] = o.Raw
	}
	return json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{"v1", "List", items})
}
