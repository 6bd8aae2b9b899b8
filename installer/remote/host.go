// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
)

// Host is the seam between k3strap's steps and one host: everything a step does to a host
// goes through it. *Client implements it over SSH; local mode implements it on the machine
// k3strap runs on; tests replay recorded host transcripts through it (docs/architecture.md,
// "The host seam"). Commands are Cmd values (quoted by the shell-quoting library, root through
// sudo when the login user is not root); every method takes a context and gives up when it
// ends, and every command has a deadline (Cmd.Timeout, DefaultCommandTimeout when unset).
type Host interface {
	// Host is the inventory name of the host, used in every error.
	Host() string
	// User is the login user; Address how the host is reached (host:port over SSH).
	User() string
	Address() string
	// IsRoot reports whether commands run as root without sudo; HasSudoPassword whether sudo
	// gets a password on stdin.
	IsRoot() bool
	HasSudoPassword() bool

	// Run runs cmd and waits for it; a non-zero exit is Result.ExitCode, not an error. Errors
	// are transport failures, cancellation, *DeadlineError and ErrSudoPassword.
	Run(ctx context.Context, cmd Cmd) (*Result, error)
	// Check is Run with a non-zero exit turned into a *CommandError.
	Check(ctx context.Context, cmd Cmd) (*Result, error)
	// Stream runs cmd and calls onLine for each line of its standard output as it arrives.
	Stream(ctx context.Context, cmd Cmd, onLine func(string)) error

	// ReadFile reads a file as root; a missing file is an error wrapping os.ErrNotExist.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// Download reads a possibly large file as root (e.g. a snapshot), within DownloadTimeout.
	Download(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes size bytes from r to dst atomically with mode; progress, when not nil,
	// gets the bytes sent so far.
	WriteFile(ctx context.Context, dst string, mode os.FileMode, r io.Reader, size int64, progress func(sent int64)) error
	// WriteFileResumable is WriteFile for large files whose partial upload survives a lost
	// link: a later call with the same sum continues after the verified prefix.
	WriteFileResumable(ctx context.Context, dst string, mode os.FileMode, r io.ReadSeeker, size int64, sum string, progress func(pos int64)) (Transfer, error)
	// FileMethod says how files reach the host (SFTP, or streamed over command sessions).
	FileMethod(ctx context.Context) (FileMethod, error)

	// DialContext opens a connection from the host to addr (e.g. the Kubernetes API on the
	// server's loopback): an SSH direct-tcpip channel, or a plain dial in local mode.
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)

	// Stats reports what was done so far (commands, transfers, bytes).
	Stats() Stats
	// Done is closed when the connection ended (closed, or found dead by its keepalives);
	// Lost then says why (nil after a plain Close).
	Done() <-chan struct{}
	Lost() error
	// Close ends the connection; safe to call more than once, never waits for the host.
	Close() error
}

var _ Host = (*Client)(nil)

// APITransportWrapper is what a Host may also implement to see or answer the Kubernetes API
// requests made through it (installer/kube wraps its client-go transport with it when the
// host has it): a transcript Recorder records each request and answer, a Replay answers from
// its transcript without dialling. WrapAPITransport returns the round tripper to use in
// place of rt (which talks to the API over DialContext).
type APITransportWrapper interface {
	WrapAPITransport(rt http.RoundTripper) http.RoundTripper
}
