// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// target is a parsed resource path.
type target struct {
	group, version string
	plural         string
	res            store.Resource
	known          bool
	ns             string
	name           string
	sub            string
}

func (t target) gr() store.GR { return store.GR{Group: t.group, Resource: t.plural} }

// parseTarget splits /api/v1/... or /apis/G/V/... into a target. ok is false for a path that
// is not a resource path; discovery paths return (target with empty plural, true).
func (s *Server) parseTarget(p string) (t target, discovery bool, ok bool) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	switch segs[0] {
	case "api":
		if len(segs) < 2 {
			return t, false, false
		}
		t.version, segs = segs[1], segs[2:]
	case "apis":
		if len(segs) < 2 {
			return t, false, false
		}
		t.group = segs[1]
		if len(segs) < 3 {
			return t, true, true
		}
		t.version, segs = segs[2], segs[3:]
	default:
		return t, false, false
	}
	if len(segs) == 0 {
		return t, true, true
	}
	if len(segs) >= 3 && segs[0] == "namespaces" && !(len(segs) == 3 && (segs[2] == "status" || segs[2] == "finalize")) {
		t.ns, segs = segs[1], segs[2:]
	}
	t.plural = segs[0]
	if len(segs) > 1 {
		t.name = segs[1]
	}
	if len(segs) > 2 {
		t.sub = strings.Join(segs[2:], "/")
	}
	t.res, t.known = s.cfg.Store.Resource(t.gr())
	if t.known && t.res.Version != t.version {
		t.known = false
	}
	return t, false, true
}

func (s *Server) resource(w http.ResponseWriter, r *http.Request) {
	t, discovery, ok := s.parseTarget(r.URL.Path)
	if !ok {
		notFoundPath(w)
		return
	}
	if discovery {
		switch {
		case t.version == "":
			s.apiGroupDoc(w, t.group)
		default:
			s.resourceList(w, t.group, t.version)
		}
		return
	}
	if !t.known && !(r.Method == http.MethodPost && t.name == "") {
		notFoundPath(w)
		return
	}
	if t.known && !t.res.Namespaced && t.ns != "" {
		notFoundPath(w)
		return
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case t.name == "":
			q := r.URL.Query()
			if w1 := q.Get("watch"); w1 == "true" || w1 == "1" {
				s.watch(w, r, t)
				return
			}
			s.list(w, r, t)
		case t.sub == "":
			b, err := s.cfg.Store.Get(t.gr(), t.ns, t.name)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, b)
		case t.sub == "status":
			b, err := s.cfg.Store.Get(t.gr(), t.ns, t.name)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, b)
		case t.sub == "log" && t.gr() == store.Pods:
			s.podLog(w, r, t)
		default:
			notFoundPath(w)
		}
	case http.MethodPost:
		switch {
		case t.name == "":
			s.create(w, r, t)
		case t.sub == "eviction" && t.gr() == store.Pods:
			s.evict(w, t)
		default:
			writeStatus(w, metav1.Status{Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed, Message: "the server does not allow this method on the requested resource"})
		}
	case http.MethodPut:
		if t.name == "" || (t.sub != "" && t.sub != "status") {
			writeStatus(w, metav1.Status{Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed, Message: "the server does not allow this method on the requested resource"})
			return
		}
		s.replace(w, r, t)
	case http.MethodPatch:
		if t.name == "" || (t.sub != "" && t.sub != "status") {
			writeStatus(w, metav1.Status{Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed, Message: "the server does not allow this method on the requested resource"})
			return
		}
		s.patch(w, r, t)
	case http.MethodDelete:
		if t.name == "" || t.sub != "" {
			writeStatus(w, metav1.Status{Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed, Message: "the server does not allow this method on the requested resource"})
			return
		}
		s.delete(w, t)
	default:
		writeStatus(w, metav1.Status{Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed, Message: "the server does not allow this method on the requested resource"})
	}
}

// selectors parses labelSelector and fieldSelector query parameters.
func selectors(r *http.Request) (labels.Selector, fields.Selector, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	return ls, fs, nil
}

