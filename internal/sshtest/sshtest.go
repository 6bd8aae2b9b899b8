// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sshtest is an in-process SSH server for unit tests of code that holds a real
// remote.Client (the installer's steps), without root and without hosts: it accepts one
// generated client key, answers every exec request through the test's Exec function, and
// Stall makes every connection stop moving bytes in both directions — a dead link (a host that
// lost power, a cut cable) as the client sees it: keepalives go unanswered; Drop ends every
// connection from the server's side.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Exec runs one exec request: cmd is the command line the client sent, stdin its input,
// stdout and stderr its output; it returns the exit status. It should return when done is
// closed (the session or the server ended).
type Exec func(cmd string, stdin io.Reader, stdout, stderr io.Writer, done <-chan struct{}) int

// Server is a running test server; New starts it, the test's cleanup stops it.
type Server struct {
	// KeyPath is the client's private key file (ed25519, no passphrase); the server accepts it.
	KeyPath string
	// Port is the TCP port on 127.0.0.1 the server listens on.
	Port int

	exec    Exec
	stalled atomic.Bool
	stop    chan struct{}
	mu      sync.Mutex
	conns   []net.Conn
}

// New starts a server answering exec requests with exec (nil: every command exits 0 at once).
// The host key is generated, so clients must not verify it (remote.Config.InsecureIgnoreHostKey).
func New(t testing.TB, exec Exec) *Server {
	t.Helper()
	if exec == nil {
		exec = func(string, io.Reader, io.Writer, io.Writer, <-chan struct{}) int { return 0 }
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cliPub, cliPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(cliPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := ssh.NewPublicKey(cliPub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(want.Marshal()) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{KeyPath: keyPath, Port: ln.Addr().(*net.TCPAddr).Port, exec: exec, stop: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go s.serve(&stallConn{Conn: c, s: s}, cfg)
		}
	}()
	t.Cleanup(func() {
		close(s.stop)
		_ = ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

// Stall makes every connection, open and future, stop reading and writing until the test ends.
func (s *Server) Stall() { s.stalled.Store(true) }

// Drop closes every open connection from the server's side (a host that crashed and whose
// network went away, a reset), as the client sees it: the connection ends.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// stallConn stops moving bytes, in both directions, once its server is stalled.
type stallConn struct {
	net.Conn
	s *Server
}

func (c *stallConn) wait() {
	for c.s.stalled.Load() {
		select {
		case <-c.s.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *stallConn) Read(p []byte) (int, error) {
	c.wait()
	return c.Conn.Read(p)
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.wait()
	return c.Conn.Write(p)
}

func (s *Server) serve(c net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go func() { // keepalive@openssh.com and the like: answered (no), as sshd does
		for r := range reqs {
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(ch, creqs)
	}
}

func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	done := make(chan struct{})
	defer close(done)
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 {
			if req.WantReply {
				_ = req.Reply(req.Type == "env" || req.Type == "pty-req", nil)
			}
			continue
		}
		_ = req.Reply(true, nil)
		ended := make(chan struct{})
		go func() { // the requests channel closes when the session or the connection ends
			for r := range reqs {
				if r.WantReply {
					_ = r.Reply(false, nil)
				}
			}
			close(ended)
		}()
		quit := make(chan struct{})
		go func() {
			select {
			case <-ended:
			case <-s.stop:
			case <-done:
			}
			close(quit)
		}()
		code := s.exec(string(req.Payload[4:]), ch, ch, ch.Stderr(), quit)
		st := make([]byte, 4)
		binary.BigEndian.PutUint32(st, uint32(code))
		_, _ = ch.SendRequest("exit-status", false, st)
		return
	}
}
