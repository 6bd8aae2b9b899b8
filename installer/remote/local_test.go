// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
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
