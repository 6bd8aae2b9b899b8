// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal's master and slave, or skips the test without one.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal (/dev/ptmx): %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	sl, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pty slave: %v", err)
	}
	t.Cleanup(func() { _ = sl.Close(); _ = m.Close() })
	return m, sl
}

// screen collects what the program writes to the terminal.
type screen struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

func (s *screen) waitFor(t *testing.T, text string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // each check of a passphrase runs bcrypt (seconds under -race)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		got := strings.Count(s.buf.String(), text)
		s.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%q not shown %d times: %q", text, n, s.buf.String())
}

func encryptedKey(t *testing.T, pass string) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(pass))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_enc")
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// On a terminal: the passphrase is asked with echo off, a wrong one asked again, the right one
// kept for the run (not asked a second time).
func TestPassphrasePrompt(t *testing.T) {
	master, slave := openPTY(t)
	key := encryptedKey(t, "right one")
	s := sessionWithSSHConfig(t, "")
	out := &screen{}
	s.sshcfg.tty, s.sshcfg.ttyOut = slave, out
	type result struct {
		p   []byte
		src string
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, src, err := s.passphrase("", "")(context.Background(), key)
		done <- result{p, src, err}
	}()
	out.waitFor(t, "Enter passphrase for key "+key, 1)
	if _, err := master.WriteString("wrong\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "Wrong passphrase, try again.", 1)
	out.waitFor(t, "Enter passphrase for key "+key, 2)
	if _, err := master.WriteString("right one\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || string(r.p) != "right one" || r.src != "the terminal" {
			t.Fatalf("got %q from %q, %v", r.p, r.src, r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the prompt did not return")
	}
	// Kept for the run: the second connection is not asked.
	p, _, err := s.passphrase("", "")(context.Background(), key)
	if err != nil || string(p) != "right one" {
		t.Fatalf("second ask: %q, %v", p, err)
	}
	out.mu.Lock()
	shown := out.buf.String()
	out.mu.Unlock()
	if strings.Count(shown, "Enter passphrase") != 2 {
		t.Fatalf("asked again: %q", shown)
	}
}

// Ctrl-C during the prompt: it returns at once and the terminal echoes again.
func TestPassphrasePromptCancelled(t *testing.T) {
	_, slave := openPTY(t)
	key := encryptedKey(t, "x")
	s := sessionWithSSHConfig(t, "")
	out := &screen{}
	s.sshcfg.tty, s.sshcfg.ttyOut = slave, out
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := s.passphrase("", "")(ctx, key)
		done <- err
	}()
	out.waitFor(t, "Enter passphrase", 1)
	time.Sleep(50 * time.Millisecond) // let ReadPassword turn echo off
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelling did not end the prompt")
	}
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO == 0 {
		t.Fatal("echo left off after a cancelled prompt")
	}
}
