// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package replica keeps a joined server's copy of the first server's store (SIMULATOR
// behaviour standing in for the embedded etcd member every K3s server runs; see
// e2e/k3ssim/README.md "HA"). A Follower reads the first server's replication stream
// (apiserver.ReplicatePath: a snapshot, then every change with its resourceVersion, and a
// keepalive every second) into a local store, and records when it last heard from the first
// server, so the joined server can take over once the first server has been silent for a
// while and hand back once it answers again.
package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/apiserver"
	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// Idle is how long the stream may stay silent (no line, keepalives included) before the
// follower drops the connection and dials again.
const Idle = 3 * apiserver.ReplicateKeepalive

// retryEvery is the pause between two connection attempts.
const retryEvery = 500 * time.Millisecond

// Follower mirrors the first server's store into Store.
type Follower struct {
	// URL is the first server's own https://IP:PORT (not the registration endpoint, which may
	// name this server once the endpoint moved).
	URL string
	// Client authenticates with a client certificate of the cluster and trusts the server
	// CA. Its transport should have a short dial timeout; the follower sets per-stream limits.
	Client *http.Client
	// Store receives the copy.
	Store *store.Store
	// BeforeRestore, if set, runs with every snapshot received, before it replaces the copy
	// (the joined server steps down there when it had taken over).
	BeforeRestore func()
	// OnError, if set, is told why a stream ended or could not start.
	OnError func(error)

	mu          sync.Mutex
	lastContact time.Time
	synced      bool
}

// Synced reports whether a snapshot has been loaded at least once.
func (f *Follower) Synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

// LastContact is when the last line came from the first server (zero before the first).
func (f *Follower) LastContact() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastContact
}

func (f *Follower) contact() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastContact = time.Now()
}

// Run follows the stream, reconnecting after every failure, until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := f.follow(ctx); err != nil && ctx.Err() == nil && f.OnError != nil {
			f.OnError(err)
		}
		t := time.NewTimer(retryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// follow reads one stream until it fails or stays silent for Idle.
func (f *Follower) follow(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	watchdog := time.AfterFunc(Idle, cancel)
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(f.URL, "/")+apiserver.ReplicatePath, nil)
	if err != nil {
		return err
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replication stream from %s: %s", f.URL, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	for first := true; ; first = false {
		var m apiserver.ReplicationMessage
		if err := dec.Decode(&m); err != nil {
			if ctx.Err() != nil && parent.Err() == nil {
				return fmt.Errorf("replication stream from %s: silent for %s", f.URL, Idle)
			}
			return err
		}
		watchdog.Reset(Idle)
		f.contact()
		switch {
		case first:
			if m.Snapshot == nil {
				return fmt.Errorf("replication stream from %s: no snapshot first", f.URL)
			}
			if f.BeforeRestore != nil {
				f.BeforeRestore()
			}
			f.Store.Restore(*m.Snapshot)
			f.mu.Lock()
			f.synced = true
			f.mu.Unlock()
		case m.Event != nil:
			if err := f.Store.ApplyReplicated(*m.Event); err != nil {
				return err
			}
		}
	}
}
