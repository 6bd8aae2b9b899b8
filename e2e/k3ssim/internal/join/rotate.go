// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package join

import (
	"encoding/json"
	"io"
	"net/http"
)

// RotatePath is the simulator's endpoint behind `k3s token rotate` (K3s: the server token is
// replaced in the datastore; nodes must be restarted with the new one).
const RotatePath = "/v1-k3s/sim-token-rotate"

// RotateRequest carries the new server token password (secret: never logged).
type RotateRequest struct {
	NewPassword string `json:"newPassword"`
}

// Mux serves the join endpoint and the token rotation endpoint.
type Mux struct {
	Join *Handler
	// Rotate replaces the server token password; nil answers 404.
	Rotate func(newPassword string) error
}

// ServeHTTP dispatches on the path.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != RotatePath || m.Rotate == nil {
		m.Join.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	user, pw, ok := r.BasicAuth()
	if !ok || user != "server" || !eq(pw, m.Join.ServerPassword()) {
		w.Header().Set("WWW-Authenticate", `Basic realm="k3s"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	var req RotateRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.NewPassword == "" {
		http.Error(w, "bad token rotate request", http.StatusBadRequest)
		return
	}
	if err := m.Rotate(req.NewPassword); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("token rotated\n"))
}
