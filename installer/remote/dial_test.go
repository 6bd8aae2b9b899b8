// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// hangingAgent is an ssh-agent on a unix socket that accepts connections and then, per mode,
// never answers anything ("silent"), lists one key and never answers a signature request
// ("nosign"), or works ("ok"). Its socket is set as SSH_AUTH_SOCK for the test.
func hangingAgent(t *testing.T, mode string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release); _ = ln.Close(); _ = os.RemoveAll(dir) })
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if mode == "silent" {
					<-release
					return
				}
				if mode == "ok" {
					_ = agent.ServeAgent(kr, c)
					return
				}
				_ = agent.ServeAgent(&noSignAgent{Agent: kr, release: release}, c)
			}()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
}

// noSignAgent lists its keys but never answers a signature request.
type noSignAgent struct {
	agent.Agent
	release chan struct{}
}

func (a *noSignAgent) Sign(ssh.PublicKey, []byte) (*ssh.Signature, error) {
	<-a.release
	return nil, errors.New("released")
}

// agentConfig is a Config logging in to s with the ssh-agent only.
func (s *testServer) agentConfig(timeout time.Duration) Config {
	addr := s.ln.Addr().(*net.TCPAddr)
	return Config{Host: "t1", Address: "127.0.0.1", Port: addr.Port, User: "root", UseAgent: true,
		InsecureIgnoreHostKey: true, ConnectTimeout: timeout}
}

// dialWithin runs Dial and fails the test unless it returns within limit; it returns the
// error and the time taken.
func dialWithin(t *testing.T, ctx context.Context, cfg Config, limit time.Duration) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	var err error
	within(t, limit, "Dial", func() {
		var c *Client
		c, err = Dial(ctx, cfg)
		if c != nil {
			_ = c.Close()
		}
	})
	return err, time.Since(start)
}

// TestDialHangingAgent: an ssh-agent that accepts the connection but never answers, or lists a
// key and never signs, fails the connect at the connect deadline with an error naming the
// agent; cancelling the context ends the connect at once, reported as cancelled.
func TestDialHangingAgent(t *testing.T) {
	for _, mode := range []string{"silent", "nosign"} {
		t.Run(mode, func(t *testing.T) {
			s := newTestServer(t)
			hangingAgent(t, mode)
			const timeout = 700 * time.Millisecond
			err, took := dialWithin(t, context.Background(), s.agentConfig(timeout), timeout+2*time.Second)
			var ce *ConnectError
			if !errors.As(err, &ce) || ce.Step != StepAgent || !strings.Contains(err.Error(), "ssh-agent did not answer within 700ms") {
				t.Fatalf("want the agent named at the deadline, got %v", err)
			}
			if took < timeout {
				t.Errorf("failed after %s, before the deadline %s", took, timeout)
			}
			if IsTransient(err) {
				t.Error("an agent that does not answer is retried")
			}

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			err, took = dialWithin(t, ctx, s.agentConfig(time.Minute), 2*time.Second)
			if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "closed network connection") || !strings.Contains(err.Error(), "cancelled") {
				t.Fatalf("want a cancelled connect, got %v", err)
			}
			if took > 300*time.Millisecond+time.Second {
				t.Errorf("cancelled connect took %s", took)
			}
		})
	}
}

// TestDialAgentSocketDead: an agent socket that nobody serves fails at once, naming the agent.
func TestDialAgentSocketDead(t *testing.T) {
	s := newTestServer(t)
	t.Setenv("SSH_AUTH_SOCK", filepath.Join(t.TempDir(), "gone.sock"))
	err, _ := dialWithin(t, context.Background(), s.agentConfig(5*time.Second), time.Second)
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Step != StepAgent || !strings.Contains(err.Error(), "connecting to the ssh-agent") || IsTransient(err) {
		t.Fatalf("want a permanent agent error, got %v", err)
	}
}

