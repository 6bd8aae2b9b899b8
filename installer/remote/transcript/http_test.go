// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package transcript

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
)

// plainHost is a host without remote.APITransportWrapper.
type plainHost struct{ *Replay }

func (plainHost) WrapAPITransport() {}

var _ remote.Host = plainHost{}

// TestAPIRecordedAndReplayed: API requests through a Recorder's transport are recorded
// (status, content type, masked body, a request body as its length, a watch's events with
// their pace and its cancellation), and a Replay answers them again without a network: the
// same answers, a poll beyond the recording gets its last answer, a watch with another
// resourceVersion keeps the recorded pace and stays open until its context ends, an unknown
// request fails and is listed.
func TestAPIRecordedAndReplayed(t *testing.T) {
	const token = "K10abcdefabcdefabcdefabcdefabcdefabcdef::server:0123456789abcdef"
	nodes := `{"kind":"NodeList","items":[{"metadata":{"name":"cp1"}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/nodes" && r.URL.Query().Get("watch") == "true":
			for _, n := range []string{"a", "b"} {
				_, _ = io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"`+n+`"}}}`+"\n")
				w.(http.Flusher).Flush()
				time.Sleep(150 * time.Millisecond)
			}
			<-r.Context().Done()
		case r.URL.Path == "/api/v1/nodes":
			_, _ = io.WriteString(w, nodes)
		case r.URL.Path == "/api/v1/namespaces/kube-system/secrets/s":
			_, _ = io.WriteString(w, `{"kind":"Secret","metadata":{"name":"s"},"data":{"token":"`+base64.StdEncoding.EncodeToString([]byte(token))+`"}}`)
		case r.Method == http.MethodPut:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"kind":"Status","code":409,"reason":"Conflict"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	var buf bytes.Buffer
	// A host without an API transport of its own (a Replay has one: hidden here).
	rec := NewRecorder(plainHost{host()}, &buf)
	c := &http.Client{Transport: rec.WrapAPITransport(srv.Client().Transport)}
	get := func(c *http.Client, ctx context.Context, method, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return c.Do(req)
	}
	readAll := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	ctx := context.Background()
	if _, b := readAll(get(c, ctx, "GET", "/api/v1/nodes", "")); b != nodes {
		t.Fatalf("recorded GET nodes gave %q", b)
	}
	readAll(get(c, ctx, "GET", "/api/v1/namespaces/kube-system/secrets/s", ""))
	if st, _ := readAll(get(c, ctx, "PUT", "/api/v1/nodes/cp1", "0123456789")); st != 409 {
		t.Fatalf("PUT: %d", st)
	}
	// A watch read for two events, then stopped by its caller.
	wctx, stop := context.WithCancel(ctx)
	resp, err := get(c, wctx, "GET", "/api/v1/nodes?resourceVersion=5&watch=true", "")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < 2 && sc.Scan(); i++ {
	}
	stop()
	_ = resp.Body.Close()

	out := buf.String()
	if strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(token))) || strings.Contains(out, "K10abcdef") || strings.Contains(out, "0123456789") {
		t.Errorf("the transcript holds a secret or a request body:\n%s", out)
	}
	es, err := Read(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var watch, put Entry
	for _, e := range es {
		switch {
		case e.Op == OpHTTP && e.Watch:
			watch = e
		case e.Op == OpHTTP && e.Verb == "PUT":
			put = e
		}
	}
	if put.ReqBytes != 10 || put.Status != 409 || put.ContentType != "application/json" {
		t.Errorf("PUT recorded as %+v", put)
	}
	if len(watch.Lines) != 2 || len(watch.LineMS) != 2 || watch.LineMS[1]-watch.LineMS[0] < 100 || !watch.Canceled() {
		t.Fatalf("watch recorded as %+v", watch)
	}

	// Replayed: no network behind it (the wrapped transport is nil).
	rp := NewReplay("h1", es)
	rc := &http.Client{Transport: rp.WrapAPITransport(nil)}
	for i := 0; i < 2; i++ { // the second time: a poll beyond the recording
		if st, b := readAll(get(rc, ctx, "GET", "/api/v1/nodes", "")); st != 200 || b != nodes {
			t.Errorf("replayed GET nodes #%d: %d %q", i+1, st, b)
		}
	}
	if _, b := readAll(get(rc, ctx, "GET", "/api/v1/namespaces/kube-system/secrets/s", "")); !strings.Contains(b, base64.StdEncoding.EncodeToString([]byte("***"))) {
		t.Errorf("replayed secret %q", b)
	}
	wctx, stop = context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	resp, err = get(rc, wctx, "GET", "/api/v1/nodes?resourceVersion=9&watch=true", "")
	if err != nil {
		t.Fatal(err)
	}
	sc = bufio.NewScanner(resp.Body)
	var got []string
	for i := 0; i < 2 && sc.Scan(); i++ {
		got = append(got, sc.Text())
	}
	if len(got) != 2 || !strings.Contains(got[1], `"b"`) || time.Since(start) < 100*time.Millisecond {
		t.Errorf("replayed watch gave %q after %s", got, time.Since(start))
	}
	ended := make(chan bool)
	go func() { ended <- sc.Scan() }()
	select {
	case <-ended:
		t.Fatal("the replayed watch ended before its context did (it was recorded as stopped by its caller)")
	case <-time.After(200 * time.Millisecond):
	}
	stop()
	select {
	case more := <-ended:
		if more {
			t.Error("the replayed watch gave more than was recorded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the replayed watch did not end with its context")
	}
	_ = resp.Body.Close()
	if _, err := get(rc, ctx, "GET", "/api/v1/pods", ""); err == nil {
		t.Error("an unrecorded request was answered")
	}
	if u := rp.Unanswered(); len(u) != 1 || u[0] != "http GET /api/v1/pods" {
		t.Errorf("unanswered: %q", u)
	}
}
