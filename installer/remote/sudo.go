// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Why sudo failed, in SudoError.Reason: the same words as the facts script's sudo modes
// (facts/gather.sh), so that preflight says the same thing whichever of the two found it.
const (
	// SudoNeedsPassword: `sudo -n` refused because a password is required, and none was given.
	SudoNeedsPassword = "needs-password"
	// SudoBadPassword: sudo refused the password given (ssh.sudoPasswordEnv / File / prompt).
	SudoBadPassword = "bad-password"
	// SudoUnavailable: sudo is not installed on the host.
	SudoUnavailable = "unavailable"
	// SudoDenied: sudo refused the user for another reason (not in sudoers, a PAM rule).
	SudoDenied = "denied"
	// SudoTimeout: sudo did not answer within what was left of the connect deadline.
	SudoTimeout = "timeout"
)

// SudoError is sudo failing for a login user other than root when the connect checked it
// (Config.CheckSudo, CheckSudo). It unwraps to ErrSudoPassword when sudo wanted a password it
// did not get (SudoNeedsPassword) or refused the one given (SudoBadPassword).
type SudoError struct {
	Host, User string
	// Reason is one of SudoNeedsPassword, SudoBadPassword, SudoUnavailable, SudoDenied,
	// SudoTimeout.
	Reason string
	// Message is the first line sudo wrote to standard error (the password travels on
	// standard input only and is never in it); empty for SudoTimeout.
	Message string
	// Timeout is the time sudo had, for SudoTimeout.
	Timeout time.Duration
}

func (e *SudoError) Error() string { return e.Problem() + "; fix: " + e.Fix() }

// Problem is what went wrong, without the fix: one sentence naming the user and quoting sudo's
// first line (the facts script's sudo modes are worded by the same method, in preflight).
func (e *SudoError) Problem() string {
	said := ""
	if e.Message != "" {
		said = " (sudo said: " + e.Message + ")"
	}
	switch e.Reason {
	case SudoNeedsPassword:
		return fmt.Sprintf("user %s is not root and sudo needs a password, but none was given%s", e.User, said)
	case SudoBadPassword:
		return fmt.Sprintf("sudo rejected the password given for user %s%s", e.User, said)
	case SudoUnavailable:
		return fmt.Sprintf("user %s is not root and sudo is not installed", e.User)
	case SudoTimeout:
		return fmt.Sprintf("sudo did not answer within %s for user %s (it waits for something on the host)", e.Timeout.Round(10*time.Millisecond), e.User)
	}
	return fmt.Sprintf("user %s cannot become root with sudo%s", e.User, said)
}

// Fix is what the user does about e: one sentence, with the sudoers line to add where one
// helps (the inventory fields as written under spec.ssh or a host's ssh).
func (e *SudoError) Fix() string {
	switch e.Reason {
	case SudoNeedsPassword:
		return fmt.Sprintf("give the sudo password with ssh.sudoPasswordEnv or ssh.sudoPasswordFile (or --ask-sudo-password), or allow passwordless sudo: echo '%s ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/k3strap", e.User)
	case SudoBadPassword:
		return "check the password in ssh.sudoPasswordEnv / ssh.sudoPasswordFile for this host"
	case SudoUnavailable:
		return "log in as root (ssh.user: root) or install sudo and allow the login user to use it"
	case SudoTimeout:
		return fmt.Sprintf("`ssh %s@HOST sudo -n true` must return at once: look for a slow name lookup of the host's own name (/etc/hosts), an LDAP or PAM module that does not answer, or a sudoers rule that prompts; or raise --ssh-connect-timeout", e.User)
	}
	return fmt.Sprintf("allow %s to run commands as root: add it to /etc/sudoers.d/ (e.g. '%s ALL=(ALL) ALL') or log in as root", e.User, e.User)
}

// Unwrap returns ErrSudoPassword for a password sudo wanted or refused, else nil.
func (e *SudoError) Unwrap() error {
	if e.Reason == SudoNeedsPassword || e.Reason == SudoBadPassword {
		return ErrSudoPassword
	}
	return nil
}

// passwordSkipper is a host that can set its sudo password aside when its sudo needs none
// (Client, Local): CheckSudo tells it.
type passwordSkipper interface{ skipSudoPassword() }

// CheckSudo runs `true` as root on h through sudo (`sudo -n`, or `sudo -S` with the password
// on stdin when h has one) within timeout, so that a sudo that refuses, asks for a password or
// hangs is found when the host is connected, not later. A root login returns nil at once and
// runs nothing. When h has a sudo password but its sudo needs none (`sudo -n true` succeeds:
// a NOPASSWD rule), h sets the password aside and never sends it (HasSudoPassword is then
// false). Errors: *SudoError (SudoTimeout when sudo did not finish within timeout; timeout ≤ 0
// gives it no time), cancellation of ctx, or a transport error.
func CheckSudo(ctx context.Context, h Host, timeout time.Duration) error {
	if h.IsRoot() {
		return nil
	}
	timeoutErr := &SudoError{Host: h.Host(), User: h.User(), Reason: SudoTimeout, Timeout: max(timeout, 0)}
	if timeout <= 0 {
		return timeoutErr
	}
	start := time.Now()
	if h.HasSudoPassword() {
		if ps, ok := h.(passwordSkipper); ok {
			// A password given for a host whose sudo needs none (a NOPASSWD rule): sudo -S
			// would not read the line sent ahead of a command's input, and the command would
			// get it — written into the file an upload writes, read as the path probe's
			// program. Asked once here; the password then goes nowhere on this host.
			res, err := h.Run(ctx, Command("sudo", "-n", "true").WithTimeout(timeout))
			if err == nil && res.ExitCode == 0 {
				ps.skipSudoPassword()
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	timeout -= time.Since(start)
	if timeout <= 0 {
		return timeoutErr
	}
	res, err := h.Run(ctx, Command("true").AsRoot().WithTimeout(timeout))
	var de *DeadlineError
	switch {
	case errors.As(err, &de):
		return timeoutErr
	case errors.Is(err, ErrSudoPassword):
		reason := SudoNeedsPassword
		if h.HasSudoPassword() {
			reason = SudoBadPassword
		}
		return &SudoError{Host: h.Host(), User: h.User(), Reason: reason, Message: firstLine(res.Stderr)}
	case err != nil:
		return err
	case res.ExitCode == 0:
		return nil
	}
	msg := firstLine(res.Stderr)
	reason := SudoDenied
	if res.ExitCode == 127 || strings.Contains(msg, "not found") {
		reason = SudoUnavailable
	}
	return &SudoError{Host: h.Host(), User: h.User(), Reason: reason, Message: msg}
}
