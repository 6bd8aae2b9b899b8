// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/k3strap/k3strap/internal/sshtest"
	"github.com/k3strap/k3strap/inventory"
)

// TestDialChecksSudo: with CheckSudo, Dial runs sudo within the one connect deadline. A sudo
// that hangs fails the connect at the deadline (counted from the dial's start, not after it),
// naming the host and the fix; one that wants a password fails at once with ErrSudoPassword;
// the password given travels on stdin and a wrong one is told apart; Ctrl-C ends a hanging
// sudo at once; a root login runs nothing.
func TestDialChecksSudo(t *testing.T) {
	const pw = "s3cret-pw"
	var sudoCalls atomic.Int32
	// The host's sudo: each case sets its own (they run one after the other).
	type sudoFunc func(cmd string, stdin io.Reader, stdout, stderr io.Writer, done <-chan struct{}) int
	var sudo atomic.Pointer[sudoFunc]
	srv := sshtest.New(t, func(cmd string, stdin io.Reader, stdout, stderr io.Writer, done <-chan struct{}) int {
		if !strings.HasPrefix(cmd, "sudo ") {
			return 0
		}
		sudoCalls.Add(1)
		return (*sudo.Load())(cmd, stdin, stdout, stderr, done)
	})
	set := func(b sudoFunc) { sudo.Store(&b) }
	hang := func(_ string, _ io.Reader, _, _ io.Writer, done <-chan struct{}) int { <-done; return 0 }
	wantsPassword := func(cmd string, stdin io.Reader, _, stderr io.Writer, _ <-chan struct{}) int {
		if strings.Contains(cmd, "sudo -n ") {
			fmt.Fprintln(stderr, "sudo: a password is required")
			return 1
		}
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if strings.TrimSuffix(line, "\n") == pw {
			return 0
		}
		fmt.Fprintln(stderr, "Sorry, try again.")
		fmt.Fprintln(stderr, "sudo: 1 incorrect password attempt")
		return 1
	}
	notInstalled := func(_ string, _ io.Reader, _, stderr io.Writer, _ <-chan struct{}) int {
		fmt.Fprintln(stderr, "sh: 1: sudo: not found")
		return 127
	}
	denied := func(_ string, _ io.Reader, _, stderr io.Writer, _ <-chan struct{}) int {
		fmt.Fprintln(stderr, "ops is not in the sudoers file.")
		return 1
	}
	dial := func(ctx context.Context, user, password string, timeout time.Duration) (*Client, error, time.Duration) {
		start := time.Now()
		c, err := Dial(ctx, Config{Host: "w1", Address: "127.0.0.1", Port: srv.Port, User: user, KeyPath: srv.KeyPath,
			InsecureIgnoreHostKey: true, ConnectTimeout: timeout, CheckSudo: true, SudoPassword: inventory.Secret(password)})
		return c, err, time.Since(start)
	}
	sudoErr := func(t *testing.T, err error, reason string) *SudoError {
		t.Helper()
		var ce *ConnectError
		var se *SudoError
		if !errors.As(err, &ce) || ce.Step != StepSudo || !errors.As(err, &se) {
			t.Fatalf("want a ConnectError at step sudo wrapping a SudoError, got %T %v", err, err)
		}
		if se.Reason != reason {
			t.Fatalf("reason %q, want %q: %v", se.Reason, reason, err)
		}
		if !strings.HasPrefix(err.Error(), "w1 (127.0.0.1:") || !strings.Contains(err.Error(), "fix: ") {
			t.Errorf("the error does not name the host and the fix: %v", err)
		}
		if IsTransient(err) {
			t.Errorf("a sudo failure is retried: %v", err)
		}
		return se
	}

	t.Run("hangs", func(t *testing.T) {
		set(hang)
		c, err, took := dial(context.Background(), "ops", "", time.Second)
		if c != nil {
			t.Fatal("connected although sudo never answered")
		}
		se := sudoErr(t, err, SudoTimeout)
		if took > 1500*time.Millisecond || took < 900*time.Millisecond {
			t.Errorf("the hanging sudo ended after %s, want the 1s connect deadline", took)
		}
		if se.Timeout <= 0 || se.Timeout > time.Second {
			t.Errorf("sudo had %s, want what was left of 1s", se.Timeout)
		}
		if !strings.Contains(err.Error(), "--ssh-connect-timeout") || !strings.Contains(err.Error(), "sudo -n true") {
			t.Errorf("no fix in %v", err)
		}
	})
	t.Run("hangs, Ctrl-C", func(t *testing.T) {
		set(hang)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		_, err, took := dial(ctx, "ops", "", time.Minute)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want cancellation, got %v", err)
		}
		if took > 3*time.Second {
			t.Errorf("cancelled sudo check took %s", took)
		}
	})
	t.Run("wants a password", func(t *testing.T) {
		set(wantsPassword)
		_, err, took := dial(context.Background(), "ops", "", 5*time.Second)
		se := sudoErr(t, err, SudoNeedsPassword)
		if !errors.Is(err, ErrSudoPassword) || !strings.Contains(se.Message, "a password is required") {
			t.Errorf("%v", err)
		}
		if !strings.Contains(err.Error(), "sudoPasswordEnv") || !strings.Contains(err.Error(), "NOPASSWD") {
			t.Errorf("no fix in %v", err)
		}
		if took > 2*time.Second {
			t.Errorf("took %s: a refusal is not a wait", took)
		}
	})
	t.Run("password given", func(t *testing.T) {
		set(wantsPassword)
		c, err, _ := dial(context.Background(), "ops", pw, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !c.HasSudoPassword() {
			t.Error("a sudo that asks for the password: the client set it aside")
		}
		_ = c.Close()
	})
	// A password given for a host whose sudo needs none (NOPASSWD): such a sudo -S reads
	// nothing, so a password line sent ahead of a command's input would reach the command (as
	// the real sudo does). The client finds out at the connect and never sends it.
	t.Run("password given, none needed", func(t *testing.T) {
		set(func(cmd string, stdin io.Reader, stdout, _ io.Writer, _ <-chan struct{}) int {
			if strings.Contains(cmd, "sudo -S") {
				// What NOPASSWD sudo -S does: runs the command on the input as it is.
				b, _ := io.ReadAll(stdin)
				stdout.Write(b)
				return 0
			}
			if strings.HasPrefix(cmd, "sudo -n -- cat") {
				b, _ := io.ReadAll(stdin)
				stdout.Write(b)
			}
			return 0
		})
		c, err, _ := dial(context.Background(), "ops", pw, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.HasSudoPassword() {
			t.Error("sudo needs no password, but the client keeps sending it")
		}
		res, err := c.Run(context.Background(), Command("cat").AsRoot().WithStdin(strings.NewReader("data\n")))
		if err != nil {
			t.Fatal(err)
		}
		switch got := string(res.Stdout); {
		case strings.Contains(got, pw):
			t.Error("the password reached the command's input")
		case got != "data\n":
			t.Errorf("the command's input was %q, want %q", got, "data\n")
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		set(wantsPassword)
		_, err, _ := dial(context.Background(), "ops", "wrong", 5*time.Second)
		sudoErr(t, err, SudoBadPassword)
		if strings.Contains(err.Error(), "wrong") {
			t.Errorf("the password reached the error: %v", err)
		}
	})
	t.Run("not installed", func(t *testing.T) {
		set(notInstalled)
		_, err, _ := dial(context.Background(), "ops", "", 5*time.Second)
		sudoErr(t, err, SudoUnavailable)
	})
	t.Run("denied", func(t *testing.T) {
		set(denied)
		_, err, _ := dial(context.Background(), "ops", "", 5*time.Second)
		se := sudoErr(t, err, SudoDenied)
		if !strings.Contains(se.Message, "sudoers") {
			t.Errorf("%v", err)
		}
	})
	t.Run("root skips sudo", func(t *testing.T) {
		set(hang)
		before := sudoCalls.Load()
		c, err, _ := dial(context.Background(), "root", "", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if n := sudoCalls.Load() - before; n != 0 {
			t.Errorf("a root login ran sudo %d times", n)
		}
	})
}
