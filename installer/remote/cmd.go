// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"io"
	"strings"
	"time"

	"al.essio.dev/pkg/shellescape"
)

// Cmd is one remote command. Every value that reaches the remote shell is quoted with
// al.essio.dev/pkg/shellescape; secrets never go into Args, Script or Env — they travel on
// Stdin or in files.
type Cmd struct {
	// Args is the argv of the command (Args[0] is the program).
	Args []string
	// Script, when set, is a shell script of k3strap's own (never user text) run as
	// `sh -c Script k3strap Args...`, so that Args become $1, $2, ...
	Script string
	// Env are NAME=VALUE pairs passed through env(1) after privilege escalation. Not secret.
	Env []string
	// Sudo runs the command as root (sudo when the login user is not root).
	Sudo bool
	// Stdin feeds the command's standard input; nil means none.
	Stdin io.Reader
	// Label is a short name for messages (e.g. "gather facts"); defaults to the program name.
	Label string
	// PasswordStdin says the command reads the sudo password itself from the first line of
	// stdin (a script that calls sudo -S only where it needs root); the client prepends the
	// password line when it has one.
	PasswordStdin bool
	// Timeout is the command's deadline: the command is stopped and the call returns a
	// *DeadlineError naming it when it has not finished by then. 0 means DefaultCommandTimeout
	// for Run and Check, and the context alone for Stream (DefaultCommandTimeout when the
	// context has no deadline).
	Timeout time.Duration
}

// Command returns a Cmd running argv.
func Command(argv ...string) Cmd { return Cmd{Args: argv} }

// Script returns a Cmd running a k3strap shell script with positional arguments.
func Script(label, script string, args ...string) Cmd {
	return Cmd{Label: label, Script: script, Args: args}
}

// AsRoot returns c with Sudo set.
func (c Cmd) AsRoot() Cmd { c.Sudo = true; return c }

// WithStdin returns c reading r on standard input.
func (c Cmd) WithStdin(r io.Reader) Cmd { c.Stdin = r; return c }

// WithTimeout returns c with its deadline set to d (see Cmd.Timeout).
func (c Cmd) WithTimeout(d time.Duration) Cmd { c.Timeout = d; return c }

// WithEnv returns c with NAME=VALUE pairs added.
func (c Cmd) WithEnv(pairs ...string) Cmd {
	c.Env = append(append([]string(nil), c.Env...), pairs...)
	return c
}

// become is the privilege-escalation prefix.
type become int

const (
	becomeNone     become = iota // login user is root
	becomeSudoN                  // sudo -n: fail instead of asking for a password
	becomeSudoPass               // sudo -S: password on the first line of stdin
)

// line renders the command line sent to the remote shell.
func (c Cmd) line(b become) string {
	var parts []string
	if c.Sudo {
		switch b {
		case becomeSudoN:
			parts = append(parts, "sudo", "-n", "--")
		case becomeSudoPass:
			parts = append(parts, "sudo", "-S", "-p", "", "--")
		}
	}
	if len(c.Env) > 0 {
		parts = append(parts, "env")
		parts = append(parts, c.Env...)
	}
	if c.Script != "" {
		parts = append(parts, "sh", "-c", c.Script, "k3strap")
	}
	parts = append(parts, c.Args...)
	return shellescape.QuoteCommand(parts)
}

// String is the command for logs: the rendered line as root, scripts shortened to their label.
// It never contains secrets because Cmd never holds any.
func (c Cmd) String() string {
	if c.Script != "" {
		s := "sh -c <" + c.name() + " script>"
		if len(c.Args) > 0 {
			s += " " + shellescape.QuoteCommand(c.Args)
		}
		if c.Sudo {
			s = "sudo " + s
		}
		return s
	}
	return c.line(becomeSudoN)
}

func (c Cmd) name() string {
	if c.Label != "" {
		return c.Label
	}
	if len(c.Args) > 0 {
		return c.Args[0]
	}
	return "command"
}

// firstLine returns the first non-empty line of b, trimmed, for error messages.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
