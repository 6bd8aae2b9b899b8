// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"fmt"
	"time"
)

// Deadlines of remote operations — the one place for their defaults. A remote command or SFTP
// operation never waits longer than its deadline, even on a link that stays up while the host
// does nothing (a hung filesystem, a script stuck on a lock): the command is stopped and the
// call returns a *DeadlineError naming it.
const (
	// DefaultCommandTimeout bounds a command run with Run or Check whose Cmd sets no Timeout
	// (and a Stream whose context carries no deadline), and every SFTP operation but the
	// transfer of a file's content (which ends when no byte moves for Config.StallTimeout).
	DefaultCommandTimeout = 5 * time.Minute
	// DownloadTimeout bounds Download over SFTP: a multi-GiB etcd snapshot over a slow link
	// (1 GiB at 1 MiB/s is 17 minutes); a dead link ends it sooner (keepalives).
	DownloadTimeout = time.Hour
	// uploadFinishRate is the slowest disk k3strap plans for when it copies and checks an
	// uploaded file on the host (finishScript, blockSumsScript): 8 MiB/s, an SD card.
	uploadFinishRate = 8 << 20
)

// DeadlineError is a remote command (or SFTP operation) that did not finish within its
// deadline; it was stopped (SIGTERM, the channel closed). It is not transient: running it
// again would wait as long.
type DeadlineError struct {
	Host string
	// Command is the command's label (Cmd.Label, or its program).
	Command string
	// Timeout is the deadline it had.
	Timeout time.Duration
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("%s on %s did not finish within %s (it was stopped; the host may be overloaded, or something on it hangs)", e.Command, e.Host, e.Timeout)
}

// commandTimeout returns the deadline cmd runs under: its own Timeout, else
// DefaultCommandTimeout — for a stream (a watch the caller ends) only when ctx carries no
// deadline of its own; 0 means ctx alone bounds it.
func commandTimeout(ctx context.Context, cmd Cmd, stream bool) time.Duration {
	if cmd.Timeout > 0 {
		return cmd.Timeout
	}
	if stream {
		if _, ok := ctx.Deadline(); ok {
			return 0
		}
	}
	return DefaultCommandTimeout
}

// finishTimeout is the deadline of a command that reads a file of size bytes on the host once
// or twice (copy and checksum): DefaultCommandTimeout, longer for a file that takes longer at
// uploadFinishRate.
func finishTimeout(size int64) time.Duration {
	return max(DefaultCommandTimeout, time.Duration(2*size/uploadFinishRate)*time.Second+time.Minute)
}

// sessionUploadMinRate is the slowest average rate k3strap plans for when it streams a file
// over a session (hosts without SFTP): 32 KiB/s. The stall deadline (Config.StallTimeout)
// ends a stream that stops moving long before.
const sessionUploadMinRate = 32 << 10

// transferTimeout is the deadline of a session that streams n bytes to the host:
// DefaultCommandTimeout, longer for a file that takes longer at sessionUploadMinRate.
func transferTimeout(n int64) time.Duration {
	return max(DefaultCommandTimeout, time.Duration(n/sessionUploadMinRate)*time.Second+time.Minute)
}