// objectSets returns the label set and the selectable fields of a stored object.
func objectSets(b []byte) (labels.Set, fields.Set) {
	var o struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			NodeName      string `json:"nodeName"`
			Unschedulable bool   `json:"unschedulable"`
		} `json:"spec"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
		InvolvedObject struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"involvedObject"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &o)
	return labels.Set(o.Metadata.Labels), fields.Set{
		"metadata.name":       o.Metadata.Name,
		"metadata.namespace":  o.Metadata.Namespace,
		"spec.nodeName":       o.Spec.NodeName,
		"spec.unschedulable":  strconv.FormatBool(o.Spec.Unschedulable),
		"status.phase":        o.Status.Phase,
		"involvedObject.name": o.InvolvedObject.Name,
		"involvedObject.kind": o.InvolvedObject.Kind,
		"type":                o.Type,
	}
}

func matches(b []byte, ls labels.Selector, fs fields.Selector) bool {
	l, f := objectSets(b)
	return ls.Matches(l) && fs.Matches(f)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, t target) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	items, rv := s.cfg.Store.List(t.gr(), t.ns)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":%q},"items":[`,
		t.res.Kind+"List", t.res.APIVersion(), strconv.FormatInt(rv, 10))
	first := true
	for _, it := range items {
		if !matches(it, ls, fs) {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(it)
	}
	buf.WriteString("]}")
	writeJSON(w, http.StatusOK, buf.Bytes())
}

func readObject(r *http.Request) (map[string]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml: %v", err))
	}
	return obj, nil
}

func metaOf(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, t target) {
	obj, err := readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	kind, _ := obj["kind"].(string)
	if !t.known {
		// A kind without a CRD: register it on the fly (lenient, so e.g. Rancher's import
		// manifests apply in any order).
		if kind == "" {
			notFoundPath(w)
			return
		}
		t.res = store.Resource{Group: t.group, Version: t.version, Resource: t.plural, Singular: strings.ToLower(kind),
			Kind: kind, Namespaced: t.ns != ""}
		s.cfg.Store.Register(t.res)
		t.known = true
	}
	if kind != "" && kind != t.res.Kind {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the kind %q of the provided object does not match the resource %q", kind, t.plural)))
		return
	}
	md := metaOf(obj)
	if t.res.Namespaced {
		if ns, _ := md["namespace"].(string); ns != "" && ns != t.ns {
			writeError(w, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
			return
		}
	}
	delete(md, "resourceVersion")
	b, err := s.cfg.Store.Create(t.gr(), t.ns, obj)
	if err != nil {
		writeError(w, err)
		return
	}
	if t.gr() == store.CRDs {
		if b2, err := s.cfg.Store.EstablishCRD(md["name"].(string)); err == nil {
			b = b2
		}
	}
	writeJSON(w, http.StatusCreated, b)
}

func (s *Server) replace(w http.ResponseWriter, r *http.Request, t target) {
	obj, err := readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	md := metaOf(obj)
	if n, _ := md["name"].(string); n != "" && n != t.name {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, t.name)))
		return
	}
	if t.gr() == store.Nodes && t.sub == "" && s.cfg.BeforeNodeReplace != nil {
		s.cfg.BeforeNodeReplace(t.name)
	}
	b, err := s.cfg.Store.Update(t.gr(), t.ns, t.name, obj, store.UpdateOptions{Status: t.sub == "status", CheckResourceVersion: true})
	if err != nil {
		writeError(w, err)
		return
	}
	if t.gr() == store.CRDs {
		if b2, err := s.cfg.Store.EstablishCRD(t.name); err == nil {
			b = b2
		}
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) delete(w http.ResponseWriter, t target) {
	b, err := s.cfg.Store.Delete(t.gr(), t.ns, t.name)
	if err != nil {
		writeError(w, err)
		return
	}
	if t.gr() == store.Namespaces {
		s.deleteNamespaceContent(t.name)
	}
	var o struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(b, &o)
	writeJSON(w, http.StatusOK, metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: t.name, Group: t.group, Kind: t.plural, UID: types.UID(o.Metadata.UID)},
	})
}

func (s *Server) deleteNamespaceContent(ns string) {
	for _, r := range s.cfg.Store.Resources() {
		if !r.Namespaced {
			continue
		}
		items, _ := s.cfg.Store.List(r.GR(), ns)
		for _, it := range items {
			var o struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(it, &o) == nil {
				_, _ = s.cfg.Store.Delete(r.GR(), ns, o.Metadata.Name)
			}
		}
	}
}

func (s *Server) evict(w http.ResponseWriter, t target) {
	if _, err := s.cfg.Store.Delete(store.Pods, t.ns, t.name); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

func (s *Server) podLog(w http.ResponseWriter, r *http.Request, t target) {
	if _, err := s.cfg.Store.Get(store.Pods, t.ns, t.name); err != nil {
		writeError(w, err)
		return
	}
	var text string
	if _, err := s.cfg.Store.GetAux(store.PodLogKey(t.ns, t.name), &text); err != nil {
		writeError(w, err)
		return
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("tailLines")); err == nil && n >= 0 {
		lines := strings.SplitAfter(text, "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		text = strings.Join(lines, "")
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(text))
}