// silentServer accepts TCP connections and never says a word (no SSH banner): the handshake
// waits for it.
func silentServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// TestDialSilentHost: a host that accepts TCP but never speaks SSH fails at the deadline with
// the handshake named; cancelled, the error is the cancellation, not the transport error
// cancelling caused ("use of closed network connection").
func TestDialSilentHost(t *testing.T) {
	port := silentServer(t)
	key := newTestServer(t).key
	cfg := Config{Host: "t1", Address: "127.0.0.1", Port: port, User: "root", KeyPath: key, InsecureIgnoreHostKey: true,
		ConnectTimeout: 500 * time.Millisecond}
	err, _ := dialWithin(t, context.Background(), cfg, 2*time.Second)
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Step != StepHandshake || !strings.Contains(err.Error(), "no SSH handshake within 500ms") {
		t.Fatalf("want the handshake named at the deadline, got %v", err)
	}
	cfg.ConnectTimeout = time.Minute
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("interrupted (SIGINT)")) })
	err, _ = dialWithin(t, ctx, cfg, time.Second)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "closed network connection") ||
		!strings.Contains(err.Error(), "interrupted (SIGINT)") || IsTransient(err) {
		t.Fatalf("want the cancellation and its cause, got %v", err)
	}
	t.Log(err)
}

// TestDialPermanentErrors: a known_hosts file that cannot be read, a key file that cannot be
// read or parsed, a FIFO given as either (refused, never opened: it would block), and a key
// the host refuses are not transient (never retried); a host that drops the connection during
// the handshake is.
func TestDialPermanentErrors(t *testing.T) {
	s := newTestServer(t)
	addr := s.ln.Addr().(*net.TCPAddr)
	base := Config{Host: "t1", Address: "127.0.0.1", Port: addr.Port, User: "root", KeyPath: s.key, ConnectTimeout: 2 * time.Second}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	refusing := newTestServer(t)
	refusing.refuseKeys = true
	cases := []struct {
		name, step, text string
		mod              func(*Config)
	}{
		{"known_hosts is a directory", StepHostKey, "reading known_hosts", func(c *Config) { c.KnownHosts = &KnownHosts{Path: t.TempDir()} }},
		{"key file missing", StepAuth, "reading private key", func(c *Config) {
			c.InsecureIgnoreHostKey, c.KeyPath = true, filepath.Join(t.TempDir(), "nope")
		}},
		{"key file not a key", StepAuth, "parsing private key", func(c *Config) { c.InsecureIgnoreHostKey, c.KeyPath = true, garbage }},
		// A FIFO would block the read forever, beyond any deadline.
		{"key file a FIFO", StepAuth, "not a regular file", func(c *Config) { c.InsecureIgnoreHostKey, c.KeyPath = true, fifo }},
		{"known_hosts a FIFO", StepHostKey, "not a regular file", func(c *Config) { c.KnownHosts = &KnownHosts{Path: fifo} }},
		{"key refused", StepAuth, "unable to authenticate", func(c *Config) {
			c.InsecureIgnoreHostKey = true
			c.Port = refusing.ln.Addr().(*net.TCPAddr).Port
		}},
	}
	for _, tc := range cases {
		cfg := base
		tc.mod(&cfg)
		err, _ := dialWithin(t, context.Background(), cfg, 3*time.Second)
		var ce *ConnectError
		if !errors.As(err, &ce) || ce.Step != tc.step || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: want step %q and %q, got %v", tc.name, tc.step, tc.text, err)
		}
		if IsTransient(err) {
			t.Errorf("%s: a permanent error is transient: %v", tc.name, err)
		}
	}
	// A host that hangs up in the middle of the handshake is worth another try.
	port := closingServer(t)
	cfg := base
	cfg.Port, cfg.InsecureIgnoreHostKey = port, true
	err, _ := dialWithin(t, context.Background(), cfg, 3*time.Second)
	if !IsTransient(err) {
		t.Errorf("a dropped handshake is not transient: %v", err)
	}
}

// closingServer sends an SSH banner and closes every connection.
func closingServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
			_ = c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCommandDeadline: a command that never ends returns at its deadline with a
