// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
)

// errClosed is the cause of operations that found the connection closed.
var errClosed = errors.New("connection closed (link down or keepalives unanswered)")

// sftpStart is one attempt to start the connection's SFTP session; done is closed when it
// succeeded (sc) or failed (err).
type sftpStart struct {
	done chan struct{}
	sc   *sftp.Client
	err  error
	// noSFTP says the host offers no SFTP server (err wraps ErrNoSFTP): remembered for the
	// connection's lifetime, files then go over sessions (FileMethodSession).
	noSFTP bool
}

// sftpClient returns the connection's SFTP session, starting it on first use (and again after
// a start that failed on the link; a host found without SFTP is not asked again: the error
// wraps ErrNoSFTP). It waits at most until ctx is done or the connection closes.
func (c *Client) sftpClient(ctx context.Context) (*sftp.Client, error) {
	c.sftpMu.Lock()
	st := c.sftpSt
	if st == nil || (isClosed(st.done) && st.err != nil && !st.noSFTP) {
		if c.closed() {
			c.sftpMu.Unlock()
			return nil, &TransportError{Host: c.cfg.Host, Op: "starting SFTP", Err: errClosed}
		}
		st = &sftpStart{done: make(chan struct{})}
		c.sftpSt = st
		go c.startSFTP(st)
	}
	c.sftpMu.Unlock()
	select {
	case <-st.done:
		return st.sc, st.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: starting SFTP: %w", c.cfg.Host, ctx.Err())
	case <-c.stop:
		return nil, &TransportError{Host: c.cfg.Host, Op: "starting SFTP", Err: errClosed}
	}
}

