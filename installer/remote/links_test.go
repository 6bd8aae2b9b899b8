// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server for the transport's tests: exec requests run with
// sh -c on this machine, the sftp subsystem serves this machine's filesystem, and stall makes
// every connection stop reading and writing (a dead link, as a cut cable looks to the client).
type testServer struct {
	t       *testing.T
	ln      net.Listener
	key     string // client private key file
	stalled atomic.Bool
	// refuseKeys makes the server refuse every key (set before the first connection).
	refuseKeys bool
	// noSFTP (set in newTestServerWith's setup) makes the server refuse the sftp subsystem
	// ("refuse", OpenSSH without the Subsystem line) or accept it and end the channel at once
	// ("exit", Dropbear whose sftp-server binary is missing).
	noSFTP string
	// version (set in the setup too) is the server's version string; maxCmd > 0
	// ends the connection on an exec command longer than maxCmd bytes (Dropbear: "String too
	// long").
	version string
	maxCmd  int
	// stallAfter, when > 0, stalls the link once the server has read this many bytes.
	stallAfter atomic.Int64
	read       atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newTestServerWith is newTestServer with setup (may be nil) applied to the server before it
// accepts connections (noSFTP, version, maxCmd).
func newTestServerWith(t *testing.T, setup func(*testServer)) *testServer {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, cliPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(cliPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, key: keyFile}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
		if s.refuseKeys {
			return nil, errors.New("key refused")
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	if setup != nil {
		setup(s)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sc := &stallConn{Conn: c, s: s}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go s.serve(sc, cfg)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

// stallConn stops moving bytes, in both directions, while its server is stalled.
type stallConn struct {
	net.Conn
	s *testServer
}

func (c *stallConn) wait() {
	for c.s.stalled.Load() {
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *stallConn) Read(p []byte) (int, error) {
	c.wait()
	n, err := c.Conn.Read(p)
	if lim := c.s.stallAfter.Load(); lim > 0 && c.s.read.Add(int64(n)) > lim {
		c.s.stalled.Store(true)
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.wait()
	return c.Conn.Write(p)
}

func (s *testServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	if s.version != "" {
		v := *cfg
		v.ServerVersion = s.version
		cfg = &v
	}
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(c, ch, creqs)
	}
}

func (s *testServer) session(c net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "exec":
			if len(req.Payload) < 4 {
				_ = req.Reply(false, nil)
				continue
			}
			line := string(req.Payload[4:])
			if s.maxCmd > 0 && len(line) > s.maxCmd {
				_ = c.Close()
				return
			}
			_ = req.Reply(true, nil)
			cmd := exec.Command("sh", "-c", line)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
			code := 0
			if err := cmd.Run(); err != nil {
				code = 255
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
			}
			st := make([]byte, 4)
			binary.BigEndian.PutUint32(st, uint32(code))
			_, _ = ch.SendRequest("exit-status", false, st)
			return
		case "subsystem":
			if s.noSFTP == "exit" {
				_ = req.Reply(true, nil)
				_, _ = ch.Stderr().Write([]byte("sh: 1: /usr/lib/openssh/sftp-server: not found\n"))
				st := make([]byte, 4)
				binary.BigEndian.PutUint32(st, 127)
				_, _ = ch.SendRequest("exit-status", false, st)
				return
			}
			if len(req.Payload) < 4 || string(req.Payload[4:]) != "sftp" || s.noSFTP == "refuse" {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			srv, err := sftp.NewServer(ch)
			if err != nil {
				return
			}
			_ = srv.Serve()
			return
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

func (s *testServer) dial(t *testing.T, mod func(*Config)) *Client {
	t.Helper()
	addr := s.ln.Addr().(*net.TCPAddr)
	cfg := Config{Host: "t1", Address: "127.0.0.1", Port: addr.Port, User: "root", KeyPath: s.key,
		InsecureIgnoreHostKey: true, ConnectTimeout: 2 * time.Second, KeepaliveInterval: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// within fails the test when fn takes longer than d.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); fn() }()
	select {
	case <-done:
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s", what, d)
	}
}

// bigFile writes n random bytes and returns the file (opened) and its sha256.
func bigFile(t *testing.T, n int) (*os.File, string) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	p := filepath.Join(t.TempDir(), "artifact")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	sum := sha256.Sum256(b)
	return f, hex.EncodeToString(sum[:])
}

func TestRunAndDebugHook(t *testing.T) {
	s := newTestServer(t)
	var mu sync.Mutex
	var seen []string
	c := s.dial(t, func(cfg *Config) {
		cfg.Debug = func(m string) { mu.Lock(); seen = append(seen, m); mu.Unlock() }
	})
	res, err := c.Run(context.Background(), Command("echo", "hello world"))
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "hello world" {
		t.Fatalf("run: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "echo 'hello world'" {
		t.Fatalf("debug hook saw %q", seen)
	}
}

// TestCloseNeverWaitsForDeadPeer: with the link dead while an upload and a command are in
// flight, Close returns at once and both fail with a TransportError (the SFTP reader ends
// because the network connection is closed first).
func TestCloseNeverWaitsForDeadPeer(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, func(cfg *Config) { cfg.StallTimeout = time.Hour })
	src, _ := bigFile(t, 8<<20)
	dst := filepath.Join(t.TempDir(), "dst")
	if err := c.WriteFile(context.Background(), dst+".small", 0o644, strings.NewReader("x"), 1, nil); err != nil {
		t.Fatal(err) // SFTP session up
	}
	s.stallAfter.Store(s.read.Load() + 1<<20)
	upErr := make(chan error, 1)
	go func() { upErr <- c.WriteFile(context.Background(), dst, 0o644, src, 8<<20, nil) }()
	for !s.stalled.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	runErr := make(chan error, 1)
	go func() { _, err := c.Run(context.Background(), Command("true")); runErr <- err }()
	time.Sleep(300 * time.Millisecond)
	within(t, time.Second, "Close with a dead peer", func() { _ = c.Close() })
	within(t, 2*time.Second, "blocked upload and command end", func() {
		for _, ch := range []chan error{upErr, runErr} {
			var te *TransportError
			if err := <-ch; !errors.As(err, &te) {
				t.Errorf("want a TransportError, got %v", err)
			}
		}
	})
}

// TestKeepaliveEndsCommandOnDeadLink: a command waiting on a dead link fails within the
// keepalive's interval × count.
func TestKeepaliveEndsCommandOnDeadLink(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, func(cfg *Config) { cfg.KeepaliveInterval = 100 * time.Millisecond })
	errc := make(chan error, 1)
	go func() { _, err := c.Run(context.Background(), Command("sleep", "30")); errc <- err }()
	time.Sleep(300 * time.Millisecond)
	s.stalled.Store(true)
	within(t, 3*time.Second, "command on a dead link", func() {
		var te *TransportError
		if err := <-errc; !errors.As(err, &te) || !IsTransient(err) {
			t.Errorf("want a transient TransportError, got %v", err)
		}
	})
	if !c.closed() {
		t.Error("keepalive did not close the connection")
	}
}

// TestCancelEndsBlockedUpload: cancelling the context of an upload blocked on a dead link
// returns within the cancel grace, without waiting for the peer.
func TestCancelEndsBlockedUpload(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, func(cfg *Config) { cfg.StallTimeout = time.Hour })
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
	within(t, cancelGrace+time.Second, "cancelled upload on a dead link", func() {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("want context.Canceled, got %v", err)
		}
	})
}

// TestStalledUploadResumes: an upload that stops moving is declared dead after StallTimeout
// (the connection is closed); a new connection resumes it from the verified prefix, sends less
// than 60% of the file again, and leaves no partial file.
func TestStalledUploadResumes(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the finishing step chowns to root: needs root")
	}
	s := newTestServer(t)
	const size = 8 << 20
	src, sum := bigFile(t, size)
	dir := t.TempDir()
	dst := filepath.Join(dir, "sub", "k3s")
	// Leftovers of earlier runs with k3strap's naming, removed after the upload succeeds.
	_ = os.MkdirAll(filepath.Dir(dst), 0o755)
	for _, n := range []string{".k3s.k3strap-0a1b2c3d4e5f", ".k3s.k3strap-part-00000000deadbeef"} {
		_ = os.WriteFile(filepath.Join(filepath.Dir(dst), n), []byte("stale"), 0o600)
	}
	c := s.dial(t, func(cfg *Config) { cfg.StallTimeout = 300 * time.Millisecond })
	s.stallAfter.Store(s.read.Load() + size/2)
	var tr Transfer
	var err error
	within(t, 5*time.Second, "stalled upload declared dead", func() {
		tr, err = c.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, nil)
	})
	var te *TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "no byte moved") {
		t.Fatalf("want a stall TransportError, got %v", err)
	}
	if !c.closed() {
		t.Fatal("the stalled connection was not closed")
	}
	t.Logf("first attempt sent %d bytes", tr.Sent)
	s.stalled.Store(false)
	s.stallAfter.Store(0)
	c2 := s.dial(t, nil)
	var last int64
	tr, err = c2.WriteFileResumable(context.Background(), dst, 0o755, src, size, sum, func(p int64) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed at %d, sent %d of %d", tr.Resumed, tr.Sent, size)
	if tr.Resumed == 0 || tr.Sent >= size*6/10 || tr.Resumed+tr.Sent != size || last != size {
		t.Fatalf("resume: at %d, sent %d, last progress %d (size %d)", tr.Resumed, tr.Sent, last, size)
	}
	got, _ := os.ReadFile(dst)
	h := sha256.Sum256(got)
	if hex.EncodeToString(h[:]) != sum {
		t.Fatal("content differs after resuming")
	}
	st, _ := os.Stat(dst)
	if st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", st.Mode())
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	for _, e := range ents {
		if e.Name() != "k3s" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	// Same content again: a fresh upload (no partial), nothing left behind either.
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if tr, err = c2.WriteFileResumable(context.Background(), dst, 0o644, src, size, sum, nil); err != nil || tr.Resumed != 0 || tr.Sent != size {
		t.Fatalf("second upload: %+v %v", tr, err)
	}
}

// TestSFTPStartOnDeadLinkIsTransient: the SFTP session failing to start because the link is
// dead is a transport failure (retried after reconnecting), not a configuration hint.
func TestSFTPStartOnDeadLinkIsTransient(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, func(cfg *Config) { cfg.KeepaliveInterval = 100 * time.Millisecond })
	s.stalled.Store(true)
	var err error
	within(t, 3*time.Second, "write on a dead link", func() {
		err = c.WriteFile(context.Background(), filepath.Join(t.TempDir(), "x"), 0o600, bytes.NewReader([]byte("x")), 1, nil)
	})
	if !IsTransient(err) || strings.Contains(err.Error(), "sshd_config") {
		t.Fatalf("want a transient error without the sshd_config hint, got %v", err)
	}
}

func TestResumeBlock(t *testing.T) {
	for _, c := range []struct{ size, want int64 }{{10, 256 << 10}, {256 << 20, 256 << 10}, {800 << 20, 1 << 20}} {
		if got := resumeBlock(c.size); got != c.want {
			t.Errorf("resumeBlock(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// TestResumeSkipsHoles: a partial file with a hole (concurrent writes cut short) resumes at the
// first block that does not match.
func TestResumeSkipsHoles(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the finishing step chowns to root: needs root")
	}
	s := newTestServer(t)
	c := s.dial(t, nil)
	const size = 4 << 20
	src, sum := bigFile(t, size)
	content, _ := io.ReadAll(src)
	dst := filepath.Join(t.TempDir(), "k3s")
	part := append([]byte(nil), content[:3<<20]...)
	clear(part[1<<20 : 1<<20+1000]) // a hole in the second MiB
	if err := os.WriteFile(c.partialPrefix(dst)+sum[:16], part, 0o600); err != nil {
		t.Fatal(err)
	}
	// A stale SFTP server still holding the partial file open for writing: the file put in
	// place must be another inode (or the binary could not be executed: "Text file busy").
	stale, err := os.OpenFile(c.partialPrefix(dst)+sum[:16], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	tr, err := c.WriteFileResumable(context.Background(), dst, 0o644, src, size, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Resumed != 1<<20 || tr.Sent != size-1<<20 {
		t.Fatalf("resumed at %d, sent %d; want 1 MiB and the rest", tr.Resumed, tr.Sent)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, content) {
		t.Fatal("content differs")
	}
	si, _ := stale.Stat()
	if di, err := os.Stat(dst); err != nil || os.SameFile(si, di) {
		t.Fatalf("the target is the partial file still open for writing (%v)", err)
	}
}

// TestEmptyFileUploads: a zero-byte file (an empty airgap images archive, an empty manifest)
// uploads like any other, resumable or not, also over an existing file: there is nothing to
// send, yet the partial file must exist for the finishing step to copy it into place.
func TestEmptyFileUploads(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the finishing step chowns to root: needs root")
	}
	s := newTestServer(t)
	c := s.dial(t, nil)
	sum := sha256.Sum256(nil)
	empty := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	fresh, over := filepath.Join(dir, "images", "images.tar"), filepath.Join(dir, "old.tar")
	if err := os.WriteFile(over, []byte("an older, non-empty archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{fresh, over} {
		tr, err := c.WriteFileResumable(context.Background(), dst, 0o644, bytes.NewReader(nil), 0, empty, nil)
		if err != nil {
			t.Fatalf("resumable upload of an empty file to %s: %v", dst, err)
		}
		if tr.Sent != 0 || tr.Resumed != 0 {
			t.Errorf("%s: %+v, want nothing sent", dst, tr)
		}
		fi, err := os.Stat(dst)
		if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s after the upload: %v %v", dst, fi, err)
		}
		ents, _ := os.ReadDir(filepath.Dir(dst))
		for _, e := range ents {
			if e.Name() != filepath.Base(dst) && e.Name() != "images" && e.Name() != "old.tar" {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	}
	// Again: the same empty content over itself (a re-run) works too.
	if _, err := c.WriteFileResumable(context.Background(), fresh, 0o600, bytes.NewReader(nil), 0, empty, nil); err != nil {
		t.Fatalf("second upload: %v", err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after the second upload: %v %v", fi, err)
	}
	plain := filepath.Join(dir, "plain")
	if err := c.WriteFile(context.Background(), plain, 0o640, bytes.NewReader(nil), 0, nil); err != nil {
		t.Fatalf("WriteFile of an empty file: %v", err)
	}
	if fi, err := os.Stat(plain); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o640 {
		t.Fatalf("plain empty file: %v %v", fi, err)
	}
}
