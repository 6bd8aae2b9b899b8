// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Dropbear (https://matt.ucc.asn.au/dropbear/dropbear.html), the SSH server of many edge and
// BusyBox images, differs from OpenSSH in ways k3strap meets: a short command-line limit and
// channel close timing (below), and no SFTP unless sftp-server is installed (session_files.go).

// maxDropbearCommand is the longest exec command line (bytes) sent to a Dropbear server as is.
// Dropbear reads the command of an exec request with a limit of MAX_CMD_LEN, 9000 bytes
// (Dropbear's sysoptions.h), and ends the whole connection ("String too long") on a longer one;
// a longer k3strap script (gathering facts is ~20 KiB) is staged in a file first (stageScript).
const maxDropbearCommand = 8000

// stageTimeout bounds writing a long script into a file on the host.
const stageTimeout = time.Minute

// stageScriptCmd writes standard input (a k3strap script) into "script" in a new private
// directory (mktemp -d: mode 0700, owned by the login user) and prints the file's path.
const stageScriptCmd = `d=$(mktemp -d "${TMPDIR:-/tmp}/k3strap.XXXXXX") && cat > "$d/script" && echo "$d/script"`

// runStagedScript runs the staged script $1 with the remaining arguments (standard input passed
// on: a sudo password line or data reach it as they would reach sh -c), then removes its
// directory and exits with the script's status.
const runStagedScript = `f=$1; shift; sh "$f" "$@"; r=$?; rm -rf "${f%/*}"; exit $r`

// limitsCommands reports whether the host's SSH server limits exec command lines (Dropbear,
// told by its version string).
func (c *Client) limitsCommands() bool {
	return strings.Contains(strings.ToLower(string(c.conn.ServerVersion())), "dropbear")
}

// fitCommand returns cmd as it can be sent to this host: cmd itself, or — for a script whose
// command line is too long for the host's SSH server — a short command that runs the script
// staged in a file first (one more command, without sudo; the script is k3strap's own text,
// never a secret, and travels on that command's standard input).
func (c *Client) fitCommand(ctx context.Context, cmd Cmd) (Cmd, error) {
	if cmd.Script == "" || !c.limitsCommands() || len(cmd.line(c.become())) <= maxDropbearCommand {
		return cmd, nil
	}
	stage := Script("stage "+cmd.name()+" script", stageScriptCmd).WithStdin(strings.NewReader(cmd.Script)).WithTimeout(stageTimeout)
	res, err := c.Check(ctx, stage)
	if err != nil {
		return cmd, err
	}
	p := strings.TrimSpace(string(res.Stdout))
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\n") {
		return cmd, fmt.Errorf("%s: staging the %s script: unexpected answer %q", c.cfg.Host, cmd.name(), firstLine(res.Stdout))
	}
	cmd.Label = cmd.name()
	cmd.Script = runStagedScript
	cmd.Args = append([]string{p}, cmd.Args...)
	return cmd, nil
}

// dropbearQuiet is how long no new channel is opened after k3strap closed a channel early on a
// Dropbear server (a cancelled command, an SFTP start that found no server). Measured against
// Dropbear 2022.83 with x/crypto/ssh: a session opened right after signalling and closing a
// running one failed with EOF in 3 of 15 tries, 0 of 15 after a 300 ms pause — the client
// reuses the closed channel's number at once, and a late message of the old channel then ends
// the new one.
const dropbearQuiet = 300 * time.Millisecond

// closedEarly records that a channel was closed early: on a Dropbear server, new channels
// wait dropbearQuiet.
func (c *Client) closedEarly() {
	if c.limitsCommands() {
		c.quietUntil.Store(time.Now().Add(dropbearQuiet).UnixNano())
	}
}

// waitQuiet waits until no channel closed early is within dropbearQuiet, at most until ctx is
// done or the connection closes.
func (c *Client) waitQuiet(ctx context.Context) {
	d := time.Until(time.Unix(0, c.quietUntil.Load()))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-c.stop:
	}
}
