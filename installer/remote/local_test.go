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
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newTestLocal(t *testing.T) *Local {
	t.Helper()
	l, err := NewLocal(LocalConfig{Host: "box", Address: "10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestLocalRun: arguments reach the program exactly (the same quoting as over SSH), scripts get
// their positional arguments and stdin, a non-zero exit is a Result for Run and a
// *CommandError for Check, env pairs are set.
func TestLocalRun(t *testing.T) {
	l := newTestLocal(t)
	ctx := context.Background()
	odd := `it's "quoted" $HOME; rm -rf /nope`
	res, err := l.Run(ctx, Command("printf", "%s|", odd, "two words"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v %+v", err, res)
	}
	if got, want := string(res.Stdout), odd+"|two words|"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	res, err = l.Run(ctx, Script("t", `read x; echo "$1:$x:$FOO"; exit 3`, "arg").WithStdin(strings.NewReader("in\n")).WithEnv("FOO=bar"))
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "arg:in:bar\n" {
		t.Fatalf("script: %v %+v %q", err, res, res.Stdout)
	}
	_, err = l.Check(ctx, Command("sh", "-c", "echo bad >&2; exit 4"))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 4 || ce.Stderr != "bad" || ce.Host != "box" {
		t.Fatalf("Check: %v", err)
	}
	if s := l.Stats(); s.Commands != 3 {
		t.Errorf("Stats().Commands = %d, want 3", s.Commands)
	}
	if l.Address() != "10.0.0.5:0" || l.Host() != "box" {
		t.Errorf("Address %q Host %q", l.Address(), l.Host())
	}
	if m, _ := l.FileMethod(ctx); m != FileMethodLocal {
		t.Errorf("FileMethod = %q", m)
	}
}

// TestLocalDeadlineAndCancel: a command past its deadline is stopped with a *DeadlineError
// (children of a script too), a cancelled one returns the cancellation, both promptly.
func TestLocalDeadlineAndCancel(t *testing.T) {
	l := newTestLocal(t)
	start := time.Now()
	_, err := l.Run(context.Background(), Script("sleeper", "sleep 30; echo never").WithTimeout(300*time.Millisecond))
	var de *DeadlineError
	if !errors.As(err, &de) || de.Command != "sleeper" {
		t.Fatalf("want *DeadlineError, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("deadline took %s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	err = l.Stream(ctx, Command("sh", "-c", "echo one; sleep 30"), func(string) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %s", d)
	}
}

// TestLocalStream: lines arrive in order; a failing stream is a *CommandError.
func TestLocalStream(t *testing.T) {
	l := newTestLocal(t)
	var lines []string
	err := l.Stream(context.Background(), Command("sh", "-c", "echo a; echo b; echo c"), func(s string) { lines = append(lines, s) })
	if err != nil || strings.Join(lines, ",") != "a,b,c" {
		t.Fatalf("Stream: %v %v", err, lines)
	}
	err = l.Stream(context.Background(), Command("false"), func(string) {})
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CommandError, got %v", err)
	}
}

// TestLocalFiles: WriteFile creates directories and sets the mode, replaces atomically (no
// temporary file left), WriteFileResumable refuses content that does not match its sum and
// leaves the old file, ReadFile of a missing file wraps os.ErrNotExist.
func TestLocalFiles(t *testing.T) {
	l := newTestLocal(t)
	if !l.IsRoot() {
		t.Skip("writes as root directly; as another user they go through sudo (not available to this test)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "config.yaml")
	if err := l.WriteFile(ctx, p, 0o600, strings.NewReader("one\n"), 4, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v %v", err, st)
	}
	data := "two\n"
	sum := sha256.Sum256([]byte(data))
	var last int64
	tr, err := l.WriteFileResumable(ctx, p, 0o644, strings.NewReader(data), 4, hex.EncodeToString(sum[:]), func(n int64) { last = n })
	if err != nil || tr.Sent != 4 || last != 4 {
		t.Fatalf("resumable: %v %+v %d", err, tr, last)
	}
	other := sha256.Sum256([]byte("else"))
	if _, err := l.WriteFileResumable(ctx, p, 0o644, strings.NewReader("bad!"), 4, hex.EncodeToString(other[:]), nil); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("want a sum mismatch, got %v", err)
	}
	b, err := l.ReadFile(ctx, p)
	if err != nil || string(b) != data {
		t.Fatalf("ReadFile: %v %q", err, b)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	if _, err := l.ReadFile(ctx, filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestLocalDialAndClose: DialContext reaches a listener on this machine; Close closes Done,
// Lost stays nil.
func TestLocalDialAndClose(t *testing.T) {
	l := newTestLocal(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := l.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Errorf("read %q %v", buf, err)
	}
	c.Close()
	_ = l.Close()
	select {
	case <-l.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if l.Lost() != nil {
		t.Error("Lost() != nil")
	}
}

// TestLocalStdinOutlivesProcess: a command whose standard input is fed by a reader that blocks
// until its writer is done (the supervisor's naps for the bring-up probe) returns when the
// process exits, not when the reader ends.
func TestLocalStdinOutlivesProcess(t *testing.T) {
	l := newTestLocal(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() {
		done <- l.Stream(context.Background(), Command("sh", "-c", "read x; echo got $x").WithStdin(pr), func(string) {})
	}()
	if _, err := io.WriteString(pw, "1\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not return after its process exited (its stdin reader still open)")
	}
}

// TestLocalCheckSudo: in local mode as a user other than root, CheckSudo finds a sudo that asks
// for a password, refuses or hangs within its timeout, as over SSH. The test binary runs itself
// as nobody (setpriv) with a fake sudo first on PATH; it needs root to do that.
func TestLocalCheckSudo(t *testing.T) {
	if os.Getenv("K3STRAP_LOCAL_SUDO_HELPER") == "1" {
		l, err := NewLocal(LocalConfig{Host: "box", Address: "10.0.0.5"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = CheckSudo(context.Background(), l, time.Second)
		var se *SudoError
		if errors.As(err, &se) {
			fmt.Printf("RESULT reason=%s user=%s seconds=%.1f\n", se.Reason, l.User(), time.Since(start).Seconds())
		} else {
			fmt.Printf("RESULT err=%v\n", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("runs itself as nobody with setpriv: needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not found")
	}
	dir, err := os.MkdirTemp("", "k3strap-local-sudo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "remote.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, sudo, want string }{
		{"password", "echo 'sudo: a password is required' >&2; exit 1", "reason=" + SudoNeedsPassword},
		{"hangs", "exec sleep 30", "reason=" + SudoTimeout},
		{"denied", "echo 'nobody is not in the sudoers file.' >&2; exit 1", "reason=" + SudoDenied},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := filepath.Join(dir, c.name)
			if err := os.MkdirAll(fake, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(fake, "sudo"), []byte("#!/bin/sh\n"+c.sudo+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestLocalCheckSudo$")
			cmd.Env = []string{"K3STRAP_LOCAL_SUDO_HELPER=1", "PATH=" + fake + ":/usr/bin:/bin", "HOME=/"}
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			t.Logf("%s", strings.TrimSpace(string(out)))
			if err != nil || !strings.Contains(string(out), "RESULT "+c.want+" ") {
				t.Errorf("CheckSudo as nobody with a sudo that %s: %v, want %s", c.name, err, c.want)
			}
		})
	}
}
