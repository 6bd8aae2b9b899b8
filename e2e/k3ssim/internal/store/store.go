// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package store is the simulator's object store: every Kubernetes object the simulated
// server holds, a global resourceVersion bumped by every write (as etcd/kine do), watch
// events with a short history, and atomic persistence under <data-dir>/server/db/ so a
// service restart keeps the cluster state (e2e/k3ssim/README.md, "What it does").
//
// Objects are kept as JSON; writes take map[string]any (unstructured content). Typed access
// (corev1.Node, corev1.Pod, ...) goes through the generic helpers in typed.go. Errors are
// k8s.io/apimachinery/pkg/api/errors values so the API server can turn them into real
// metav1.Status responses.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Event is one watch event. The replication stream (replica.go) also carries the
// pseudo-types EventRegister (Object: a Resource) and EventAux (Name: key, Object: value).
type Event struct {
	Type      string `json:"type"` // ADDED, MODIFIED, DELETED (or EventRegister, EventAux)
	GR        GR     `json:"gr"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Object    []byte `json:"object,omitempty"`
	RV        int64  `json:"rv,omitempty"`
}

const historySize = 4096

type subscriber struct {
	gr GR
	ns string
	// all: a replication subscriber (every resource type, registrations and aux values).
	all bool
	ch  chan Event
}

// Store holds all objects. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	path    string // state file; empty = memory only
	rv      int64
	objs    map[GR]map[string][]byte // key: namespace + "/" + name
	reg     map[GR]Resource
	dynamic map[GR]Resource
	aux     map[string]json.RawMessage

	history   []Event
	trimmedRV int64 // highest RV dropped from history
	subs      map[int]*subscriber
	nextSub   int
	changes   map[int]chan struct{}

	dirty   bool
	flushMu sync.Mutex
}

// Snapshot is the whole content of a store at one resourceVersion: the state file's format
// and the first message of the replication stream (replica.go).
type Snapshot struct {
	ResourceVersion int64 `json:"resourceVersion"`
	// Resources are the types registered at run time (CRDs, kinds applied without one).
	Resources []Resource `json:"resources,omitempty"`
	// Objects: "group/resource" -> "namespace/name" -> object.
	Objects map[string]map[string]json.RawMessage `json:"objects"`
	Aux     map[string]json.RawMessage            `json:"aux,omitempty"`
}

// Open loads the state file at path (physical path; created on first flush) or starts empty
// when it does not exist. path "" keeps everything in memory.
func Open(path string) (*Store, error) {
	s := &Store{
		path:    path,
		objs:    map[GR]map[string][]byte{},
		reg:     map[GR]Resource{},
		dynamic: map[GR]Resource{},
		aux:     map[string]json.RawMessage{},
		subs:    map[int]*subscriber{},
		changes: map[int]chan struct{}{},
	}
	for _, r := range builtins {
		s.reg[r.GR()] = r
	}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	} else if err != nil {
		return nil, err
	}
	var st Snapshot
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	s.loadLocked(st)
	return s, nil
}

// loadLocked replaces the content with snap (mu held, or the store not yet shared). The
// watch history starts over at snap's resourceVersion.
func (s *Store) loadLocked(snap Snapshot) {
	s.rv = snap.ResourceVersion
	s.reg, s.dynamic = map[GR]Resource{}, map[GR]Resource{}
	for _, r := range builtins {
		s.reg[r.GR()] = r
	}
	for _, r := range snap.Resources {
		s.reg[r.GR()] = r
		s.dynamic[r.GR()] = r
	}
	s.objs = map[GR]map[string][]byte{}
	for key, objs := range snap.Objects {
		gr := parseGRKey(key)
		m := map[string][]byte{}
		for k, v := range objs {
			m[k] = []byte(v)
		}
		s.objs[gr] = m
	}
	s.aux = map[string]json.RawMessage{}
	for k, v := range snap.Aux {
		s.aux[k] = v
	}
	s.history = nil
	s.trimmedRV = s.rv
}

// snapshotLocked copies the content (mu held).
func (s *Store) snapshotLocked() Snapshot {
	st := Snapshot{ResourceVersion: s.rv, Objects: map[string]map[string]json.RawMessage{}, Aux: map[string]json.RawMessage{}}
	for _, r := range s.dynamic {
		st.Resources = append(st.Resources, r)
	}
	sort.Slice(st.Resources, func(i, j int) bool { return grKey(st.Resources[i].GR()) < grKey(st.Resources[j].GR()) })
	for gr, objs := range s.objs {
		m := map[string]json.RawMessage{}
		for k, v := range objs {
			m[k] = v
		}
		st.Objects[grKey(gr)] = m
	}
	for k, v := range s.aux {
		st.Aux[k] = v
	}
	return st
}

func grKey(gr GR) string { return gr.Group + "/" + gr.Resource }

func parseGRKey(k string) GR {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return GR{Group: k[:i], Resource: k[i+1:]}
		}
	}
	return GR{Resource: k}
}

func objKey(ns, name string) string { return ns + "/" + name }

// markDirty must be called with mu held.
func (s *Store) markDirty() { s.dirty = true }

// Flush writes the state file atomically if anything changed since the last flush.
func (s *Store) Flush() error {
	if s.path == "" {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	st := s.snapshotLocked()
	s.dirty = false
	s.mu.Unlock()

	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// RunFlusher flushes every interval until ctx ends, then once more. Flush errors are passed
// to onErr (if not nil).
func (s *Store) RunFlusher(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := s.Flush(); err != nil && onErr != nil {
				onErr(err)
			}
			return
		case <-t.C:
			if err := s.Flush(); err != nil && onErr != nil {
				onErr(err)
			}
		}
	}
}

// ResourceVersion returns the current global resourceVersion.
func (s *Store) ResourceVersion() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func groupResource(gr GR) schema.GroupResource {
	return schema.GroupResource{Group: gr.Group, Resource: gr.Resource}
}

// Get returns the stored object or a NotFound error.
func (s *Store) Get(gr GR, ns, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[gr][objKey(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(groupResource(gr), name)
	}
	return b, nil
}

// List returns the objects of gr in namespace ns ("" = all namespaces), sorted by namespace
// and name, and the current resourceVersion.
func (s *Store) List(gr GR, ns string) ([][]byte, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objs[gr]))
	for k := range s.objs[gr] {
		if ns == "" || len(k) > len(ns) && k[:len(ns)+1] == ns+"/" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.objs[gr][k])
	}
	return out, s.rv
}

// Create stores a new object. It fills metadata.uid, creationTimestamp, resourceVersion,
// generation (1) and a name from generateName; it returns AlreadyExists if the name is taken
// and BadRequest if there is no name.
func (s *Store) Create(gr GR, ns string, obj map[string]any) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md := meta(obj)
	name, _ := md["name"].(string)
	if name == "" {
		if gen, _ := md["generateName"].(string); gen != "" {
			for {
				name = gen + string(uuid.NewUUID())[:5]
				if _, taken := s.objs[gr][objKey(ns, name)]; !taken {
					break
				}
			}
			md["name"] = name
		} else {
			return nil, apierrors.NewBadRequest("name or generateName is required")
		}
	}
	if _, exists := s.objs[gr][objKey(ns, name)]; exists {
		return nil, apierrors.NewAlreadyExists(groupResource(gr), name)
	}
	if ns != "" {
		md["namespace"] = ns
	} else {
		delete(md, "namespace")
	}
	md["uid"] = string(uuid.NewUUID())
	md["creationTimestamp"] = metav1.Now().UTC().Format(time.RFC3339)
	if tracksGeneration(gr) {
		md["generation"] = int64(1)
	} else {
		delete(md, "generation")
	}
	delete(md, "deletionTimestamp")
	return s.commit("ADDED", gr, ns, name, obj)
}

// UpdateOptions select how Update treats the incoming object.
type UpdateOptions struct {
	// Status: this is a write to the status subresource (only .status is taken).
	Status bool
	// CheckResourceVersion: a non-empty metadata.resourceVersion that differs from the stored
	// one is a Conflict (optimistic concurrency, as kube-apiserver).
	CheckResourceVersion bool
	// All: take spec, metadata and status together (internal writers only).
	All bool
}

// ConflictMessage is the text after `Operation cannot be fulfilled on nodes "NAME": `.
const ConflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// Update replaces a stored object (PUT semantics). For types with a status subresource a
// main-resource write keeps the stored status and a status write keeps everything but the
// status. uid and creationTimestamp are kept; generation goes up when anything outside
// metadata and status changed. It returns NotFound, or Conflict on a stale resourceVersion.
func (s *Store) Update(gr GR, ns, name string, obj map[string]any, opts UpdateOptions) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(gr, ns, name, obj, opts)
}

func (s *Store) updateLocked(gr GR, ns, name string, obj map[string]any, opts UpdateOptions) ([]byte, error) {
	oldRaw, ok := s.objs[gr][objKey(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(groupResource(gr), name)
	}
	var old map[string]any
	if err := json.Unmarshal(oldRaw, &old); err != nil {
		return nil, err
	}
	oldMD := meta(old)
	md := meta(obj)
	if opts.CheckResourceVersion {
		if rv, _ := md["resourceVersion"].(string); rv != "" && rv != oldMD["resourceVersion"] {
			return nil, apierrors.NewConflict(groupResource(gr), name, errors.New(ConflictMessage))
		}
	}
	res := s.reg[gr]
	if res.HasStatus && !opts.All {
		if opts.Status {
			st := obj["status"]
			var base map[string]any // a fresh copy: old must stay unchanged for the no-op check
			if err := json.Unmarshal(oldRaw, &base); err != nil {
				return nil, err
			}
			obj = base
			if st == nil {
				delete(obj, "status")
			} else {
				obj["status"] = st
			}
			md = meta(obj)
		} else {
			if st, has := old["status"]; has {
				obj["status"] = st
			} else {
				delete(obj, "status")
			}
		}
	}
	md["name"] = name
	if ns != "" {
		md["namespace"] = ns
	}
	md["uid"] = oldMD["uid"]
	md["creationTimestamp"] = oldMD["creationTimestamp"]
	if tracksGeneration(gr) {
		gen := toInt64(oldMD["generation"])
		if specChanged(old, obj) {
			gen++
		}
		md["generation"] = gen
	} else {
		delete(md, "generation")
	}
	if reflect.DeepEqual(stripRV(old), stripRV(obj)) {
		return oldRaw, nil // no-op writes do not bump the resourceVersion (as kube-apiserver)
	}
	return s.commit("MODIFIED", gr, ns, name, obj)
}

// Mutate applies fn to the stored object under the store lock (fn must not call the store)
// and writes it back when fn reports a change. It is the controllers' read-modify-write and
// never conflicts. It returns the stored bytes (new or unchanged) or NotFound.
func (s *Store) Mutate(gr GR, ns, name string, fn func(obj map[string]any) (bool, error)) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.objs[gr][objKey(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(groupResource(gr), name)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	changed, err := fn(obj)
	if err != nil || !changed {
		return raw, err
	}
	return s.updateLocked(gr, ns, name, obj, UpdateOptions{All: true})
}

// Bump rewrites the stored object unchanged except for a new resourceVersion, as a
// concurrent writer would (knob conflictOnNextReplace). It returns NotFound if absent.
func (s *Store) Bump(gr GR, ns, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.objs[gr][objKey(ns, name)]
	if !ok {
		return apierrors.NewNotFound(groupResource(gr), name)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	_, err := s.commit("MODIFIED", gr, ns, name, obj)
	return err
}

// Delete removes an object and returns its last state, or NotFound.
func (s *Store) Delete(gr GR, ns, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.objs[gr][objKey(ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(groupResource(gr), name)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return s.commit("DELETED", gr, ns, name, obj)
}

// commit stores (or deletes) obj with a new resourceVersion and publishes the event. mu held.
func (s *Store) commit(typ string, gr GR, ns, name string, obj map[string]any) ([]byte, error) {
	s.rv++
	md := meta(obj)
	md["resourceVersion"] = strconv.FormatInt(s.rv, 10)
	if r, ok := s.reg[gr]; ok {
		if _, has := obj["apiVersion"]; !has {
			obj["apiVersion"] = r.APIVersion()
		}
		if _, has := obj["kind"]; !has {
			obj["kind"] = r.Kind
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		s.rv--
		return nil, err
	}
	if typ == "DELETED" {
		delete(s.objs[gr], objKey(ns, name))
	} else {
		if s.objs[gr] == nil {
			s.objs[gr] = map[string][]byte{}
		}
		s.objs[gr][objKey(ns, name)] = b
	}
	s.markDirty()
	s.publishLocked(Event{Type: typ, GR: gr, Namespace: ns, Name: name, Object: b, RV: s.rv})
	return b, nil
}

// publishLocked records an object event in the history and hands it to the watches of its
// type, the replication subscribers and the change listeners (mu held).
func (s *Store) publishLocked(ev Event) {
	s.history = append(s.history, ev)
	if len(s.history) > historySize {
		drop := len(s.history) - historySize
		s.trimmedRV = s.history[drop-1].RV
		s.history = append([]Event(nil), s.history[drop:]...)
	}
	s.sendLocked(ev)
	for _, c := range s.changes {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// sendLocked delivers ev to the matching subscribers (mu held). Registrations and aux
// values go to replication subscribers only.
func (s *Store) sendLocked(ev Event) {
	object := ev.Type != EventRegister && ev.Type != EventAux
	for id, sub := range s.subs {
		if !sub.all && (!object || sub.gr != ev.GR || (sub.ns != "" && sub.ns != ev.Namespace)) {
			continue
		}
		select {
		case sub.ch <- ev:
		default: // too slow: end its watch, the client re-lists (as kube-apiserver does)
			close(sub.ch)
			delete(s.subs, id)
		}
	}
}

// ErrGone is returned by Watch when the requested resourceVersion is older than the kept
// history (HTTP 410 "too old resource version").
var ErrGone = errors.New("too old resource version")

// Watch streams events of gr in namespace ns ("" = all). With fromRV > 0 it first replays
// the kept events after fromRV (ErrGone if they are no longer all kept); with fromRV 0 it
// first sends an ADDED event for every current object. stop ends the watch and closes ch;
// ch is also closed if the consumer falls too far behind.
func (s *Store) Watch(gr GR, ns string, fromRV int64) (ch <-chan Event, stop func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var initial []Event
	if fromRV > 0 {
		if fromRV < s.trimmedRV {
			return nil, nil, ErrGone
		}
		for _, ev := range s.history {
			if ev.RV > fromRV && ev.GR == gr && (ns == "" || ev.Namespace == ns) {
				initial = append(initial, ev)
			}
		}
	} else {
		keys := make([]string, 0, len(s.objs[gr]))
		for k := range s.objs[gr] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b := s.objs[gr][k]
			var m struct {
				Metadata struct {
					Namespace       string `json:"namespace"`
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(b, &m)
			if ns != "" && m.Metadata.Namespace != ns {
				continue
			}
			rv, _ := strconv.ParseInt(m.Metadata.ResourceVersion, 10, 64)
			initial = append(initial, Event{Type: "ADDED", GR: gr, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name, Object: b, RV: rv})
		}
	}
	c := make(chan Event, historySize+len(initial))
	for _, ev := range initial {
		c <- ev
	}
	return c, s.subscribeLocked(&subscriber{gr: gr, ns: ns, ch: c}), nil
}

// subscribeLocked registers sub (s.mu held) and returns the function that ends it: its channel
// is closed once, by that function or by the store when the subscriber falls behind.
func (s *Store) subscribeLocked(sub *subscriber) (stop func()) {
	id := s.nextSub
	s.nextSub++
	s.subs[id] = sub
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[id]; ok {
			close(sub.ch)
			delete(s.subs, id)
		}
	}
}

// Changes returns a channel that receives (coalesced) a value after every write, for
// controllers that re-reconcile on change, and a function to stop it.
func (s *Store) Changes() (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{}, 1)
	id := s.nextSub
	s.nextSub++
	s.changes[id] = c
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.changes, id)
	}
}

// GetAux decodes the auxiliary (simulator-internal, persisted) value key into v; it reports
// false when the key is unset.
func (s *Store) GetAux(key string, v any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.aux[key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

// SetAux stores an auxiliary value (persisted with the state, never served by the API).
func (s *Store) SetAux(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aux[key] = b
	s.markDirty()
	s.sendLocked(Event{Type: EventAux, Name: key, Object: b})
	return nil
}

// UpdateAux runs fn on the decoded auxiliary value under the store lock and stores the
// result, so concurrent updates do not get lost. v must be a pointer; it is zeroed-decoded
// from the stored value before fn runs.
func (s *Store) UpdateAux(key string, v any, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if raw, ok := s.aux[key]; ok {
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
	}
	if err := fn(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.aux[key] = b
	s.markDirty()
	s.sendLocked(Event{Type: EventAux, Name: key, Object: b})
	return nil
}

// tracksGeneration: kube-apiserver keeps metadata.generation for workloads, custom resources
// and pods, not for nodes, namespaces and the other core types.
func tracksGeneration(gr GR) bool { return gr.Group != "" || gr == Pods }

func meta(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}

func specChanged(a, b map[string]any) bool {
	for k, v := range a {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !reflect.DeepEqual(v, b[k]) {
			return true
		}
	}
	for k := range b {
		if k == "metadata" || k == "status" || k == "apiVersion" || k == "kind" {
			continue
		}
		if _, ok := a[k]; !ok {
			return true
		}
	}
	return false
}

// stripRV returns a JSON-normalised copy of obj without metadata.resourceVersion (so numbers
// compare equal whatever their Go type).
func stripRV(obj map[string]any) map[string]any {
	b, _ := json.Marshal(obj)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if md, ok := out["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	return out
}
