// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"fmt"
)

// Replication (SIMULATOR behaviour, e2e/k3ssim/README.md "HA"): a joined server keeps a
// copy of the first server's store, standing in for its embedded etcd member. The first
// server streams a Snapshot and then every change (Replicate); the joined server loads the
// snapshot (Restore) and applies the changes with their original resourceVersions
// (ApplyReplicated), so when it takes over its API continues the same resourceVersion
// sequence and watches can resume.

// Pseudo event types of the replication stream.
const (
	// EventRegister: a resource type was registered (Object is the Resource as JSON).
	EventRegister = "REGISTER"
	// EventAux: an auxiliary value was set (Name is the key, Object the value).
	EventAux = "AUX"
)

// Replicate returns a consistent snapshot and a channel with every later change: object
// events of all types, registrations and aux values. stop ends it and closes the channel;
// the channel is also closed when the consumer falls too far behind (it re-syncs).
func (s *Store) Replicate() (snap Snapshot, ch <-chan Event, stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap = s.snapshotLocked()
	c := make(chan Event, historySize)
	return snap, c, s.subscribeLocked(&subscriber{all: true, ch: c})
}

// Restore replaces the whole content with snap (a replica's (re)sync). Open watches and
// replication subscribers end, so their clients re-list as after a kube-apiserver restart.
func (s *Store) Restore(snap Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(snap)
	for id, sub := range s.subs {
		close(sub.ch)
		delete(s.subs, id)
	}
	s.markDirty()
	for _, c := range s.changes {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// ApplyReplicated applies one change received from another store's Replicate stream,
// keeping its object bytes and resourceVersion.
func (s *Store) ApplyReplicated(ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case EventRegister:
		var r Resource
		if err := json.Unmarshal(ev.Object, &r); err != nil {
			return fmt.Errorf("replicated resource: %w", err)
		}
		s.reg[r.GR()] = r
		s.dynamic[r.GR()] = r
	case EventAux:
		s.aux[ev.Name] = append(json.RawMessage(nil), ev.Object...)
	case "ADDED", "MODIFIED":
		if s.objs[ev.GR] == nil {
			s.objs[ev.GR] = map[string][]byte{}
		}
		s.objs[ev.GR][objKey(ev.Namespace, ev.Name)] = ev.Object
	case "DELETED":
		delete(s.objs[ev.GR], objKey(ev.Namespace, ev.Name))
	default:
		return fmt.Errorf("replicated event of unknown type %q", ev.Type)
	}
	s.markDirty()
	if ev.Type == EventRegister || ev.Type == EventAux {
		s.sendLocked(ev)
		return nil
	}
	if ev.RV > s.rv {
		s.rv = ev.RV
	}
	s.publishLocked(ev)
	return nil
}
