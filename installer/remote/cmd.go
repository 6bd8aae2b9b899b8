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

// scriptStdinMin is the length (bytes) from which a Script travels on the command's standard
// input instead of its command line, which then carries only a launcher (scriptLauncher, 359
// bytes, or scriptLauncherWhole, 176; a shorter script goes as it is). A long line shows in
// the host's process list, and in sudo's log on every run, split into "(command continued)"
// entries past sudo's syslog limit of 960 bytes (MAXSYSLOGLEN in sudo's logging.c; newlines and
// tabs are logged as #012 and #011); the SSH library keeps a buffer the size of the largest
// packet a connection sent for the connection's life (the facts script's 12 KB line cost 16 KiB
// per host: docs/preflight.md "Cost at scale"); and Dropbear ends the connection on a command
// line over its MAX_CMD_LEN of 9,000 bytes (dropbear.go). docs/ssh.md "What a host sees of
// k3strap's commands".
const scriptStdinMin = 512

// ScriptEnd is the line that follows a script sent on standard input: scriptLauncher runs
// nothing unless it arrived, so a script cut short by a dropped connection never runs in part.
// Exported for test servers that run what they are sent: the script is the input up to it.
const ScriptEnd = "#k3strap-script-end"

// scriptLauncher is the Script of a command whose script travels on standard input with the
// command's own input behind it: it reads lines up to ScriptEnd with the shell's own read (which
// takes a pipe a byte at a time, so the input after it stays unread: BusyBox head -c reads
// ahead), then evaluates them in the same shell, with the same $0 and arguments. It exits 3
// with a message on standard error when the script did not arrive whole.
const scriptLauncher = `k3strap_src= k3strap_whole=
while IFS= read -r k3strap_line; do
	if [ "$k3strap_line" = '` + ScriptEnd + `' ]; then k3strap_whole=1; break; fi
	k3strap_src="$k3strap_src$k3strap_line
"
done
if [ -z "$k3strap_whole" ]; then echo 'k3strap: the script did not arrive whole on standard input' >&2; exit 3; fi
unset k3strap_line k3strap_whole
eval "$k3strap_src"`

// scriptLauncherWhole is scriptLauncher for a script that is the whole input: it reads it with
// one cat (a byte-at-a-time read costs 6 ms per 15 KB under dash and 24 ms under bash) and runs
// it only when it ends with ScriptEnd (a comment line to the shell).
const scriptLauncherWhole = `k3strap_src=$(cat)
case $k3strap_src in
*'
` + ScriptEnd + `') eval "$k3strap_src" ;;
*) echo 'k3strap: the script did not arrive whole on standard input' >&2; exit 3 ;;
esac`

// sent returns what a transport sends for cmd under privilege escalation b: the command line
// and the standard input (nil: none). password is the sudo password; its line is sent only
// under becomeSudoPass, for a command that runs as root (sudo -S reads it first) or reads it
// itself (PasswordStdin: after the script, which reads it). A Script of scriptStdinMin bytes or
// more goes ahead of the command's own input, read by scriptLauncher, or by scriptLauncherWhole
// when nothing follows it.
func (c Cmd) sent(b become, password func() string) (line string, stdin io.Reader) {
	var pw io.Reader
	if (c.Sudo || c.PasswordStdin) && b == becomeSudoPass {
		pw = strings.NewReader(password() + "\n")
	}
	if len(c.Script) < scriptStdinMin {
		return c.line(b), inputOf(pw, c.Stdin)
	}
	script := strings.NewReader(strings.TrimSuffix(c.Script, "\n") + "\n" + ScriptEnd + "\n")
	before, after := pw, io.Reader(nil) // sudo -S reads the password before the launcher runs
	if !c.Sudo {
		before, after = nil, pw // the script reads it itself (PasswordStdin)
	}
	c.Script = scriptLauncherWhole
	if after != nil || c.Stdin != nil {
		c.Script = scriptLauncher
	}
	return c.line(b), inputOf(before, script, after, c.Stdin)
}

// inputOf is the readers that are not nil, one after the other (nil when none is).
func inputOf(rs ...io.Reader) io.Reader {
	var parts []io.Reader
	for _, r := range rs {
		if r != nil {
			parts = append(parts, r)
		}
	}
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	return io.MultiReader(parts...)
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
