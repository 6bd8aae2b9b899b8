// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package transcript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
)

// Replay is a remote.Host that answers from a transcript: each call takes the first unused
// entry of its operation with the same command (remote.Cmd.String()) or path, else the first
// with the same command label (arguments such as a lock ID differ between runs). A call the
// transcript cannot answer is an error naming it, and is kept in Unanswered, so that a test
// fails instead of passing on a guess. Files written are kept (Written). Safe for concurrent
// use.
type Replay struct {
	name string
	mu   sync.Mutex
	es   []Entry
	used []bool
	// unanswered are the calls no entry answered, as "op key".
	unanswered []string
	// repeated counts polls answered again with their last answer.
	repeated int
	written  map[string][]byte
	commands int
	done     chan struct{}
	lost     error
	// Secrets answers reads of files recorded as secret (nil: k3s.Masked as the content).
	Secrets  func(path string) []byte
	recorded time.Time
	shift    time.Duration
	// Quiet lists labels of background streams the recorded run may have closed before they
	// started (a watch started and stopped around a fast step): unrecorded, such a stream
	// sends nothing until its context ends, as a watch that saw no event.
	Quiet []string
	// Speed divides the recorded pace of streamed lines (0 or 1: as recorded).
	Speed float64
	// Rewrite, when set, changes each entry as it is taken: what depends on when the replay
	// runs (a host's clock, against which preflight judges skew).
	Rewrite func(Entry) Entry
}

// NewReplay answers as host name from entries. The host's timestamps in what it answers —
// Unix seconds and RFC 3339 times within a day of the recording — are moved by how much later
// than the recording the replay starts, so that judgements of freshness and clock skew see the
// host as the recording run saw it.
func NewReplay(name string, entries []Entry) *Replay {
	r := &Replay{name: name, es: entries, used: make([]bool, len(entries)), written: map[string][]byte{}, done: make(chan struct{})}
	if at := r.hello().AtMS; at > 0 {
		r.recorded = time.UnixMilli(at)
		r.shift = time.Since(r.recorded)
	}
	return r
}

func (r *Replay) hello() Entry {
	for _, e := range r.es {
		if e.Op == OpHello {
			return e
		}
	}
	return Entry{User: "root", Root: true}
}

// Host returns the inventory name.
func (r *Replay) Host() string { return r.name }

// User returns the recorded login user.
func (r *Replay) User() string { return r.hello().User }

// Address returns the recorded address.
func (r *Replay) Address() string { return r.hello().Addr }

// IsRoot returns what was recorded.
func (r *Replay) IsRoot() bool { return r.hello().Root }

// HasSudoPassword returns what was recorded.
func (r *Replay) HasSudoPassword() bool { return r.hello().SudoPassword }

// take finds and marks the entry answering op with key (a command or path) and label, and
// returns it with its timestamps moved and Rewrite applied (outside the lock: Rewrite may call
// Lose).
func (r *Replay) take(op Op, key, label string) (Entry, error) {
	e, err := r.find(op, key, label)
	if err != nil {
		return e, err
	}
	e = r.shifted(e)
	if r.Rewrite != nil {
		e = r.Rewrite(e)
	}
	return e, nil
}

// has reports whether an unused entry answers op with key or label.
func (r *Replay) has(op Op, key, label string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.es {
		if !r.used[i] && e.Op == op && (e.Cmd == key || label != "" && e.Label == label) {
			return true
		}
	}
	return false
}

func (r *Replay) find(op Op, key, label string) (Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost != nil {
		return Entry{}, &remote.TransportError{Host: r.name, Op: string(op), Err: r.lost}
	}
	for pass := 0; pass < 2; pass++ {
		for i, e := range r.es {
			if r.used[i] || e.Op != op {
				continue
			}
			if (pass == 0 && r.keyed(e, key)) || (pass == 1 && label != "" && e.Label == label) {
				r.used[i] = true
				return e, nil
			}
		}
	}
	// A poll asked more often than the recording did (the replay runs at another pace) gets
	// the last answer again: the host's state as last observed.
	if op == OpRun || op == OpReadFile {
		for i := len(r.es) - 1; i >= 0; i-- {
			e := r.es[i]
			if r.used[i] && e.Op == op && r.keyed(e, key) {
				r.repeated++
				return e, nil
			}
		}
	}
	r.unanswered = append(r.unanswered, string(op)+" "+key)
	return Entry{}, fmt.Errorf("%s: the transcript has no (further) answer to %s %s", r.name, op, key)
}

