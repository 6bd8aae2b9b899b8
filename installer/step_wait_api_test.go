// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPing: any HTTP answer below 500 means the API server is there (K3s's "pong", or a 401
// for a client it does not know) and its Date is returned; a 5xx and a refused connection are
// errors, the latter unwrapped to what the network said.
func TestPing(t *testing.T) {
	date := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", date.Format(http.TimeFormat))
		w.WriteHeader(status)
		_, _ = w.Write([]byte("pong"))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := srv.Client()
	for _, st := range []int{http.StatusOK, http.StatusUnauthorized} {
		status = st
		got, err := ping(ctx, c, srv.URL+"/ping")
		if err != nil || !got.Equal(date) {
			t.Errorf("HTTP %d: %v %v, want the server's date %v", st, got, err, date)
		}
	}
	status = http.StatusServiceUnavailable
	if _, err := ping(ctx, c, srv.URL+"/ping"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("HTTP 503: %v, want an error naming it", err)
	}
	srv.Close()
	_, err := ping(ctx, c, srv.URL+"/ping")
	if err == nil || strings.Contains(err.Error(), srv.URL+"/ping\"") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("closed server: %v, want the network's refusal without the URL wrapper", err)
	}
}
