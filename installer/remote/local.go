// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3strap/k3strap/inventory"
)

// FileMethodLocal is how files reach a host in local mode: written directly (or, for a login
// user other than root, staged and moved into place with sudo), no transfer.
const FileMethodLocal FileMethod = "local"

// LocalConfig describes the machine k3strap runs on as a host (inventory connection: local;
// docs/edge-first-boot.md).
type LocalConfig struct {
	// Host is the inventory name; Address the host's inventory address (what Address reports
	// with port 0, for the steps that match a node by address).
	Host, Address string
	// SudoPassword is given to sudo on stdin when the user is not root (as over SSH).
	SudoPassword inventory.Secret
	// Debug, when not nil, gets each command line (never secrets) — the same as over SSH.
	Debug func(msg string)
}

// Local is the host seam on the machine k3strap runs on: commands run through /bin/sh with the
// same quoting and the same privilege rules as over SSH (Cmd's line: root runs them as they
// are, another user through `sudo -n`, or `sudo -S` with the password on stdin), files are
// written atomically (a temporary file beside the target, renamed), DialContext is a plain
// net.Dialer. There is no link to lose: Done closes only on Close and Lost is nil.
type Local struct {
	cfg    LocalConfig
	user   string
	isRoot bool
	// noSudoPassword: sudo needs no password here, so the one given is never sent (CheckSudo).
	noSudoPassword atomic.Bool

	commands, transfers, uploaded atomic.Int64

	stop      chan struct{}
	closeOnce sync.Once
}

var _ Host = (*Local)(nil)

// NewLocal returns the machine k3strap runs on as a host. It fails when /bin/sh is missing.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		return nil, fmt.Errorf("%s: local mode runs commands through /bin/sh: %w", cfg.Host, err)
	}
	name := "root"
	uid := os.Geteuid()
	if u, err := user.Current(); err == nil {
		name = u.Username
	} else if uid != 0 {
		name = fmt.Sprintf("uid %d", uid)
	}
	return &Local{cfg: cfg, user: name, isRoot: uid == 0, stop: make(chan struct{})}, nil
}

// Host returns the inventory name.
func (l *Local) Host() string { return l.cfg.Host }

// User returns the user k3strap runs as.
func (l *Local) User() string { return l.user }

// Address returns the host's inventory address with port 0: nothing is dialed.
func (l *Local) Address() string { return net.JoinHostPort(l.cfg.Address, "0") }

// IsRoot reports whether k3strap runs as root.
func (l *Local) IsRoot() bool { return l.isRoot }

// HasSudoPassword reports whether sudo gets a password.
func (l *Local) HasSudoPassword() bool {
	return !l.isRoot && l.cfg.SudoPassword != "" && !l.noSudoPassword.Load()
}

func (l *Local) skipSudoPassword() { l.noSudoPassword.Store(true) }

// Stats reports the commands run and the files written (BytesUploaded: bytes written).
func (l *Local) Stats() Stats {
	return Stats{Commands: l.commands.Load(), FileTransfers: l.transfers.Load(), BytesUploaded: l.uploaded.Load()}
}

// Done is closed by Close.
func (l *Local) Done() <-chan struct{} { return l.stop }

// Lost is always nil: a local host is never lost.
func (l *Local) Lost() error { return nil }

// Close ends the host; commands still running are not stopped (their contexts do that).
func (l *Local) Close() error {
	l.closeOnce.Do(func() { close(l.stop) })
	return nil
}

// FileMethod returns FileMethodLocal.
func (l *Local) FileMethod(context.Context) (FileMethod, error) { return FileMethodLocal, nil }

// DialContext dials addr from this machine.
func (l *Local) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (l *Local) become() become {
	switch {
	case l.isRoot:
		return becomeNone
	case l.HasSudoPassword():
		return becomeSudoPass
	default:
		return becomeSudoN
	}
}

// Run runs cmd through /bin/sh and waits for it, at most cmd.Timeout (DefaultCommandTimeout
// when unset); errors as Client.Run: cancellation, *DeadlineError, ErrSudoPassword, and a
// command that could not be started.
func (l *Local) Run(ctx context.Context, cmd Cmd) (*Result, error) {
	return runResult(ctx, l.run, l.cfg.Host, l.user, cmd)
}

// Check is Run with a non-zero exit turned into a *CommandError.
func (l *Local) Check(ctx context.Context, cmd Cmd) (*Result, error) {
	res, err := l.Run(ctx, cmd)
	return checked(l.cfg.Host, cmd, res, err)
}

// Stream runs cmd and calls onLine for each line of its standard output (see Client.Stream).
func (l *Local) Stream(ctx context.Context, cmd Cmd, onLine func(string)) error {
	return streamLines(ctx, l.run, l.cfg.Host, cmd, onLine)
}