// keyed reports whether e was recorded for key (a command or path), as recorded or with its
// timestamps moved: a name the host made from its clock (a snapshot's, say) and answered
// moved comes back in the calls after it moved.
func (r *Replay) keyed(e Entry, key string) bool {
	return e.Cmd == key || e.Path == key || r.shift != 0 && (e.Cmd != "" && r.shiftText(e.Cmd) == key || e.Path != "" && r.shiftText(e.Path) == key)
}

// Unanswered returns the calls no entry answered, in order.
func (r *Replay) Unanswered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.unanswered...)
}

// Unused returns the entries of op no call took, as "op key" (for http: "http VERB PATH"), in
// order: a test can check that the replay asked everything the recording did.
func (r *Replay) Unused(op Op) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for i, e := range r.es {
		if r.used[i] || e.Op != op {
			continue
		}
		key := e.Cmd + e.Path
		if e.Verb != "" {
			key = e.Verb + " " + e.Path
		}
		out = append(out, string(op)+" "+key)
	}
	return out
}

// Written returns what was written to path (nil when nothing was).
func (r *Replay) Written(path string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written[path]
}

// Lose ends the connection as a host that lost power would: Done closes, Lost returns err and
// every later call fails with a *remote.TransportError.
func (r *Replay) Lose(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost == nil {
		r.lost = err
		close(r.done)
	}
}

func entryErr(e Entry) error {
	if e.Err == "" {
		return nil
	}
	if e.NotExist {
		return fmt.Errorf("%s: %w", e.Err, os.ErrNotExist)
	}
	return errors.New(e.Err)
}

// tail returns the last n lines of s, as remote's Check keeps them.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func (r *Replay) run(ctx context.Context, cmd remote.Cmd) (Entry, *remote.Result, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, nil, err
	}
	if cmd.Stdin != nil {
		_, _ = io.Copy(io.Discard, cmd.Stdin)
	}
	r.mu.Lock()
	r.commands++
	r.mu.Unlock()
	e, err := r.take(OpRun, cmd.String(), cmd.Label)
	if err != nil {
		return e, nil, err
	}
	return e, &remote.Result{Stdout: []byte(e.Stdout), Stderr: []byte(e.Stderr), ExitCode: e.Exit}, entryErr(e)
}

// Run answers from the transcript.
func (r *Replay) Run(ctx context.Context, cmd remote.Cmd) (*remote.Result, error) {
	_, res, err := r.run(ctx, cmd)
	return res, err
}

// Check answers from the transcript; a non-zero exit is a *remote.CommandError.
func (r *Replay) Check(ctx context.Context, cmd remote.Cmd) (*remote.Result, error) {
	_, res, err := r.run(ctx, cmd)
	if err == nil && res.ExitCode != 0 {
		err = &remote.CommandError{Host: r.name, Command: cmd.String(), ExitCode: res.ExitCode, Stderr: tail(string(res.Stderr), 5)}
	}
	return res, err
}

// Stream gives the recorded lines to onLine, then the recorded outcome.
func (r *Replay) Stream(ctx context.Context, cmd remote.Cmd, onLine func(string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	r.commands++
	r.mu.Unlock()
	if slices.Contains(r.Quiet, cmd.Label) && !r.has(OpStream, cmd.String(), cmd.Label) {
		<-ctx.Done()
		return ctx.Err()
	}
	e, err := r.take(OpStream, cmd.String(), cmd.Label)
	if err != nil {
		return err
	}
	start := time.Now()
	for i, l := range e.Lines {
		if i < len(e.LineMS) {
			at := start.Add(time.Duration(float64(time.Duration(e.LineMS[i])*time.Millisecond) / r.speed()))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(at)):
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		onLine(l)
	}
	if e.Canceled() {
		// The recorded stream ran until its caller stopped it: so does this one.
		<-ctx.Done()
		return ctx.Err()
	}
	if e.Exit != 0 {
		return &remote.CommandError{Host: r.name, Command: cmd.String(), ExitCode: e.Exit, Stderr: e.Stderr}
	}
	return entryErr(e)
}

func (r *Replay) read(ctx context.Context, op Op, p string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := r.take(op, p, "")
	if err != nil {
		return nil, err
	}
	if err := entryErr(e); err != nil {
		return nil, err
	}
	if e.Secret && r.Secrets != nil {
		return r.Secrets(p), nil
	}
	return []byte(e.Data), nil
}

// ReadFile answers from the transcript.
func (r *Replay) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return r.read(ctx, OpReadFile, p)
}

