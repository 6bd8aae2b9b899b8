// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

// FileMethod is how a connection moves the content of files to and from its host.
type FileMethod string

const (
	// FileMethodSFTP is the SSH "sftp" subsystem (github.com/pkg/sftp): the default.
	FileMethodSFTP FileMethod = "sftp"
	// FileMethodSession streams the content over SSH exec sessions (`cat >>` into the partial
	// file, `cat` to read) and does the file operations with POSIX sh commands: for hosts
	// without an SFTP subsystem — Dropbear or BusyBox images without sftp-server, OpenSSH
	// with the `Subsystem sftp` line removed by hardening (README "Edge and enterprise hosts"). Uploads stay resumable,
	// checksummed on the host (sha256sum, coreutils or BusyBox) and renamed into place.
	FileMethodSession FileMethod = "session"
)

// ErrNoSFTP is wrapped by the error of starting SFTP on a host that offers no SFTP server: the
// subsystem request was refused, or accepted by a server that then ended the channel without
// answering (Dropbear runs its sftp-server path, which is missing) while commands still run.
var ErrNoSFTP = errors.New("the host offers no SFTP subsystem")

// sftpProbeTimeout bounds the command that tells a host whose SFTP channel ended without an
// answer (no SFTP server) from a link that broke (transient).
const sftpProbeTimeout = 15 * time.Second

// FileMethod returns how this connection moves files: SFTP when the host offers it, else
// FileMethodSession. It is decided once per connection: the first call (or the first file
// operation) starts the SFTP session, and a host that refuses it is remembered as one without
// SFTP. It waits at most DefaultCommandTimeout (a *DeadlineError), until ctx is done or the
// connection closes (a *TransportError: retry after reconnecting).
func (c *Client) FileMethod(parent context.Context) (FileMethod, error) {
	ctx, cancel := context.WithTimeout(parent, DefaultCommandTimeout)
	defer cancel()
	_, err := c.sftpClient(ctx)
	switch {
	case err == nil:
		return FileMethodSFTP, nil
	case errors.Is(err, ErrNoSFTP):
		return FileMethodSession, nil
	case parent.Err() == nil && ctx.Err() != nil:
		return "", &DeadlineError{Host: c.cfg.Host, Command: "starting SFTP", Timeout: DefaultCommandTimeout}
	}
	return "", err
}

// knownMethod is the method decided so far, without waiting: FileMethodSession once the host
// was found without SFTP, else FileMethodSFTP.
func (c *Client) knownMethod() FileMethod {
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	if st := c.sftpSt; st != nil && isClosed(st.done) && st.noSFTP {
		return FileMethodSession
	}
	return FileMethodSFTP
}

// sftpServerMissing reports whether an SFTP start that failed with err (not a refused
// subsystem) met a host without an SFTP server rather than a broken link: the connection is
// open and a command still runs on it.
func (c *Client) sftpServerMissing(err error) bool {
	if c.closed() {
		return false
	}
	// Run also ends when the connection closes.
	res, rerr := c.Run(context.Background(), Command("true").WithTimeout(sftpProbeTimeout))
	ok := rerr == nil && res.ExitCode == 0 && !c.closed()
	if ok {
		c.debug(fmt.Sprintf("sftp start failed (%v) while commands run: no SFTP server, files go over sessions", err))
	} else {
		c.debug(fmt.Sprintf("sftp start failed (%v), and a command too (%v): the link", err, rerr))
	}
	return ok
}

// mkdirAll creates dir and its parents as the login user.
func (c *Client) mkdirAll(ctx context.Context, dir string) error {
	m, err := c.FileMethod(ctx)
	if err != nil {
		return err
	}
	if m == FileMethodSFTP {
		return c.sftpDo(ctx, "creating "+dir, func(sc *sftp.Client) error { return sc.MkdirAll(dir) })
	}
	_, err = c.Check(ctx, Command("mkdir", "-p", "--", dir))
	return err
}

// statScript prints the size of file $1 in bytes, -1 when it does not exist.
const statScript = `if [ -e "$1" ]; then wc -c < "$1"; else echo -1; fi`

// fileSize returns the size of p in bytes as the login user sees it, -1 when it does not
// exist.
func (c *Client) fileSize(ctx context.Context, p string) (int64, error) {
	m, err := c.FileMethod(ctx)
	if err != nil {
		return 0, err
	}
	if m == FileMethodSFTP {
		size := int64(-1)
		err := c.sftpDo(ctx, "looking for "+p, func(sc *sftp.Client) error {
			fi, err := sc.Stat(p)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err == nil {
				size = fi.Size()
			}
			return err
		})
		return size, err
	}
	res, err := c.Check(ctx, Script("look for "+path.Base(p), statScript, p))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: size of %s: unexpected answer %q", c.cfg.Host, p, firstLine(res.Stdout))
	}
	return n, nil
}

