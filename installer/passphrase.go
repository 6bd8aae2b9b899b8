// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/k3strap/k3strap/installer/remote"
)

// passphrase returns the source of the passphrases of encrypted SSH keys for remote.Config:
// the environment variable env (ssh.keyPassphraseEnv), else the first line of file
// (ssh.keyPassphraseFile), else a prompt on the terminal when standard input is one (asked
// once per key and run, one prompt at a time, ended by ctx with the terminal restored), else
// remote.ErrNoPassphrase (the key is left to the ssh-agent). Never a flag: a command line is
// visible to every user of the machine.
func (s *session) passphrase(env, file string) func(ctx context.Context, keyPath string) ([]byte, string, error) {
	return func(ctx context.Context, keyPath string) ([]byte, string, error) {
		switch {
		case env != "":
			v, ok := os.LookupEnv(env)
			if !ok || v == "" {
				return nil, "", fmt.Errorf("ssh.keyPassphraseEnv names %s, which is not set: export it, or remove ssh.keyPassphraseEnv", env)
			}
			return []byte(v), "$" + env, nil
		case file != "":
			b, err := remote.ReadRegularFile(file)
			if err != nil {
				return nil, "", fmt.Errorf("ssh.keyPassphraseFile: %w", err)
			}
			line, _, _ := bytes.Cut(b, []byte("\n"))
			return bytes.TrimSuffix(line, []byte("\r")), "file " + file, nil
		}
		return s.promptPassphrase(ctx, keyPath)
	}
}

// promptPassphrase asks for the passphrase of keyPath on the terminal (stdin, echo off; the
// question on stderr), up to three times as ssh(1). A passphrase typed once is reused for the
// run's other connections.
func (s *session) promptPassphrase(ctx context.Context, keyPath string) ([]byte, string, error) {
	c := &s.sshcfg
	tty, out := c.tty, c.ttyOut
	if tty == nil {
		tty = os.Stdin
	}
	if out == nil {
		out = os.Stderr
	}
	fd := int(tty.Fd())
	if !term.IsTerminal(fd) {
		return nil, "", remote.ErrNoPassphrase
	}
	c.passOnce.Do(func() { c.passTurn = make(chan struct{}, 1) })
	select {
	case c.passTurn <- struct{}{}:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	defer func() { <-c.passTurn }()
	c.passMu.Lock()
	if p, ok := c.typed[keyPath]; ok {
		c.passMu.Unlock()
		return bytes.Clone(p), "the terminal", nil
	}
	c.passMu.Unlock()
	state, err := term.GetState(fd)
	if err != nil {
		return nil, "", remote.ErrNoPassphrase
	}
	type answer struct {
		b   []byte
		err error
	}
	// As ssh(1): three tries, each checked against the key before it is kept for the run.
	pem, err := remote.ReadRegularFile(keyPath)
	if err != nil {
		return nil, "", err
	}
	for try := 1; ; try++ {
		done := make(chan answer, 1)
		fmt.Fprintf(out, "Enter passphrase for key %s: ", keyPath)
		go func() {
			b, err := term.ReadPassword(fd)
			done <- answer{b, err}
		}()
		var a answer
		select {
		case a = <-done:
		case <-ctx.Done():
			// The read goroutine stays blocked until a line comes; echo must come back now.
			_ = term.Restore(fd, state)
			fmt.Fprintln(out)
			return nil, "", ctx.Err()
		}
		fmt.Fprintln(out)
		if a.err != nil {
			return nil, "", fmt.Errorf("reading the passphrase from the terminal: %w", a.err)
		}
		if _, err := ssh.ParsePrivateKeyWithPassphrase(pem, a.b); errors.Is(err, x509.IncorrectPasswordError) && try < 3 { //nolint:staticcheck // what x/crypto/ssh returns for a wrong passphrase
			fmt.Fprintln(out, "Wrong passphrase, try again.")
			continue
		} else if err != nil {
			// Wrong a third time, or another problem: Dial reports it with the key's name.
			return a.b, "the terminal", nil
		}
		c.passMu.Lock()
		if c.typed == nil {
			c.typed = map[string][]byte{}
		}
		c.typed[keyPath] = bytes.Clone(a.b)
		c.passMu.Unlock()
		return a.b, "the terminal", nil
	}
}