// Download answers from the transcript.
func (r *Replay) Download(ctx context.Context, p string) ([]byte, error) {
	return r.read(ctx, OpDownload, p)
}

func (r *Replay) write(ctx context.Context, dst string, rd io.Reader, size int64, progress func(int64)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, rd); err != nil {
		return err
	}
	if int64(b.Len()) != size {
		return fmt.Errorf("%s: write %s: got %d bytes, size says %d", r.name, dst, b.Len(), size)
	}
	e, err := r.take(OpWriteFile, dst, "")
	if err != nil {
		return err
	}
	if err := entryErr(e); err != nil {
		return err
	}
	r.mu.Lock()
	r.written[dst] = b.Bytes()
	r.mu.Unlock()
	if progress != nil {
		progress(size)
	}
	return nil
}

// WriteFile consumes r and keeps the content (Written); the transcript must hold the write.
func (r *Replay) WriteFile(ctx context.Context, dst string, mode os.FileMode, rd io.Reader, size int64, progress func(int64)) error {
	return r.write(ctx, dst, rd, size, progress)
}

// WriteFileResumable is WriteFile from the start.
func (r *Replay) WriteFileResumable(ctx context.Context, dst string, mode os.FileMode, rd io.ReadSeeker, size int64, sum string, progress func(int64)) (remote.Transfer, error) {
	if err := r.write(ctx, dst, rd, size, progress); err != nil {
		return remote.Transfer{}, err
	}
	return remote.Transfer{Sent: size}, nil
}

// FileMethod answers from the transcript (SFTP when it recorded none).
func (r *Replay) FileMethod(ctx context.Context) (remote.FileMethod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.es {
		if e.Op == OpMethod && e.Method != "" {
			return remote.FileMethod(e.Method), nil
		}
	}
	return remote.FileMethodSFTP, nil
}

// DialContext refuses: a replay has no network behind it.
func (r *Replay) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, fmt.Errorf("%s: a transcript replay cannot dial %s", r.name, addr)
}

// Stats counts the commands answered.
func (r *Replay) Stats() remote.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return remote.Stats{Commands: int64(r.commands)}
}

// Done is closed by Lose.
func (r *Replay) Done() <-chan struct{} { return r.done }

// Lost returns Lose's error.
func (r *Replay) Lost() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// Close does nothing (a replay holds no connection).
func (r *Replay) Close() error { return nil }

var _ remote.Host = (*Replay)(nil)

var (
	unixRE    = regexp.MustCompile(`\b1[0-9]{9}\b`)
	rfc3339RE = regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\.[0-9]+)?(Z|[+-][0-2][0-9]:[0-5][0-9])`)
)

// shiftText moves the timestamps in s near the recording by r.shift.
func (r *Replay) shiftText(s string) string {
	if r.shift == 0 || s == "" {
		return s
	}
	near := func(t time.Time) bool { d := t.Sub(r.recorded); return d > -24*time.Hour && d < 24*time.Hour }
	s = unixRE.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil || !near(time.Unix(n, 0)) {
			return m
		}
		return strconv.FormatInt(time.Unix(n, 0).Add(r.shift).Unix(), 10)
	})
	return rfc3339RE.ReplaceAllStringFunc(s, func(m string) string {
		t, err := time.Parse(time.RFC3339Nano, m)
		if err != nil || !near(t) {
			return m
		}
		layout := time.RFC3339
		if strings.Contains(m, ".") {
			layout = time.RFC3339Nano
		}
		t = t.Add(r.shift)
		if strings.HasSuffix(m, "Z") {
			t = t.UTC()
		}
		return t.Format(layout)
	})
}

func (r *Replay) shifted(e Entry) Entry {
	if r.shift == 0 {
		return e
	}
	e.Stdout, e.Stderr = r.shiftText(e.Stdout), r.shiftText(e.Stderr)
	if e.Op != OpDownload { // a file copied off the host is handed over as it was: its checksum is compared with the host's
		e.Data = r.shiftText(e.Data)
	}
	if len(e.Lines) > 0 {
		lines := make([]string, len(e.Lines))
		for i, l := range e.Lines {
			lines[i] = r.shiftText(l)
		}
		e.Lines = lines
	}
	return e
}

func (r *Replay) speed() float64 {
	if r.Speed <= 0 {
		return 1
	}
	return r.Speed
}
