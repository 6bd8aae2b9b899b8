// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package transcript

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/k3s"
)

// Recorder is a remote.Host that passes every call to the host it wraps and writes an Entry
// for it. It is safe for concurrent use (the supervisor's probe streams while steps run).
type Recorder struct {
	h   remote.Host
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	err error
	// open are the API watches still streaming (written as stopped on Close).
	open map[*recordingBody]bool
}

// NewRecorder wraps h, writing its transcript to w; Close closes w too when it is an
// io.Closer. The first entry is the connection's identity.
func NewRecorder(h remote.Host, w io.Writer) *Recorder {
	r := &Recorder{h: h, w: w, enc: json.NewEncoder(w)}
	r.add(Entry{Op: OpHello, AtMS: time.Now().UnixMilli(), Addr: h.Address(), User: h.User(), Root: h.IsRoot(), SudoPassword: h.HasSudoPassword()})
	return r
}

// Host, User, Address, IsRoot, HasSudoPassword, Stats, Done and Lost are the wrapped host's.
func (r *Recorder) Host() string { return r.h.Host() }

// User is the wrapped host's login user.
func (r *Recorder) User() string { return r.h.User() }

// Address is the wrapped host's address.
func (r *Recorder) Address() string { return r.h.Address() }

// IsRoot is the wrapped host's.
func (r *Recorder) IsRoot() bool { return r.h.IsRoot() }

// HasSudoPassword is the wrapped host's.
func (r *Recorder) HasSudoPassword() bool { return r.h.HasSudoPassword() }

// Stats is the wrapped host's.
func (r *Recorder) Stats() remote.Stats { return r.h.Stats() }

// Done is the wrapped host's.
func (r *Recorder) Done() <-chan struct{} { return r.h.Done() }

// Lost is the wrapped host's.
func (r *Recorder) Lost() error { return r.h.Lost() }

// Err returns the first error writing the transcript.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.enc.Encode(e)
	}
}

// watching notes a streamed API answer as open or ended.
func (r *Recorder) watching(b *recordingBody, open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == nil {
		r.open = map[*recordingBody]bool{}
	}
	if open {
		r.open[b] = true
	} else {
		delete(r.open, b)
	}
}

// Close closes the host's connection, then the transcript's writer (writing the API watches
// still open as stopped by their caller).
func (r *Recorder) Close() error {
	r.mu.Lock()
	var open []*recordingBody
	for b := range r.open {
		open = append(open, b)
	}
	r.mu.Unlock()
	for _, b := range open {
		b.finish(context.Canceled)
	}
	err := r.h.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.w.(io.Closer); ok && r.w != nil {
		_ = c.Close()
		r.w = nil
		if r.err == nil {
			r.err = errors.New("transcript closed")
		}
	}
	return err
}

// secretSumRE matches a facts line with the checksum of a file (facts/gather.sh: "sha SUM
// PATH").
var secretSumRE = regexp.MustCompile(`(?m)^sha [0-9a-f]{64} (\S+)$`)

// ZeroSum replaces the checksum of a file holding a credential in a transcript: even a hash
// of a secret is not kept.
const ZeroSum = "0000000000000000000000000000000000000000000000000000000000000000"

// maskSums replaces the checksums of credential files with ZeroSum.
func maskSums(s string) string {
	return secretSumRE.ReplaceAllStringFunc(s, func(m string) string {
		p := secretSumRE.FindStringSubmatch(m)[1]
		if !isSecretPath(p) {
			return m
		}
		return "sha " + ZeroSum + " " + p
	})
}

// maxExpanded bounds a recorded gzip stream once expanded, in bytes.
const maxExpanded = 64 << 20

// expanded returns out expanded when it is a gzip stream (gzip's magic bytes first: the facts
// document comes back compressed where the host has gzip, and facts.Parse reads either), else
// out itself. A transcript holds text: masking needs the text, and JSON keeps only UTF-8 (a
// recording of the compressed bytes held U+FFFD where they were not). A stream that does not
// expand is kept as it came.
func expanded(out []byte) []byte {
	if len(out) < 2 || out[0] != 0x1f || out[1] != 0x8b {
		return out
	}
	zr, err := gzip.NewReader(bytes.NewReader(out))
	if err != nil {
		return out
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxExpanded))
	if err != nil {
		return out
	}
	return b
}

// errText is err's text, masked; "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return k3s.Mask(err.Error())
}

// stdinLen reads nothing: it only reports the length of a stdin whose length is known.
func stdinLen(cmd remote.Cmd) int {
	if l, ok := cmd.Stdin.(interface{ Len() int }); ok {
		return l.Len()
	}
	return 0
}