// run runs cmd's line under /bin/sh -c in its own process group; a cancelled or timed-out
// command's group gets SIGTERM, then SIGKILL after cancelGrace.
func (l *Local) run(parent context.Context, cmd Cmd, stream bool, stdout, stderr io.Writer) (int, error) {
	ctx := parent
	timeout := commandTimeout(parent, cmd, stream)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, timeout)
		defer cancel()
	}
	if l.cfg.Debug != nil {
		l.cfg.Debug(cmd.String())
	}
	line, in := cmd.sent(l.become(), l.cfg.SudoPassword.Reveal)
	c := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	c.Stdout, c.Stderr = stdout, stderr
	if in != nil {
		// Through a pipe that Wait closes once the process exited, never as c.Stdin: exec's own
		// copy of a reader that is not a file is waited for after the exit, and a reader that
		// blocks until its writer is done (the supervisor's naps for the probe) then never lets
		// Wait return. The copy ends with the pipe's close or the reader's end.
		w, err := c.StdinPipe()
		if err != nil {
			return 0, fmt.Errorf("%s: starting %s: %w", l.cfg.Host, cmd.name(), err)
		}
		go func() {
			_, _ = io.Copy(w, in)
			_ = w.Close()
		}()
	}
	c.Env = append(os.Environ(), "LC_ALL=C")
	processGroup(c)
	c.WaitDelay = cancelGrace
	l.commands.Add(1)
	err := c.Run()
	if ctx.Err() != nil {
		if parent.Err() == nil && timeout > 0 {
			return 0, &DeadlineError{Host: l.cfg.Host, Command: cmd.name(), Timeout: timeout}
		}
		if errors.Is(parent.Err(), context.Canceled) {
			return 0, fmt.Errorf("%s: %s: %w", l.cfg.Host, cmd.name(), cancelled(parent))
		}
		return 0, fmt.Errorf("%s: %s: %w", l.cfg.Host, cmd.name(), parent.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ee.ExitCode() < 0 { // ended by a signal
			return -1, nil
		}
		return ee.ExitCode(), nil
	default:
		return 0, fmt.Errorf("%s: starting %s: %w", l.cfg.Host, cmd.name(), err)
	}
}

// ReadFile reads p as root (directly when k3strap is root, else through sudo cat); a missing
// file wraps os.ErrNotExist. The content is never logged.
func (l *Local) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return l.readFile(ctx, p, 0)
}

// Download is ReadFile within DownloadTimeout.
func (l *Local) Download(ctx context.Context, p string) ([]byte, error) {
	return l.readFile(ctx, p, DownloadTimeout)
}

func (l *Local) readFile(ctx context.Context, p string, timeout time.Duration) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", l.cfg.Host, p, err)
	}
	if l.isRoot {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %s: %w", l.cfg.Host, p, os.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.cfg.Host, err)
		}
		l.transfers.Add(1)
		return b, nil
	}
	res, err := l.Run(ctx, Command("cat", "--", p).AsRoot().WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	b, err := catResult(l.cfg.Host, p, res)
	if err == nil {
		l.transfers.Add(1)
	}
	return b, err
}

// WriteFile writes r to dst with mode atomically: as root into a temporary file beside dst,
// synced and renamed over it; as another user staged in StagingDir and moved into place with
// sudo (installScript, as over SSH). progress gets the bytes written so far.
func (l *Local) WriteFile(ctx context.Context, dst string, mode os.FileMode, r io.Reader, size int64, progress func(sent int64)) error {
	_, err := l.write(ctx, dst, mode, r, progress)
	return err
}

// WriteFileResumable is WriteFile with the content checked against sum (hex sha256) before it
// replaces dst: locally there is no link to lose, so there is nothing to resume.
func (l *Local) WriteFileResumable(ctx context.Context, dst string, mode os.FileMode, r io.ReadSeeker, size int64, sum string, progress func(pos int64)) (Transfer, error) {
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return Transfer{}, fmt.Errorf("%s: write %s: %q is not a sha256", l.cfg.Host, dst, sum)
	}
	n, err := l.write(ctx, dst, mode, r, progress, sum)
	return Transfer{Sent: n}, err
}

// write is WriteFile; with a sum the content must match it or dst is left untouched.
func (l *Local) write(ctx context.Context, dst string, mode os.FileMode, r io.Reader, progress func(int64), sum ...string) (int64, error) {
	if l.cfg.Debug != nil {
		l.cfg.Debug(fmt.Sprintf("write %s (mode %04o)", dst, mode.Perm()))
	}
	l.transfers.Add(1)
	dir := filepath.Dir(dst)
	if !l.isRoot {
		dir = StagingDir
	} else if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, fmt.Errorf("%s: write %s: %w", l.cfg.Host, dst, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".k3strap-")
	if err != nil {
		return 0, fmt.Errorf("%s: write %s: %w", l.cfg.Host, dst, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), &ctxReader{ctx: ctx, r: r, progress: progress})
	l.uploaded.Add(n)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Chmod(mode.Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("%s: write %s: %w", l.cfg.Host, dst, err)
	}
	if len(sum) > 0 && hex.EncodeToString(h.Sum(nil)) != sum[0] {
		return n, fmt.Errorf("%s: write %s: the content does not match its sha256 %.12s", l.cfg.Host, dst, sum[0])
	}
	if l.isRoot {
		if err := os.Rename(tmp.Name(), dst); err != nil {
			return n, fmt.Errorf("%s: write %s: %w", l.cfg.Host, dst, err)
		}
		return n, nil
	}
	cmd := Script("install file", installScript, tmp.Name(), dst, fmt.Sprintf("%04o", mode.Perm())).AsRoot()
	if _, err := l.Check(ctx, cmd); err != nil {
		return n, fmt.Errorf("moving %s into place: %w", dst, err)
	}
	return n, nil
}

// ctxReader ends a copy when ctx ends and reports progress.
type ctxReader struct {
	ctx      context.Context
	r        io.Reader
	n        int64
	progress func(int64)
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && n > 0 {
		c.progress(c.n)
	}
	return n, err
}