// *DeadlineError naming it and the host, not transient; a cancelled context ends it at once;
// a stream whose context has a deadline runs past DefaultCommandTimeout's place (only ctx
// bounds it) but stops at its own Timeout.
func TestCommandDeadline(t *testing.T) {
	s := newTestServer(t)
	c := s.dial(t, nil)
	var err error
	start := time.Now()
	within(t, 500*time.Millisecond+cancelGrace+time.Second, "Run past its deadline", func() {
		_, err = c.Run(context.Background(), Script("gather facts", "sleep 30").WithTimeout(500*time.Millisecond))
	})
	took := time.Since(start)
	var de *DeadlineError
	if !errors.As(err, &de) || err.Error()[:len("gather facts on t1 did not finish within 500ms")] != "gather facts on t1 did not finish within 500ms" {
		t.Fatalf("want a DeadlineError naming the command, got %v", err)
	}
	if took < 500*time.Millisecond || IsTransient(err) {
		t.Fatalf("took %s (deadline 500ms), transient %v", took, IsTransient(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	within(t, time.Second+cancelGrace, "cancelled Run", func() { _, err = c.Run(ctx, Command("sleep", "30")) })
	if !errors.Is(err, context.Canceled) || errors.As(err, &de) {
		t.Fatalf("want cancellation, got %v", err)
	}
	within(t, time.Second+cancelGrace, "Stream past its deadline", func() {
		err = c.Stream(context.Background(), Command("sh", "-c", "echo a; sleep 30").WithTimeout(300*time.Millisecond), func(string) {})
	})
	if !errors.As(err, &de) || de.Command != "sh" {
		t.Fatalf("want a DeadlineError for the stream, got %v", err)
	}
	// The connection still works after commands were stopped.
	if res, err := c.Check(context.Background(), Command("echo", "ok")); err != nil || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("after the deadlines: %v", err)
	}
}

func TestCommandTimeoutDefaults(t *testing.T) {
	bg := context.Background()
	dl, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	for _, tc := range []struct {
		ctx    context.Context
		cmd    Cmd
		stream bool
		want   time.Duration
	}{
		{bg, Command("true"), false, DefaultCommandTimeout},
		{dl, Command("true"), false, DefaultCommandTimeout},
		{bg, Command("true").WithTimeout(time.Second), false, time.Second},
		{bg, Command("true"), true, DefaultCommandTimeout},
		{dl, Command("true"), true, 0},
		{dl, Command("true").WithTimeout(time.Minute), true, time.Minute},
	} {
		if got := commandTimeout(tc.ctx, tc.cmd, tc.stream); got != tc.want {
			t.Errorf("commandTimeout(stream %v, timeout %s) = %s, want %s", tc.stream, tc.cmd.Timeout, got, tc.want)
		}
	}
	if finishTimeout(10<<20) != DefaultCommandTimeout || finishTimeout(4<<30) <= DefaultCommandTimeout {
		t.Errorf("finishTimeout: %s for 10 MiB, %s for 4 GiB", finishTimeout(10<<20), finishTimeout(4<<30))
	}
}

// TestDialEncryptedKeyUsesAgent: an encrypted key file with the agent on logs in through the
// agent; with the agent off (and no passphrase source) it is refused with the ways to unlock it.
func TestDialEncryptedKeyUsesAgent(t *testing.T) {
	s := newTestServer(t)
	hangingAgent(t, "ok")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(t.TempDir(), "id_enc")
	if err := os.WriteFile(enc, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := s.agentConfig(2 * time.Second)
	cfg.KeyPath = enc
	if err, _ := dialWithin(t, context.Background(), cfg, 3*time.Second); err != nil {
		t.Fatalf("encrypted key with the agent on: %v", err)
	}
	cfg.UseAgent = false
	err, _ = dialWithin(t, context.Background(), cfg, 3*time.Second)
	if err == nil || !strings.Contains(err.Error(), "is encrypted: give its passphrase with ssh.keyPassphraseEnv") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("encrypted key without the agent: %v", err)
	}
}
