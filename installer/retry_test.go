// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// countingSSHServer is an in-process SSH server that counts the TCP connections it accepted.
// refuse refuses every key; drop closes every connection right after the banner (a host that
// hangs up in the handshake: transient).
func countingSSHServer(t *testing.T, refuse, drop bool) (port int, key string, accepted *atomic.Int64) {
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
	key = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
		if refuse {
			return nil, errors.New("refused")
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				if drop {
					_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
					return
				}
				if sc, chans, reqs, err := ssh.NewServerConn(c, cfg); err == nil {
					go ssh.DiscardRequests(reqs)
					for nc := range chans {
						_ = nc.Reject(ssh.Prohibited, "no")
					}
					_ = sc.Close()
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, key, accepted
}

// TestDialRetriesOnlyTransientErrors: an unreadable known_hosts file, a key file that cannot be
// read and a key the host refuses are tried once (no "retrying" warning); a host that hangs up
// during the handshake is tried 1 + Retries times.
func TestDialRetriesOnlyTransientErrors(t *testing.T) {
	cases := []struct {
		name         string
		refuse, drop bool
		mod          func(cfg *remote.Config, key string)
		attempts     int64
	}{
		{name: "known_hosts unreadable", mod: func(cfg *remote.Config, _ string) {
			cfg.InsecureIgnoreHostKey = false
			cfg.KnownHosts = &remote.KnownHosts{Path: t.TempDir()} // a directory
		}, attempts: 1},
		{name: "key refused", refuse: true, attempts: 1},
		{name: "key file unreadable", mod: func(cfg *remote.Config, key string) { cfg.KeyPath = key + ".missing" }, attempts: 0},
		{name: "handshake dropped", drop: true, attempts: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port, key, accepted := countingSSHServer(t, tc.refuse, tc.drop)
			rec := &events.Recorder{}
			c := &inventory.Cluster{Spec: inventory.Spec{Hosts: []inventory.Host{{Name: "cp1", Address: "127.0.0.1", Role: inventory.RoleServer}}}}
			in := New(c, Options{Retries: 2}, rec)
			s := in.newSession(commandFor("preflight"))
			cfg := remote.Config{Host: "cp1", Address: "127.0.0.1", Port: port, User: "root", KeyPath: key,
				InsecureIgnoreHostKey: true, ConnectTimeout: 2 * time.Second}
			if tc.mod != nil {
				tc.mod(&cfg, key)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			cl, err := s.dial(ctx, s.hosts[0], cfg)
			if cl != nil {
				_ = cl.Close()
				t.Fatal("connected")
			}
			retried := 0
			for _, e := range rec.Events() {
				if e.Type == events.Warning && strings.Contains(e.Message, "retrying") {
					retried++
				}
			}
			t.Logf("%d connections, %d retry warnings in %s: %v", accepted.Load(), retried, time.Since(start).Round(time.Millisecond), err)
			if accepted.Load() != tc.attempts || retried != max(int(tc.attempts)-1, 0) {
				t.Fatalf("want %d connection attempts, got %d (%d retry warnings)", tc.attempts, accepted.Load(), retried)
			}
		})
	}
}

// TestPhaseOutcome: a phase over hosts is ok only when it worked on every host; failed, naming
// the hosts, when it failed on some or all.
func TestPhaseOutcome(t *testing.T) {
	hosts := func(names ...string) []*hostState {
		var out []*hostState
		for _, n := range names {
			out = append(out, &hostState{host: &inventory.Host{Name: n}})
		}
		return out
	}
	failing := func(bad ...string) func(*hostState) bool {
		return func(hs *hostState) bool { return !slices.Contains(bad, hs.host.Name) }
	}
	for _, tc := range []struct {
		bad    []string
		status events.Status
		msg    string
	}{
		{nil, events.StatusOK, "3 of 3 hosts connected"},
		{[]string{"w1"}, events.StatusFailed, "2 of 3 hosts connected; failed: w1"},
		{[]string{"cp1", "w1", "w2"}, events.StatusFailed, "none of 3 hosts connected; failed: cp1, w1, w2"},
	} {
		st, msg := phaseOutcome(hosts("cp1", "w1", "w2"), "connected", failing(tc.bad...))
		if st != tc.status || msg != tc.msg {
			t.Errorf("failed %v: got %s %q, want %s %q", tc.bad, st, msg, tc.status, tc.msg)
		}
	}
}
