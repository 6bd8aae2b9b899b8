// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the finishing step chowns to root: needs root")
	}
}

// noLeftovers fails when dir holds anything but the names in keep.
func noLeftovers(t *testing.T, dir string, keep ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			t.Errorf("left behind in %s: %s", dir, e.Name())
		}
	}
}

// TestUploadWithoutSFTP: a host that refuses the sftp subsystem (OpenSSH without the
// Subsystem line) or accepts it and ends the channel (Dropbear without sftp-server) gets its
// files over sessions: the method is decided once, resumable and plain uploads and a download
// as root give the exact content and mode, and no SFTP session is ever counted.
func TestUploadWithoutSFTP(t *testing.T) {
	needRoot(t)
	for _, mode := range []string{"refuse", "exit"} {
		t.Run(mode, func(t *testing.T) {
			s := newTestServerWith(t, func(s *testServer) { s.noSFTP = mode })
			c := s.dial(t, nil)
			ctx := context.Background()
			m, err := c.FileMethod(ctx)
			if err != nil || m != FileMethodSession {
				t.Fatalf("method %q, %v; want session", m, err)
			}
			before := c.Stats().Commands
			if m, err := c.FileMethod(ctx); err != nil || m != FileMethodSession || c.Stats().Commands != before {
				t.Fatalf("second decision: %q %v, %d commands more (want the remembered answer)", m, err, c.Stats().Commands-before)
			}
			const size = 3<<20 + 12345
			src, sum := bigFile(t, size)
			content, _ := io.ReadAll(src)
			dir := t.TempDir()
			dst := filepath.Join(dir, "bin", "k3s")
			var last int64
			tr, err := c.WriteFileResumable(ctx, dst, 0o755, src, size, sum, func(p int64) { last = p })
			if err != nil {
				t.Fatal(err)
			}
			if tr.Resumed != 0 || tr.Sent != size || last != size {
				t.Fatalf("transfer %+v, last progress %d", tr, last)
			}
			got, _ := os.ReadFile(dst)
			if !bytes.Equal(got, content) {
				t.Fatal("content differs")
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o755 {
				t.Errorf("mode %v", fi.Mode())
			}
			noLeftovers(t, filepath.Dir(dst), "k3s")
			small := filepath.Join(dir, "etc", "config.yaml")
			if err := c.WriteFile(ctx, small, 0o600, strings.NewReader("token: x\n"), 9, nil); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(small); string(b) != "token: x\n" {
				t.Fatalf("small file %q", b)
			}
			if fi, _ := os.Stat(small); fi.Mode().Perm() != 0o600 {
				t.Errorf("small file mode %v", fi.Mode())
			}
			noLeftovers(t, filepath.Dir(small), "config.yaml")
			back, err := c.Download(ctx, dst)
			if err != nil || !bytes.Equal(back, content) {
				t.Fatalf("download: %d bytes, %v", len(back), err)
			}
			if st := c.Stats(); st.SFTPSessions != 0 || st.BytesUploaded != size+9 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestSessionUploadResumesAfterCut: a stream cut mid-flight (the link stops moving) is declared
// dead after StallTimeout; a new connection resumes from the verified prefix the host holds:
// all the server had read but at most one SSH channel window (x/crypto's server: 2 MiB) and a
// resume block.
func TestSessionUploadResumesAfterCut(t *testing.T) {
	needRoot(t)
	s := newTestServerWith(t, func(s *testServer) { s.noSFTP = "refuse" })
	const size = 8 << 20
	src, sum := bigFile(t, size)
	content, _ := io.ReadAll(src)
	dst := filepath.Join(t.TempDir(), "k3s")
	c := s.dial(t, func(cfg *Config) { cfg.StallTimeout = 300 * time.Millisecond })
	if m, err := c.FileMethod(context.Background()); m != FileMethodSession || err != nil {
		t.Fatalf("method %q %v", m, err)
	}
	s.stallAfter.Store(s.read.Load() + size/2)
	var err error
	within(t, 5*time.Second, "stalled stream declared dead", func() {
		_, err = c.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, nil)
	})
	var te *TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "no byte moved") || !IsTransient(err) {
		t.Fatalf("want a transient stall TransportError, got %v", err)
	}
	s.stalled.Store(false)
	s.stallAfter.Store(0)
	c2 := s.dial(t, nil)
	tr, err := c2.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed at %d, sent %d of %d", tr.Resumed, tr.Sent, size)
	if tr.Resumed < size/2-2<<20-resumeBlock(size) || tr.Resumed+tr.Sent != size {
		t.Fatalf("resume: at %d, sent %d (size %d)", tr.Resumed, tr.Sent, size)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, content) {
		t.Fatal("content differs after resuming")
	}
	noLeftovers(t, filepath.Dir(dst), "k3s")
}

// flipReader flips one byte at offset at of the stream: corruption in transit.
type flipReader struct {
	r   io.Reader
	pos int64
	at  int64
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if f.at >= f.pos && f.at < f.pos+int64(n) {
		p[f.at-f.pos] ^= 0xff
	}
	f.pos += int64(n)
	return n, err
}

func (f *flipReader) Seek(off int64, whence int) (int64, error) {
	n, err := f.r.(io.Seeker).Seek(off, whence)
	f.pos = n
	return n, err
}

// TestSessionUploadChecksumMismatch: content corrupted on the way is found by the sha256 check
// on the host: the target is not touched, the partial file is removed, and the error is a
// transient one (sent again).
func TestSessionUploadChecksumMismatch(t *testing.T) {
	needRoot(t)
	s := newTestServerWith(t, func(s *testServer) { s.noSFTP = "refuse" })
	c := s.dial(t, nil)
	const size = 1 << 20
	src, sum := bigFile(t, size)
	dst := filepath.Join(t.TempDir(), "k3s")
	if err := os.WriteFile(dst, []byte("the old binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := c.WriteFileResumable(context.Background(), dst, 0o755, &flipReader{r: src, at: size / 3}, size, sum, nil)
	var te *TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "does not match its sha256") {
		t.Fatalf("want a checksum TransportError, got %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "the old binary" {
		t.Fatal("the target was replaced by corrupted content")
	}
	noLeftovers(t, filepath.Dir(dst), "k3s")
}

// TestSessionUploadCancel: cancelling a stream blocked on a dead link returns within the
// cancel grace with context.Canceled.
func TestSessionUploadCancel(t *testing.T) {
	s := newTestServerWith(t, func(s *testServer) { s.noSFTP = "exit" })
	c := s.dial(t, func(cfg *Config) { cfg.StallTimeout = time.Hour })
	if m, err := c.FileMethod(context.Background()); m != FileMethodSession || err != nil {
		t.Fatalf("method %q %v", m, err)
	}
	src, sum := bigFile(t, 8<<20)
	s.stallAfter.Store(s.read.Load() + 2<<20)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.WriteFileResumable(ctx, filepath.Join(t.TempDir(), "dst"), 0o644, src, 8<<20, sum, nil)
		errc <- err
	}()
	for !s.stalled.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	within(t, cancelGrace+time.Second, "cancelled stream on a dead link", func() {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("want context.Canceled, got %v", err)
		}
	})
}

// TestSessionUploadSudoPassword: a login user other than root with a sudo password streams the
// data as itself (no sudo: the password never enters the data stream) and the finishing step
// gets the password on its first stdin line. A fake sudo on PATH checks the password and logs
// each call.
func TestSessionUploadSudoPassword(t *testing.T) {
	needRoot(t)
	bin := t.TempDir()
	log := filepath.Join(bin, "sudo.log")
	fake := `#!/bin/sh
IFS= read -r pw
[ "$pw" = "hunter2" ] || { echo "sudo: 1 incorrect password attempt" >&2; exit 1; }
echo call >> "` + log + `"
echo "$*" >> "` + log + `.args"
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	s := newTestServerWith(t, func(s *testServer) { s.noSFTP = "refuse" })
	c := s.dial(t, func(cfg *Config) { cfg.User = "deploy"; cfg.SudoPassword = "hunter2" })
	const size = 1<<20 + 7
	src, sum := bigFile(t, size)
	content, _ := io.ReadAll(src)
	dst := filepath.Join(t.TempDir(), "k3s")
	if _, err := c.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, content) {
		t.Fatal("content differs (the password in the data stream?)")
	}
	calls, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	if len(lines) != 1 {
		t.Fatalf("sudo calls %q; want one (the finishing step)", lines)
	}
	if args, _ := os.ReadFile(log + ".args"); !bytes.Contains(args, []byte("k3strap-part")) || bytes.Contains(args, []byte("hunter2")) {
		t.Fatal("password on a command line")
	}
	if err := c.WriteFile(context.Background(), dst+".yaml", 0o640, strings.NewReader("a: b\n"), 5, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst + ".yaml"); string(b) != "a: b\n" {
		t.Fatalf("plain file %q", b)
	}
	noLeftovers(t, filepath.Dir(dst), "k3s", "k3s.yaml")
	ents, _ := filepath.Glob(filepath.Join(StagingDir, ".k3strap-*"))
	for _, e := range ents {
		if b, _ := os.ReadFile(e); bytes.Contains(b, []byte("hunter2")) {
			t.Errorf("staged file %s holds the password", e)
		}
	}
}

// TestLongScriptOnDropbear: a server that ends the connection on an exec command over 9000
// bytes (Dropbear) runs a longer script in one command, as any server does: the script travels
// on standard input ahead of the command's own input (Cmd.sent), its arguments passed on, and
// nothing is left on the host.
func TestLongScriptOnDropbear(t *testing.T) {
	long := "# " + strings.Repeat("k3strap ", 2000) + "\nIFS= read -r first; echo \"$1|$2|$first\"; cat"
	for _, version := range []string{"SSH-2.0-dropbear_2022.83", "SSH-2.0-OpenSSH_9.2p1"} {
		t.Run(version, func(t *testing.T) {
			s := newTestServerWith(t, func(s *testServer) {
				s.version = version
				if strings.Contains(version, "dropbear") {
					s.maxCmd = 9000
				}
			})
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			c := s.dial(t, nil)
			res, err := c.Check(context.Background(), Script("long", long, "a b", "c").WithStdin(strings.NewReader("line1\nrest\n")))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Stdout); got != "a b|c|line1\nrest\n" {
				t.Fatalf("output %q", got)
			}
			if n := c.Stats().Commands; n != 1 {
				t.Errorf("%d commands, want 1", n)
			}
			noLeftovers(t, tmp)
		})
	}
}

// TestDropbearQuietAfterCancel: on a Dropbear server the command after a cancelled one waits
// dropbearQuiet before opening its channel; on another server no quiet period is set.
func TestDropbearQuietAfterCancel(t *testing.T) {
	for _, version := range []string{"SSH-2.0-dropbear_2022.83", "SSH-2.0-OpenSSH_9.2p1"} {
		t.Run(version, func(t *testing.T) {
			s := newTestServerWith(t, func(s *testServer) { s.version = version })
			c := s.dial(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := c.Stream(ctx, Command("sh", "-c", "while :; do echo x; sleep 0.05; done"), func(string) {})
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stream: %v", err)
			}
			start := time.Now()
			if _, err := c.Check(context.Background(), Command("true")); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			dropbear := strings.Contains(version, "dropbear")
			if dropbear && took < dropbearQuiet*3/4 {
				t.Fatalf("the next command took %s, want at least ~%s", took, dropbearQuiet)
			}
			if !dropbear && c.quietUntil.Load() != 0 {
				t.Fatalf("a quiet period was set for %s", version)
			}
		})
	}
}

// busyboxPath returns a directory holding only BusyBox's applets (symlinks to the machine's
// busybox), for a PATH that makes a host of this machine look like a BusyBox image; the test
// skips when busybox is not installed.
func busyboxPath(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox is not installed on this machine (Debian package busybox)")
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	dir := t.TempDir()
	for _, a := range strings.Fields(string(out)) {
		if err := os.Symlink(bb, filepath.Join(dir, a)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSessionUploadOnBusyBox: with nothing but BusyBox's sh and applets on the host's PATH
// (no coreutils, no sftp), a resumable upload that resumes past a hole (block checksums with
// BusyBox dd, head and sha256sum), a plain write, a download, the staging of a non-root
// upload's finishing step and a long script all work.
func TestSessionUploadOnBusyBox(t *testing.T) {
	needRoot(t)
	bb := busyboxPath(t)
	s := newTestServerWith(t, func(s *testServer) { s.noSFTP = "refuse"; s.version = "SSH-2.0-dropbear_2022.83"; s.maxCmd = 9000 })
	t.Setenv("PATH", bb)
	c := s.dial(t, nil)
	if res, err := c.Check(context.Background(), Command("sh", "-c", "sha256sum --help 2>&1 | head -n 1")); err != nil || !strings.Contains(string(res.Stdout), "BusyBox") {
		t.Fatalf("the host's sha256sum is not BusyBox's: %v %+v", err, res)
	}
	const size = 3 << 20
	src, sum := bigFile(t, size)
	content, _ := io.ReadAll(src)
	dst := filepath.Join(t.TempDir(), "k3s")
	part := append([]byte(nil), content[:2<<20]...)
	clear(part[1<<20 : 1<<20+100])
	if err := os.WriteFile(c.partialPrefix(dst)+sum[:16], part, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := c.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Resumed != 1<<20 || tr.Sent != size-1<<20 {
		t.Fatalf("resumed at %d, sent %d; want 1 MiB and the rest", tr.Resumed, tr.Sent)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, content) {
		t.Fatal("content differs")
	}
	if err := c.WriteFile(context.Background(), dst+".yaml", 0o600, strings.NewReader("x: y\n"), 5, nil); err != nil {
		t.Fatal(err)
	}
	if back, err := c.Download(context.Background(), dst+".yaml"); err != nil || string(back) != "x: y\n" {
		t.Fatalf("download %q %v", back, err)
	}
	noLeftovers(t, filepath.Dir(dst), "k3s", "k3s.yaml")
	long := "# " + strings.Repeat("busybox ", 1500) + "\necho \"$1\""
	if res, err := c.Check(context.Background(), Script("long", long, "ok")); err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("long script: %v %+v", err, res)
	}
	// The non-root finishing step (installScript, finishScript) under BusyBox, as root here.
	if _, err := c.Check(context.Background(), Script("install file", installScript, dst+".yaml", dst+".copy", "0640")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dst + ".copy"); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("installScript under BusyBox: %v %v", fi, err)
	}
}
