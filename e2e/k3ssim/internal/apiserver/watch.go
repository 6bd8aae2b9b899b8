// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/store"
)

// watch streams watch events as kube-apiserver does for ?watch=true: one JSON object per
// line, {"type":"ADDED|MODIFIED|DELETED","object":{...}}. resourceVersion "" or "0" starts
// with the current objects; a newer one replays kept history after it (410 Expired when that
// history is gone). timeoutSeconds ends the stream.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, t target) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	var from int64
	if v := q.Get("resourceVersion"); v != "" {
		from, err = strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", v)))
			return
		}
	}
	ch, stop, err := s.cfg.Store.Watch(t.gr(), t.ns, from)
	if errors.Is(err, store.ErrGone) {
		writeStatus(w, metav1.Status{Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
			Message: fmt.Sprintf("too old resource version: %d (%d)", from, s.cfg.Store.ResourceVersion())})
		return
	} else if err != nil {
		writeError(w, err)
		return
	}
	defer stop()
	timeout := 30 * time.Minute
	if v, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && v > 0 {
		timeout = time.Duration(v) * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-timer.C:
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if !matches(ev.Object, ls, fs) {
				continue
			}
			if err := enc.Encode(struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}{ev.Type, ev.Object}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