func (c *Client) startSFTP(st *sftpStart) {
	defer close(st.done)
	// The SFTP channel holds a session slot for the connection's lifetime.
	select {
	case c.sessions <- struct{}{}:
	case <-c.stop:
		st.err = &TransportError{Host: c.cfg.Host, Op: "starting SFTP", Err: errClosed}
		return
	}
	c.waitQuiet(context.Background())
	sc, err := sftp.NewClient(c.conn, sftp.UseConcurrentWrites(true))
	if err != nil {
		c.release()
		c.closedEarly()
		// A refused subsystem is the host's configuration, and so is a channel the host ended
		// without an SFTP answer while commands still run (Dropbear without sftp-server): the
		// connection uses sessions for files from now on. Anything else (a channel open that
		// got no proper answer, EOF on a broken link) is the link, worth a retry after
		// reconnecting.
		if !c.closed() && (strings.Contains(err.Error(), "subsystem request failed") || c.sftpServerMissing(err)) {
			st.noSFTP = true
			st.err = fmt.Errorf("%s: starting SFTP: %w (%v)", c.cfg.Host, ErrNoSFTP, err)
		} else {
			st.err = &TransportError{Host: c.cfg.Host, Op: "starting SFTP", Err: err}
		}
		return
	}
	c.sftps.Add(1)
	st.sc = sc
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// connLost reports whether err means the connection under an SFTP request is gone.
func (c *Client) connLost(err error) bool {
	return c.closed() || errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// sftpDo runs one SFTP operation, waiting at most until ctx is done, the connection closes
// (an operation stuck on a dead link ends when the keepalive closes the connection) or
// DefaultCommandTimeout passed (a *DeadlineError: the host answers keepalives, but not this).
func (c *Client) sftpDo(parent context.Context, op string, fn func(*sftp.Client) error) error {
	return c.sftpDoWithin(parent, DefaultCommandTimeout, op, fn)
}

// sftpDoWithin is sftpDo with the operation's deadline.
func (c *Client) sftpDoWithin(parent context.Context, timeout time.Duration, op string, fn func(*sftp.Client) error) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	sc, err := c.sftpClient(ctx)
	if err != nil {
		if parent.Err() == nil && ctx.Err() != nil {
			return &DeadlineError{Host: c.cfg.Host, Command: "starting SFTP", Timeout: timeout}
		}
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn(sc) }()
	select {
	case err := <-done:
		switch {
		case err == nil:
			return nil
		case c.connLost(err):
			return &TransportError{Host: c.cfg.Host, Op: op, Err: err}
		default:
			return fmt.Errorf("%s: %s: %w", c.cfg.Host, op, err)
		}
	case <-ctx.Done():
		if parent.Err() == nil {
			return &DeadlineError{Host: c.cfg.Host, Command: op, Timeout: timeout}
		}
		return fmt.Errorf("%s: %s: %w", c.cfg.Host, op, parent.Err())
	case <-c.stop:
		if parent.Err() != nil {
			return fmt.Errorf("%s: %s: %w", c.cfg.Host, op, parent.Err())
		}
		return &TransportError{Host: c.cfg.Host, Op: op, Err: c.closedCause()}
	}
}

// removeQuietly removes a temporary file, best effort and briefly: never on a closed
// connection, never longer than cancelGrace.
func (c *Client) removeQuietly(p string) {
	if c.closed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	if c.knownMethod() == FileMethodSession {
		_, _ = c.Run(ctx, removeCommand(p))
		return
	}
	_ = c.sftpDo(ctx, "removing "+p, func(sc *sftp.Client) error { return sc.Remove(p) })
}

// installScript moves a staged file into place as root: create the target's directory,
// copy it next to the target owned by root with the mode (cp, chown, chmod: BusyBox builds may
// lack install(1)), then rename over it (atomic on the target's filesystem), and remove the
// staged copy.
const installScript = `set -e
src=$1 dst=$2 mode=$3
mkdir -p "$(dirname "$dst")"
tmp="$dst.k3strap-tmp"
rm -f "$tmp"
{ cp "$src" "$tmp" && chown root:root "$tmp" && chmod "$mode" "$tmp"; } || { rm -f "$tmp"; exit 1; }
mv -f "$tmp" "$dst"
rm -f "$src"`

// WriteFile writes r (size bytes, for progress; 0 if unknown) to path on the host with mode,
// atomically: readers see the old content or the new one, never a half-written file. Files are
// owned by root. As root the file goes (over SFTP, or a session on a host without SFTP: see
// FileMethod) into a temporary name next to path and is renamed over it; otherwise it is
// staged in /var/tmp as the login user and moved into place with sudo. progress
// (may be nil) is called with the bytes sent so far. The context cancels the transfer (the
// temporary file is removed when the link still works; path is untouched). For large files
// use WriteFileResumable.
func (c *Client) WriteFile(ctx context.Context, dst string, mode os.FileMode, r io.Reader, size int64, progress func(sent int64)) error {
	c.debug(fmt.Sprintf("write %s (mode %04o, %d bytes)", dst, mode.Perm(), size))
	c.transfers.Add(1)
	suffix := randHex(6)
	var tmp string
	dir := path.Dir(dst)
	if c.isRoot {
		if err := c.mkdirAll(ctx, dir); err != nil {
			return c.explainWrite(ctx, writeNeed{dir: dir, need: size}, err)
		}
		tmp = path.Join(dir, "."+path.Base(dst)+".k3strap-"+suffix)
	} else {
		tmp = path.Join(StagingDir, ".k3strap-upload-"+suffix)
	}
	if _, err := c.send(ctx, tmp, true, 0, size, r, progress); err != nil {
		c.removeQuietly(tmp)
		return c.explainWrite(ctx, writeNeed{dir: path.Dir(tmp), need: size}, err)
	}
	if c.isRoot {
		err := c.chmodRename(ctx, tmp, dst, mode)
		if err != nil {
			c.removeQuietly(tmp)
		}
		return err
	}
	cmd := Script("install file", installScript, tmp, dst, fmt.Sprintf("%04o", mode.Perm())).AsRoot()
	if _, err := c.Check(ctx, cmd); err != nil {
		c.removeQuietly(tmp)
		return c.explainWrite(ctx, writeNeed{dir: dir, need: size, asRoot: true}, fmt.Errorf("moving %s into place: %w", dst, err))
	}
	return nil
}

// StagingDir is where a login user other than root uploads a file before it is moved into
// place as root (SFTP, and the session that streams a file on a host without SFTP, run as the
// login user).
const StagingDir = "/var/tmp"

// Transfer says what one WriteFileResumable call did.
type Transfer struct {
	// Resumed is the offset the upload continued from: the bytes the host already held from
	// an interrupted upload of the same content, verified by checksum. 0 for a fresh start.
	Resumed int64
	// Sent is the payload this call sent (also counted in Stats.BytesUploaded).
	Sent int64
}

// partialPrefix is the name prefix of the partial file of an upload to dst: next to dst as
// root (".NAME.k3strap-part-"), in /var/tmp otherwise (one per destination).
func (c *Client) partialPrefix(dst string) string {
	if c.isRoot {
		return path.Join(path.Dir(dst), "."+path.Base(dst)+".k3strap-part-")
	}
	h := sha256.Sum256([]byte(dst))
	return StagingDir + "/.k3strap-part-" + hex.EncodeToString(h[:6]) + "-"
}

// blockSumsScript checks the first $4 bytes of file $1 against the sha256 $5 and prints "all"
// when they match (the usual case: one pass, one process); otherwise it prints the sha256 of
// each of the first $3 blocks of $2 bytes.
const blockSumsScript = `f=$1 bs=$2 n=$3 len=$4 want=$5 i=0
if [ "$(head -c "$len" "$f" | sha256sum | cut -c1-64)" = "$want" ]; then echo all; exit 0; fi
while [ "$i" -lt "$n" ]; do
  dd if="$f" bs="$bs" skip="$i" count=1 2>/dev/null | sha256sum | cut -c1-64
  i=$((i + 1))
done`

// finishScript copies an uploaded partial file into a fresh file next to the target, verifies
// the copy against its sha256, moves it into place as root with its mode (rename: atomic), and
// removes every partial or temporary file k3strap left for this target (older random names
// included). The copy matters: an SFTP server of a connection that died on our side may still
// hold the partial file open for writing (sshd has not noticed yet), and a binary renamed from
// it could not be executed ("Text file busy"). Exit 3: the checksum did not match (the partial
// file is removed); exit 4: the copy failed (no space: the copy is removed, the partial file
// stays for a later attempt).
const finishScript = `set -e
src=$1 dst=$2 mode=$3 sum=$4 stage=$5
d=$(dirname "$dst") b=$(basename "$dst")
mkdir -p "$d"
tmp="$d/.$b.k3strap-tmp"
rm -f "$tmp"
if ! cp "$src" "$tmp"; then rm -f "$tmp"; exit 4; fi
if [ "$(sha256sum < "$tmp" | cut -c1-64)" != "$sum" ]; then
  rm -f "$tmp" "$src"; echo "uploaded file does not match its sha256" >&2; exit 3
fi
chown root:root "$tmp"; chmod "$mode" "$tmp"; mv -f "$tmp" "$dst"
rm -f "$d/.$b".k3strap-* "$dst.k3strap-tmp"
if [ -n "$stage" ]; then rm -f "$stage"*; fi`

// resumeBlock is the block size for verifying a partial upload: 256 KiB (what a dropped link
// may cost on top of the bytes in flight), larger for files over 256 MiB so that at most 1024
// blocks are checked.
func resumeBlock(size int64) int64 {
	const unit = 256 << 10
	bs := int64(unit)
	if size > 1024*unit {
		bs = (size/1024 + unit - 1) / unit * unit
	}
	return bs
}

// WriteFileResumable writes a large file to dst with mode, like WriteFile, but so that an
// interrupted upload continues where it stopped: the content goes into a partial file whose
// name depends on dst and sum (the hex sha256 of the content), which a later call — after a
// reconnect, or in a later run — finds; the blocks the host already holds are verified against
// r by sha256 and only the rest is sent. The whole file's sha256 is then checked on the host
// before it is renamed into place (atomic), and stale partial and temporary files of k3strap's
// for dst are removed. progress (may be nil) is called with the position in the file.
//
// The upload ends with a *TransportError when the connection drops, or when no byte moves for
// Config.StallTimeout (the connection is then closed as dead); the partial file stays for the
// next attempt.
func (c *Client) WriteFileResumable(ctx context.Context, dst string, mode os.FileMode, r io.ReadSeeker, size int64, sum string, progress func(pos int64)) (Transfer, error) {
	var tr Transfer
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return tr, fmt.Errorf("%s: upload %s: %q is not a sha256", c.cfg.Host, dst, sum)
	}
	c.debug(fmt.Sprintf("upload %s (mode %04o, %d bytes, sha256 %.12s, resumable)", dst, mode.Perm(), size, sum))
	c.transfers.Add(1)
	prefix := c.partialPrefix(dst)
	part := prefix + sum[:16]
	dir := path.Dir(dst)
	// need is what the upload takes on the target's filesystem as root: the partial file and
	// the copy the finishing step makes of it; otherwise the partial file is staged elsewhere.
	need, what := size, ""
	if c.isRoot {
		need, what = 2*size, FormatBytes(size)+" uploaded, then copied into place"
		if err := c.mkdirAll(ctx, dir); err != nil {
			return tr, c.explainWrite(ctx, writeNeed{dir: dir, need: need, what: what}, err)
		}
	}
	// held is the size of the partial file the host holds, -1 when there is none: an empty
	// partial file of an empty content is complete, a missing one still has to be created.
	held, err := c.fileSize(ctx, part)
	if err != nil {
		return tr, err
	}
	if held > 0 {
		off, err := c.verifiedPrefix(ctx, part, min(held, size), r, size)
		if err != nil {
			return tr, err
		}
		tr.Resumed = off
	}
	if tr.Resumed < size || held != size {
		pos := func(sent int64) {
			if progress != nil {
				progress(tr.Resumed + sent)
			}
		}
		if _, err := r.Seek(tr.Resumed, io.SeekStart); err != nil {
			return tr, fmt.Errorf("%s: upload %s: %w", c.cfg.Host, dst, err)
		}
		tr.Sent, err = c.send(ctx, part, false, tr.Resumed, size, r, pos)
		if err != nil {
			if IsTransient(err) || ctx.Err() != nil {
				return tr, err // the partial file stays for the next attempt
			}
			// The host refused the write (SFTP's bare "Failure"): leave nothing half-written
			// behind, then ask the host why.
			c.removeQuietly(part)
			return tr, c.explainWrite(ctx, writeNeed{dir: path.Dir(part), need: need, what: what}, err)
		}
	}
	stage := ""
	if !c.isRoot {
		stage = prefix
	}
	res, err := c.Run(ctx, Script("install file", finishScript, part, dst, fmt.Sprintf("%04o", mode.Perm()), sum, stage).AsRoot().WithTimeout(finishTimeout(size)))
	if err != nil {
		return tr, err
	}
	switch {
	case res.ExitCode == 3:
		return tr, &TransportError{Host: c.cfg.Host, Op: "upload " + dst, Err: errors.New("the uploaded file does not match its sha256 (corrupted in transit); it was removed and is sent again")}
	case res.ExitCode == 4:
		cerr := &CommandError{Host: c.cfg.Host, Command: "install " + dst, ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 5)}
		werr := c.explainWrite(ctx, writeNeed{dir: dir, need: size, asRoot: true, what: "the copy put into place"}, cerr)
		var we *WriteError
		if errors.As(werr, &we) {
			c.removeQuietly(part)
		}
		return tr, werr
	case res.ExitCode != 0:
		return tr, &CommandError{Host: c.cfg.Host, Command: "install " + dst, ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 5)}
	}
	return tr, nil
}

