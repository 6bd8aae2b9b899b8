package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/pkg/sftp"
)

// sftpClient opens the one SFTP session of this connection on first use.
func (c *Client) sftpClient() (*sftp.Client, error) {
	c.sftpOnce.Do(func() {
		// The SFTP channel holds a session slot for the connection's lifetime.
		select {
		case c.sessions <- struct{}{}:
		case <-c.stop:
			c.sftpErr = errors.New("connection closed")
			return
		}
		c.sftp, c.sftpErr = sftp.NewClient(c.conn, sftp.UseConcurrentWrites(true))
		if c.sftpErr == nil {
			c.sftps.Add(1)
		} else {
			c.release()
			c.sftpErr = fmt.Errorf("%s: starting SFTP (is the sftp subsystem enabled in sshd_config?): %w", c.cfg.Host, c.sftpErr)
		}
	})
	return c.sftp, c.sftpErr
}

// installScript moves a staged file into place as root: create the target's directory,
// install with the mode next to the target, then rename over it (atomic on the target's
// filesystem), and remove the staged copy.
const installScript = `set -e
src=$1 dst=$2 mode=$3
mkdir -p "$(dirname "$dst")"
tmp="$dst.k3strap-tmp"
install -m "$mode" -o root -g root "$src" "$tmp"
mv -f "$tmp" "$dst"
rm -f "$src"`

// WriteFile writes r (size bytes, for progress; 0 if unknown) to path on the host with mode,
// atomically: readers see the old content or the new one, never a half-written file. Files are
// owned by root. As root the file goes over SFTP into a temporary name next to path and is
// renamed over it; otherwise it is staged in /var/tmp and moved into place with sudo. progress
// (may be nil) is called with the bytes sent so far. The context cancels the transfer (the
// temporary file is removed; path is untouched).
func (c *Client) WriteFile(ctx context.Context, dst string, mode os.FileMode, r io.Reader, size int64, progress func(sent int64)) error {
	sc, err := c.sftpClient()
	if err != nil {
		return err
	}
	c.transfers.Add(1)
	suffix := randHex(6)
	var tmp string
	if c.isRoot {
		if err := sc.MkdirAll(path.Dir(dst)); err != nil {
			return fmt.Errorf("%s: creating %s: %w", c.cfg.Host, path.Dir(dst), err)
		}
		tmp = path.Join(path.Dir(dst), "."+path.Base(dst)+".k3strap-"+suffix)
	} else {
		tmp = "/var/tmp/.k3strap-upload-" + suffix
	}
	if err := c.upload(ctx, sc, tmp, r, progress); err != nil {
		_ = sc.Remove(tmp)
		if c.closed() {
			return &TransportError{Host: c.cfg.Host, Op: "upload " + dst, Err: err}
		}
		return err
	}
	if c.isRoot {
		if err := sc.Chmod(tmp, mode); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("%s: chmod %s: %w", c.cfg.Host, dst, err)
		}
		if err := sc.PosixRename(tmp, dst); err != nil {
			_ = sc.Remove(tmp)
			return fmt.Errorf("%s: renaming into %s: %w", c.cfg.Host, dst, err)
		}
		return nil
	}
	cmd := Script("install file", installScript, tmp, dst, fmt.Sprintf("%04o", mode.Perm())).AsRoot()
	if _, err := c.Check(ctx, cmd); err != nil {
		_ = sc.Remove(tmp)
		return fmt.Errorf("moving %s into place: %w", dst, err)
	}
	return nil
}

func (c *Client) upload(ctx context.Context, sc *sftp.Client, tmp string, r io.Reader, progress func(int64)) error {
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.cfg.Host, tmp, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: chmod %s: %w", c.cfg.Host, tmp, err)
	}
	// Cancellation: closing the file makes the pending write fail.
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer stop()
	cw := &countingReader{r: r, progress: progress, add: c.bytesUp.Add}
	_, err = f.ReadFrom(cw)
	cerr := f.Close()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: upload: %w", c.cfg.Host, ctx.Err())
	}
	if err != nil || (cerr != nil && !errors.Is(cerr, os.ErrClosed)) {
		return fmt.Errorf("%s: uploading %s: %w", c.cfg.Host, tmp, errors.Join(err, cerr))
	}
	return nil
}

// ReadFile returns the content of path on the host, read as root. A missing file gives an
// error wrapping os.ErrNotExist. The content may be secret: it is never logged here.
func (c *Client) ReadFile(ctx context.Context, p string) ([]byte, error) {
	res, err := c.Run(ctx, Command("cat", "--", p).AsRoot())
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		if strings.Contains(string(res.Stderr), "No such file") {
			return nil, fmt.Errorf("%s: %s: %w", c.cfg.Host, p, os.ErrNotExist)
		}
		return nil, &CommandError{Host: c.cfg.Host, Command: "cat " + p, ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 3)}
	}
	c.transfers.Add(1)
	return res.Stdout, nil
}

type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
	add      func(int64) int64
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if n > 0 {
		cr.n += int64(n)
		cr.add(int64(n))
		if cr.progress != nil {
			cr.progress(cr.n)
		}
	}
	return n, err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
