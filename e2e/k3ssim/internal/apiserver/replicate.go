// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"encoding/json"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// ReplicatePath streams the store to a joined server (SIMULATOR behaviour standing in for
// etcd replication between K3s servers; e2e/k3ssim/README.md "HA"). It needs a client
// certificate of the cluster and a ready API.
const ReplicatePath = "/v1-k3s/sim-replicate"

// ReplicateKeepalive is how often the stream carries a keepalive line when nothing changed,
// so a follower notices a vanished first server without waiting for TCP.
const ReplicateKeepalive = time.Second

// ReplicationMessage is one line of the replication stream: first a snapshot, then events
// and keepalives.
type ReplicationMessage struct {
	Snapshot  *store.Snapshot `json:"snapshot,omitempty"`
	Event     *store.Event    `json:"event,omitempty"`
	Keepalive bool            `json:"keepalive,omitempty"`
}

func (s *Server) replicate(w http.ResponseWriter, r *http.Request) {
	if !Authenticated(r) {
		writeStatus(w, metav1.Status{Code: http.StatusUnauthorized, Reason: metav1.StatusReasonUnauthorized, Message: "Unauthorized"})
		return
	}
	if s.cfg.Ready != nil && !s.cfg.Ready() {
		writeStatus(w, metav1.Status{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "apiserver not ready"})
		return
	}
	snap, ch, stop := s.cfg.Store.Replicate()
	defer stop()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(m ReplicationMessage) bool {
		if enc.Encode(m) != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send(ReplicationMessage{Snapshot: &snap}) {
		return
	}
	tick := time.NewTicker(ReplicateKeepalive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if !send(ReplicationMessage{Keepalive: true}) {
				return
			}
		case ev, ok := <-ch:
			if !ok || !send(ReplicationMessage{Event: &ev}) {
				return
			}
		}
	}
}
