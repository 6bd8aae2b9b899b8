// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// runFunc runs one command to its end, its output written to stdout and stderr, and returns
// its exit code: the transport of a Client (an SSH session) or of Local (a local process).
type runFunc func(ctx context.Context, cmd Cmd, stream bool, stdout, stderr io.Writer) (int, error)

// runResult is Run over run: the result of a command that ran (a non-zero exit is not an
// error), and ErrSudoPassword when sudo refused for lack of a password. host and user name
// the host and login user in errors.
func runResult(ctx context.Context, run runFunc, host, user string, cmd Cmd) (*Result, error) {
	var out, errb bytes.Buffer
	code, err := run(ctx, cmd, false, &out, &errb)
	if err != nil {
		return nil, err
	}
	res := &Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}
	if cmd.Sudo && code != 0 && sudoRefused(errb.Bytes()) {
		return res, fmt.Errorf("%s: %w for user %s: %s (allow NOPASSWD sudo for k3strap's commands, or give the password with ssh.sudoPasswordEnv / ssh.sudoPasswordFile / --ask-sudo-password)",
			host, ErrSudoPassword, user, firstLine(errb.Bytes()))
	}
	return res, nil
}

// checked turns the non-zero exit of a result Run returned into a *CommandError carrying
// stderr's last lines.
func checked(host string, cmd Cmd, res *Result, err error) (*Result, error) {
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, &CommandError{Host: host, Command: cmd.String(), ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 5)}
	}
	return res, nil
}

// streamLines is Stream over run: onLine gets each line of standard output as it arrives
// (lineWriter), never after streamLines returns; a non-zero exit is a *CommandError with
// stderr's last lines.
func streamLines(ctx context.Context, run runFunc, host string, cmd Cmd, onLine func(string)) error {
	var errb bytes.Buffer
	lw := &lineWriter{onLine: onLine}
	code, err := run(ctx, cmd, true, lw, &errb)
	lw.end()
	if err != nil {
		return err
	}
	if code != 0 {
		return &CommandError{Host: host, Command: cmd.String(), ExitCode: code, Stderr: tail(errb.Bytes(), 5)}
	}
	return nil
}

// catResult is the content of file p from the result of `cat -- p` run as root: a missing
// file is an error wrapping os.ErrNotExist, another failure a *CommandError.
func catResult(host, p string, res *Result) ([]byte, error) {
	if res.ExitCode != 0 {
		if strings.Contains(string(res.Stderr), "No such file") {
			return nil, fmt.Errorf("%s: %s: %w", host, p, os.ErrNotExist)
		}
		return nil, &CommandError{Host: host, Command: "cat " + p, ExitCode: res.ExitCode, Stderr: tail(res.Stderr, 3)}
	}
	return res.Stdout, nil
}