// renameScript sets mode $3 on $1 and renames it to $2 (rename(2): atomic on one filesystem).
const renameScript = `chmod "$3" "$1" && mv -f "$1" "$2"`

// chmodRename gives tmp its mode and renames it over dst, as the login user.
func (c *Client) chmodRename(ctx context.Context, tmp, dst string, mode os.FileMode) error {
	m, err := c.FileMethod(ctx)
	if err != nil {
		return err
	}
	if m == FileMethodSFTP {
		err := c.sftpDo(ctx, "chmod "+dst, func(sc *sftp.Client) error { return sc.Chmod(tmp, mode) })
		if err == nil {
			err = c.sftpDo(ctx, "renaming into "+dst, func(sc *sftp.Client) error { return sc.PosixRename(tmp, dst) })
		}
		return err
	}
	_, err = c.Check(ctx, Script("rename into "+dst, renameScript, tmp, dst, fmt.Sprintf("%04o", mode.Perm())))
	return err
}

// sessionSendScript writes standard input into file $1 from byte $2 on: the file is created
// mode 0600 (exclusively when $3 is 1), cut at $2 (dd without conv=notrunc truncates the output
// at its seek offset, GNU and BusyBox alike), and appended to; it then prints the file's size.
// It runs as the login user, like an SFTP server: standard input is the data and nothing else
// (no sudo, no password line). Exit 5: the file could not be created or written.
const sessionSendScript = `f=$1 off=$2 excl=$3
umask 077
if [ "$excl" = 1 ]; then (set -C; : > "$f") || exit 5; elif [ ! -e "$f" ]; then : > "$f" || exit 5; fi
chmod 600 "$f" || exit 5
dd if=/dev/null of="$f" bs=1 seek="$off" 2>/dev/null || exit 5
cat >> "$f" || exit 5
wc -c < "$f"`

// sessionSend is send over an exec session: r streams into the command's standard input. The
// command's deadline is transferTimeout(size); it also ends when ctx is done, the connection
// closes, or no byte moved for StallTimeout (the link is then declared dead and the
// connection closed) — as over SFTP. After the stream it checks that the file holds off plus
// the bytes sent.
func (c *Client) sessionSend(ctx context.Context, p string, excl bool, off, size int64, r io.Reader, progress func(int64)) (int64, error) {
	cr := &countingReader{r: r, progress: progress, add: c.bytesUp.Add, abort: make(chan struct{})}
	cr.touch()
	flag := "0"
	if excl {
		flag = "1"
	}
	cmd := Script("upload "+path.Base(p), sessionSendScript, p, strconv.FormatInt(off, 10), flag).
		WithStdin(cr).WithTimeout(transferTimeout(size - off))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stalled := make(chan error, 1)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		tick := time.NewTicker(min(time.Second, c.cfg.StallTimeout/4+time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-watchDone:
				return
			case <-runCtx.Done():
				cr.stop() // the reader fails from now on: the stream ends at once
				return
			case <-tick.C:
				if idle := time.Since(cr.lastMove()); idle > c.cfg.StallTimeout {
					cr.stop()
					stall := fmt.Errorf("no byte moved for %s: link declared dead", idle.Round(time.Second))
					stalled <- stall
					c.dead(stall)
					return
				}
			}
		}
	}()
	res, err := c.Run(runCtx, cmd)
	select {
	case stall := <-stalled:
		return cr.sent(), &TransportError{Host: c.cfg.Host, Op: "upload " + p, Err: stall}
	default:
	}
	if err != nil {
		if ctx.Err() != nil {
			return cr.sent(), fmt.Errorf("%s: upload: %w", c.cfg.Host, ctx.Err())
		}
		return cr.sent(), err
	}
	if res.ExitCode != 0 {
		return cr.sent(), &CommandError{Host: c.cfg.Host, Command: "upload " + p, ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 3)}
	}
	held, perr := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
	if want := off + cr.sent(); perr != nil || held != want {
		return cr.sent(), &TransportError{Host: c.cfg.Host, Op: "upload " + p,
			Err: fmt.Errorf("the host holds %s bytes of %d after the stream (cut short)", strings.TrimSpace(string(res.Stdout)), want)}
	}
	return cr.sent(), nil
}

// removeCommand removes p as the login user; the session method's remove.
func removeCommand(p string) Cmd { return Command("rm", "-f", "--", p).WithTimeout(cancelGrace) }
