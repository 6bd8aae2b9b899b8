// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"strings"
	"time"
)

// Dropbear (https://matt.ucc.asn.au/dropbear/dropbear.html), the SSH server of many edge and
// BusyBox images, differs from OpenSSH in ways k3strap meets: a short command-line limit and
// channel close timing (below), and no SFTP unless sftp-server is installed (session_files.go).

// Dropbear reads the command of an exec request with a limit of MAX_CMD_LEN, 9000 bytes
// (Dropbear's sysoptions.h), and ends the whole connection ("String too long") on a longer one.
// k3strap's long scripts (gathering facts is ~12 KB) travel on the command's standard input
// instead (Cmd.sent, scriptStdinMin), on every server, so no command line comes near it.

// limitsCommands reports whether the host's SSH server limits exec command lines (Dropbear,
// told by its version string).
func (c *Client) limitsCommands() bool {
	return strings.Contains(strings.ToLower(string(c.conn.ServerVersion())), "dropbear")
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