// verifiedPrefix returns how many leading bytes of the partial file part (holding at least
// held bytes) equal r's, in whole blocks, comparing per-block sha256 computed on the host with
// r's. Concurrent SFTP writes may leave holes before the last byte written; a hole's block
// does not match and the upload resumes there.
func (c *Client) verifiedPrefix(ctx context.Context, part string, held int64, r io.ReadSeeker, size int64) (int64, error) {
	bs := resumeBlock(size)
	n := held / bs
	if held == size && size%bs != 0 {
		n++ // the last, short block
	}
	if n == 0 {
		return 0, nil
	}
	length := min(n*bs, size)
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	h := sha256.New()
	if _, err := io.CopyN(h, r, length); err != nil {
		return 0, err
	}
	res, err := c.Check(ctx, Script("check partial upload", blockSumsScript, part, strconv.FormatInt(bs, 10),
		strconv.FormatInt(n, 10), strconv.FormatInt(length, 10), hex.EncodeToString(h.Sum(nil))).WithTimeout(finishTimeout(length)))
	if err != nil {
		return 0, err
	}
	remote := strings.Fields(string(res.Stdout))
	if len(remote) == 1 && remote[0] == "all" {
		return length, nil
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	var off int64
	for i := int64(0); i < n && i < int64(len(remote)); i++ {
		h := sha256.New()
		k, err := io.CopyN(h, r, bs)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if hex.EncodeToString(h.Sum(nil)) != remote[i] {
			break
		}
		off += k
	}
	return off, nil
}

// sendConcurrency is the number of SFTP write requests (32 KiB each) in flight: 512 KiB, ~5 MB/s
// at 100 ms round trips, and at most what a link that dies mid-upload costs again on resuming.
const sendConcurrency = 16

// send writes r (size bytes in all, from its start; for the deadline of a session stream)
// into the remote file p (created mode 0600 — exclusively when excl —, else opened) from
// offset off (the file is truncated there first), over SFTP or a session (FileMethod), and
// returns the bytes sent. It ends when r is exhausted, ctx is done, the connection closes, or
// no byte moved for StallTimeout (the link is then declared dead and the connection closed).
// A write blocked on a dead link is left to end with the connection, never waited for.
func (c *Client) send(ctx context.Context, p string, excl bool, off, size int64, r io.Reader, progress func(int64)) (int64, error) {
	m, err := c.FileMethod(ctx)
	if err != nil {
		return 0, err
	}
	if m == FileMethodSession {
		return c.sessionSend(ctx, p, excl, off, size, r, progress)
	}
	flags := os.O_WRONLY | os.O_CREATE
	if excl {
		flags |= os.O_EXCL
	}
	var f *sftp.File
	err = c.sftpDo(ctx, "creating "+p, func(sc *sftp.Client) error {
		var err error
		if f, err = sc.OpenFile(p, flags); err != nil {
			return err
		}
		if err = f.Chmod(0o600); err == nil {
			err = f.Truncate(off)
		}
		if err != nil {
			_ = f.Close()
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		go func() { _ = f.Close() }()
		return 0, fmt.Errorf("%s: %s: %w", c.cfg.Host, p, err)
	}
	cr := &countingReader{r: r, progress: progress, add: c.bytesUp.Add, abort: make(chan struct{})}
	cr.touch()
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := f.ReadFromWithConcurrency(cr, sendConcurrency)
		if err == nil {
			err = f.Close()
		} else {
			_ = f.Close()
		}
		done <- result{n, err}
	}()
	tick := time.NewTicker(min(time.Second, c.cfg.StallTimeout/4+time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			switch {
			case res.err == nil:
				return cr.sent(), nil
			case c.connLost(res.err):
				return cr.sent(), &TransportError{Host: c.cfg.Host, Op: "upload " + p, Err: res.err}
			default:
				return cr.sent(), fmt.Errorf("%s: uploading %s: %w", c.cfg.Host, p, res.err)
			}
		case <-ctx.Done():
			// The reader fails from now on; on a working link the transfer ends at once.
			cr.stop()
			select {
			case <-done:
			case <-c.stop:
			case <-time.After(cancelGrace):
			}
			return cr.sent(), fmt.Errorf("%s: upload: %w", c.cfg.Host, ctx.Err())
		case <-c.stop:
			cr.stop()
			if ctx.Err() != nil {
				return cr.sent(), fmt.Errorf("%s: upload: %w", c.cfg.Host, ctx.Err())
			}
			return cr.sent(), &TransportError{Host: c.cfg.Host, Op: "upload " + p, Err: c.closedCause()}
		case <-tick.C:
			if idle := time.Since(cr.lastMove()); idle > c.cfg.StallTimeout {
				cr.stop()
				stall := fmt.Errorf("no byte moved for %s: link declared dead", idle.Round(time.Second))
				c.dead(stall)
				return cr.sent(), &TransportError{Host: c.cfg.Host, Op: "upload " + p, Err: stall}
			}
		}
	}
}

// ReadFile returns the content of path on the host, read as root. A missing file gives an
// error wrapping os.ErrNotExist. The content may be secret: it is never logged here.
func (c *Client) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return c.readFile(ctx, p, 0)
}

// readFile is ReadFile within timeout (0: DefaultCommandTimeout).
func (c *Client) readFile(ctx context.Context, p string, timeout time.Duration) ([]byte, error) {
	res, err := c.Run(ctx, Command("cat", "--", p).AsRoot().WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	b, err := catResult(c.cfg.Host, p, res)
	if err == nil {
		c.transfers.Add(1)
	}
	return b, err
}

// countingReader feeds an upload: it counts and reports the bytes, records when the transfer
// last moved (SFTP reads the next chunk only when a write was acknowledged), and fails once
// stopped.
type countingReader struct {
	r        io.Reader
	n        atomic.Int64
	last     atomic.Int64
	progress func(int64)
	add      func(int64) int64
	abort    chan struct{}
	once     atomic.Bool
}

var errUploadStopped = errors.New("upload stopped")

func (cr *countingReader) Read(p []byte) (int, error) {
	select {
	case <-cr.abort:
		return 0, errUploadStopped
	default:
	}
	cr.touch()
	n, err := cr.r.Read(p)
	if n > 0 {
		total := cr.n.Add(int64(n))
		cr.add(int64(n))
		if cr.progress != nil {
			cr.progress(total)
		}
	}
	return n, err
}

func (cr *countingReader) touch()              { cr.last.Store(time.Now().UnixNano()) }
func (cr *countingReader) lastMove() time.Time { return time.Unix(0, cr.last.Load()) }
func (cr *countingReader) sent() int64         { return cr.n.Load() }

func (cr *countingReader) stop() {
	if cr.once.CompareAndSwap(false, true) {
		close(cr.abort)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