func cmdEntry(op Op, cmd remote.Cmd) Entry {
	return Entry{Op: op, Cmd: cmd.String(), Label: cmd.Label, StdinBytes: stdinLen(cmd)}
}

// result records a command's result; a non-zero exit is the result, not an error (a replay's
// Check turns it into a *remote.CommandError again).
func (r *Recorder) result(e Entry, res *remote.Result, err error) {
	if res != nil {
		e.Stdout, e.Stderr, e.Exit = maskSums(k3s.Mask(string(expanded(res.Stdout)))), k3s.Mask(string(res.Stderr)), res.ExitCode
	}
	var ce *remote.CommandError
	if !errors.As(err, &ce) {
		e.Err = errText(err)
	}
	r.add(e)
}

// Run records Run.
func (r *Recorder) Run(ctx context.Context, cmd remote.Cmd) (*remote.Result, error) {
	e := cmdEntry(OpRun, cmd)
	res, err := r.h.Run(ctx, cmd)
	r.result(e, res, err)
	return res, err
}

// Check records Check (as a run: a replay turns a non-zero exit into the same error).
func (r *Recorder) Check(ctx context.Context, cmd remote.Cmd) (*remote.Result, error) {
	e := cmdEntry(OpRun, cmd)
	res, err := r.h.Check(ctx, cmd)
	r.result(e, res, err)
	return res, err
}

// Stream records Stream's lines.
func (r *Recorder) Stream(ctx context.Context, cmd remote.Cmd, onLine func(string)) error {
	e := cmdEntry(OpStream, cmd)
	var mu sync.Mutex
	start := time.Now()
	err := r.h.Stream(ctx, cmd, func(l string) {
		mu.Lock()
		e.Lines = append(e.Lines, k3s.Mask(l))
		e.LineMS = append(e.LineMS, time.Since(start).Milliseconds())
		mu.Unlock()
		onLine(l)
	})
	mu.Lock()
	e.Err = errText(err)
	var ce *remote.CommandError
	if errors.As(err, &ce) {
		e.Exit, e.Stderr = ce.ExitCode, k3s.Mask(ce.Stderr)
	}
	mu.Unlock()
	r.add(e)
	return err
}

func (r *Recorder) file(op Op, p string, b []byte, err error) {
	e := Entry{Op: op, Path: p, Err: errText(err), NotExist: errors.Is(err, os.ErrNotExist)}
	if isSecretPath(p) {
		e.Secret = true
		if len(b) > 0 {
			e.Data = k3s.Masked
		}
	} else {
		e.Data = k3s.Mask(string(b))
	}
	r.add(e)
}

// ReadFile records ReadFile.
func (r *Recorder) ReadFile(ctx context.Context, p string) ([]byte, error) {
	b, err := r.h.ReadFile(ctx, p)
	r.file(OpReadFile, p, b, err)
	return b, err
}

// Download records Download.
func (r *Recorder) Download(ctx context.Context, p string) ([]byte, error) {
	b, err := r.h.Download(ctx, p)
	r.file(OpDownload, p, b, err)
	return b, err
}

// WriteFile records the write's path, size and mode (never the content).
func (r *Recorder) WriteFile(ctx context.Context, dst string, mode os.FileMode, rd io.Reader, size int64, progress func(int64)) error {
	err := r.h.WriteFile(ctx, dst, mode, rd, size, progress)
	r.add(Entry{Op: OpWriteFile, Path: dst, Size: size, Mode: mode, Err: errText(err)})
	return err
}

// WriteFileResumable records the write's path, size and mode.
func (r *Recorder) WriteFileResumable(ctx context.Context, dst string, mode os.FileMode, rd io.ReadSeeker, size int64, sum string, progress func(int64)) (remote.Transfer, error) {
	t, err := r.h.WriteFileResumable(ctx, dst, mode, rd, size, sum, progress)
	r.add(Entry{Op: OpWriteFile, Path: dst, Size: size, Mode: mode, Err: errText(err)})
	return t, err
}

// FileMethod records the method.
func (r *Recorder) FileMethod(ctx context.Context) (remote.FileMethod, error) {
	m, err := r.h.FileMethod(ctx)
	r.add(Entry{Op: OpMethod, Method: string(m), Err: errText(err)})
	return m, err
}

// DialContext records the dialled address.
func (r *Recorder) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.h.DialContext(ctx, network, addr)
	r.add(Entry{Op: OpDial, Addr: addr, Err: errText(err)})
	return c, err
}

var _ remote.Host = (*Recorder)(nil)
