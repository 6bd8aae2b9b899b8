// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package transcript

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// isWatch reports whether req streams its answer: a watch (?watch=true, or the legacy
// /watch/ paths) or a followed log.
func isWatch(req *http.Request) bool {
	q := req.URL.Query()
	for _, k := range []string{"watch", "follow"} {
		if v := q.Get(k); v == "true" || v == "1" {
			return true
		}
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

// maskBody masks a recorded API answer: k3s.Mask over the text, and the values of Secrets'
// data and stringData (base64 of k3s.Masked, so the answer still decodes) in JSON answers
// about secrets.
func maskBody(path string, b []byte) string {
	if strings.Contains(path, "/secrets") || bytes.Contains(b, []byte(`"Secret"`)) {
		b = maskSecretJSON(b)
	}
	return k3s.Mask(string(b))
}

// maskedB64 is k3s.Masked as a Secret's data value.
var maskedB64 = base64.StdEncoding.EncodeToString([]byte(k3s.Masked))

// maskSecretJSON replaces the data and stringData values of every Secret object in the JSON
// document b (an object, a list, a watch event); b unchanged when it is not JSON.
func maskSecretJSON(b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if t["kind"] == "Secret" || t["type"] != nil && t["data"] != nil && t["metadata"] != nil {
				for _, k := range []string{"data", "stringData"} {
					if m, ok := t[k].(map[string]any); ok {
						for key := range m {
							if k == "data" {
								m[key] = maskedB64
							} else {
								m[key] = k3s.Masked
							}
						}
					}
				}
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// WrapAPITransport records every API request made through rt (remote.APITransportWrapper),
// passing it on to the wrapped host's own wrapper when it has one.
func (r *Recorder) WrapAPITransport(rt http.RoundTripper) http.RoundTripper {
	if w, ok := r.h.(remote.APITransportWrapper); ok {
		rt = w.WrapAPITransport(rt)
	}
	return &recordingRT{r: r, rt: rt}
}

type recordingRT struct {
	r  *Recorder
	rt http.RoundTripper
}

func (t *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	e := Entry{Op: OpHTTP, Verb: req.Method, Path: req.URL.RequestURI(), Watch: isWatch(req)}
	if req.ContentLength > 0 {
		e.ReqBytes = req.ContentLength
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		e.Err = errText(err)
		t.r.add(e)
		return resp, err
	}
	e.Status, e.ContentType = resp.StatusCode, resp.Header.Get("Content-Type")
	if e.Watch {
		resp.Body = &recordingBody{t: t, e: e, body: resp.Body, start: time.Now()}
		t.r.watching(resp.Body.(*recordingBody), true)
		return resp, nil
	}
	b, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	e.Data = maskBody(e.Path, b)
	e.Err = errText(rerr)
	t.r.add(e)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if rerr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{rerr}))
	}
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// recordingBody records a streamed answer line by line as it is read; the entry is written
// when the body ends or is closed (or, still open, when the Recorder closes).
type recordingBody struct {
	t     *recordingRT
	body  io.ReadCloser
	start time.Time

	mu      sync.Mutex
	e       Entry
	partial []byte
	done    bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	b.partial = append(b.partial, p[:n]...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.e.Lines = append(b.e.Lines, maskBody(b.e.Path, b.partial[:i]))
		b.e.LineMS = append(b.e.LineMS, time.Since(b.start).Milliseconds())
		b.partial = b.partial[i+1:]
	}
	b.mu.Unlock()
	if err != nil {
		b.finish(err)
	}
	return n, err
}

func (b *recordingBody) Close() error {
	err := b.body.Close()
	b.finish(context.Canceled)
	return err
}

// finish writes the entry once: err io.EOF is a stream the server ended; any other error
// (context.Canceled when the caller closed it) is recorded as the stream's end.
func (b *recordingBody) finish(err error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	if len(b.partial) > 0 {
		b.e.Lines = append(b.e.Lines, maskBody(b.e.Path, b.partial))
		b.e.LineMS = append(b.e.LineMS, time.Since(b.start).Milliseconds())
		b.partial = nil
	}
	if !errors.Is(err, io.EOF) {
		b.e.Err = errText(err)
	}
	e := b.e
	b.mu.Unlock()
	b.t.r.watching(b, false)
	b.t.r.add(e)
}

// WrapAPITransport answers every API request from the transcript's http entries
// (remote.APITransportWrapper); rt is never used, so nothing is dialled. A request takes the
// first unused entry with the same method, path and query, else the same without the query's
// resourceVersion and timeoutSeconds; a request asked more often than recorded gets the last
// answer again (a watch: one that sees nothing until its context ends). Unanswered requests
// fail and are listed in Unanswered.
func (r *Replay) WrapAPITransport(http.RoundTripper) http.RoundTripper { return replayRT{r} }

type replayRT struct{ r *Replay }

// normalPath is p without the query parameters that differ between runs.
func normalPath(p string) string {
	u, err := url.ParseRequestURI(p)
	if err != nil {
		return p
	}
	q := u.Query()
	q.Del("resourceVersion")
	q.Del("timeoutSeconds")
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// findHTTP takes the entry answering verb and path; again reports an answer repeated.
func (r *Replay) findHTTP(verb, path string) (e Entry, again bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost != nil {
		return Entry{}, false, &remote.TransportError{Host: r.name, Op: "Kubernetes API", Err: r.lost}
	}
	norm := normalPath(path)
	match := []func(Entry) bool{
		func(e Entry) bool { return e.Path == path },
		func(e Entry) bool { return normalPath(e.Path) == norm },
	}
	for _, m := range match {
		for i, e := range r.es {
			if !r.used[i] && e.Op == OpHTTP && e.Verb == verb && m(e) {
				r.used[i] = true
				return e, false, nil
			}
		}
	}
	for _, m := range match {
		for i := len(r.es) - 1; i >= 0; i-- {
			if e := r.es[i]; r.used[i] && e.Op == OpHTTP && e.Verb == verb && m(e) {
				r.repeated++
				return e, true, nil
			}
		}
	}
	r.unanswered = append(r.unanswered, string(OpHTTP)+" "+verb+" "+path)
	return Entry{}, false, errors.New(r.name + ": the transcript has no (further) answer to " + verb + " " + path)
}

func (t replayRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.r
	ctx := req.Context()
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, again, err := r.findHTTP(req.Method, req.URL.RequestURI())
	if err != nil {
		return nil, err
	}
	e = r.shifted(e)
	if r.Rewrite != nil {
		e = r.Rewrite(e)
	}
	if e.Status == 0 {
		return nil, errors.New(e.Err)
	}
	resp := &http.Response{StatusCode: e.Status, Status: http.StatusText(e.Status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Request: req, ContentLength: -1}
	if e.ContentType != "" {
		resp.Header.Set("Content-Type", e.ContentType)
	}
	if !e.Watch {
		var body io.Reader = strings.NewReader(e.Data)
		if e.Err != "" {
			body = io.MultiReader(body, errReader{errors.New(e.Err)})
		}
		resp.Body = io.NopCloser(body)
		resp.ContentLength = int64(len(e.Data))
		return resp, nil
	}
	pr, pw := io.Pipe()
	body := &replayBody{PipeReader: pr, closed: make(chan struct{})}
	resp.Body = body
	go r.stream(ctx, body.closed, pw, e, again)
	return resp, nil
}

// replayBody is a replayed watch's body; Close ends its stream.
type replayBody struct {
	*io.PipeReader
	once   sync.Once
	closed chan struct{}
}

func (b *replayBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.PipeReader.Close()
}

// stream writes a recorded watch's lines at their recorded pace, then ends it as recorded: a
// watch its caller stopped (or one asked again beyond the recording) stays open until ctx
// ends. A closed body stops it (the pipe's write fails).
func (r *Replay) stream(ctx context.Context, closed <-chan struct{}, pw *io.PipeWriter, e Entry, again bool) {
	wait := func() {
		select {
		case <-ctx.Done():
			_ = pw.CloseWithError(ctx.Err())
		case <-closed:
			_ = pw.Close()
		}
	}
	if again {
		wait()
		return
	}
	start := time.Now()
	for i, l := range e.Lines {
		if i < len(e.LineMS) {
			at := start.Add(time.Duration(float64(time.Duration(e.LineMS[i])*time.Millisecond) / r.speed()))
			t := time.NewTimer(time.Until(at))
			select {
			case <-ctx.Done():
				t.Stop()
				_ = pw.CloseWithError(ctx.Err())
				return
			case <-closed:
				t.Stop()
				return
			case <-t.C:
			}
		}
		if _, err := pw.Write([]byte(l + "\n")); err != nil {
			return
		}
	}
	switch {
	case e.Canceled():
		wait()
	case e.Err != "":
		_ = pw.CloseWithError(errors.New(e.Err))
	default:
		_ = pw.Close()
	}
}

var (
	_ remote.APITransportWrapper = (*Recorder)(nil)
	_ remote.APITransportWrapper = (*Replay)(nil)
)
