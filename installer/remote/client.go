// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package remote is k3strap's SSH transport: one connection per host (golang.org/x/crypto/ssh),
// reused by every step; commands built with a shell-quoting library; files over SFTP
// (github.com/pkg/sftp), or streamed over sessions on hosts without it (FileMethod), written
// atomically with their mode; host keys verified against known_hosts with trust on first use;
// sudo for non-root users with the password, when there is one, on stdin only; contexts and
// timeouts on everything; keepalives to notice dead links.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/k3strap/k3strap/inventory"
)

// Defaults for Config fields left zero.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultKeepaliveInterval = 10 * time.Second
	// DefaultKeepaliveMax is how many unanswered keepalives close the connection.
	DefaultKeepaliveMax = 3
)

// Config says how to reach one host.
type Config struct {
	// Host is the inventory name, used in every error.
	Host string
	// Address is the DNS name or IP; Port the TCP port (22 when 0).
	Address string
	Port    int
	User    string
	// KeyPath is a private key file; KeyPaths further ones offered after it, in order (every
	// IdentityFile of ssh_config). An encrypted key is decrypted with Passphrase.
	KeyPath  string
	KeyPaths []string
	// CertificatePaths are user certificates (OpenSSH CertificateFile), each paired with the
	// key it certifies; a key without one uses <key>-cert.pub when that file exists, as
	// OpenSSH does. A certificate outside its validity window is a *CertificateError.
	CertificatePaths []string
	// Passphrase returns the passphrase of the encrypted key file keyPath and where it came
	// from (for errors: "$VAR", "file F", "the terminal"); ErrNoPassphrase when it has no
	// source. Nil: no source. It is called before the connect deadline starts (a person may
	// be typing); ctx ends it.
	Passphrase func(ctx context.Context, keyPath string) (pass []byte, source string, err error)
	// UseAgent offers the keys of the ssh-agent at $SSH_AUTH_SOCK when no key file is usable
	// (none given, or encrypted without a passphrase source).
	UseAgent bool
	// ProxyCommand, when set, is a command line (tokens already expanded, see inventory.
	// ExpandProxyCommand) run locally with /bin/sh whose stdin and stdout are the connection
	// (OpenSSH ProxyCommand); it is killed when the connection closes or the connect deadline
	// passes. Exclusive with Via.
	ProxyCommand string
	// KnownHosts verifies host keys; required unless InsecureIgnoreHostKey.
	KnownHosts *KnownHosts
	// InsecureIgnoreHostKey accepts any host key (the caller warns loudly).
	InsecureIgnoreHostKey bool
	// ConnectTimeout bounds everything Dial does, together: the ssh-agent (connecting to it,
	// listing its keys, every signature), the TCP connect (through the bastion when Via is set),
	// the SSH handshake, the host key check (known_hosts lock included), authentication and,
	// with CheckSudo, sudo. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// KeepaliveInterval is the time between keepalive@openssh.com requests; after
	// DefaultKeepaliveMax unanswered ones the connection is closed and commands fail.
	KeepaliveInterval time.Duration
	// SudoPassword is fed to `sudo -S` on stdin when the user is not root. Empty means sudo -n.
	SudoPassword inventory.Secret
	// CheckSudo makes Dial, for a login user other than root, run `true` through sudo (as
	// CheckSudo does) within what is left of ConnectTimeout: a sudo that refuses, asks for a
	// password it was not given or does not answer is a *ConnectError with Step StepSudo
	// wrapping a *SudoError. Off for jump hosts, which run nothing as root.
	CheckSudo bool
	// Via, when set, is the bastion connection the TCP stream is opened through (ProxyJump).
	Via *Client
	// MaxSessions bounds the channels open at once on the connection (exec and SFTP); sshd
	// refuses more than its MaxSessions (default 10). Default DefaultMaxSessions.
	MaxSessions int
	// StallTimeout declares the link dead when an upload moves no byte for this long (the
	// connection is closed and the upload fails with a *TransportError, resumable after a
	// reconnect). Default KeepaliveInterval × DefaultKeepaliveMax.
	StallTimeout time.Duration
	// Debug, when set, is called with every remote command the client runs (Cmd.String: the
	// command line as root, scripts by their label; it never holds secrets) and every file it
	// writes. It must not block.
	Debug func(msg string)
}

// DefaultMaxSessions stays below OpenSSH's default MaxSessions of 10.
const DefaultMaxSessions = 8

func (c Config) addr() string {
	port := c.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(c.Address, strconv.Itoa(port))
}

// Stats counts what a Client did: the round trips that cost time on slow links.
type Stats struct {
	// Commands is the number of exec channels opened.
	Commands int64
	// FileTransfers is the number of files written or read (over SFTP or sessions).
	FileTransfers int64
	// SFTPSessions is the number of SFTP subsystem channels opened (at most one per Client).
	SFTPSessions int64
	// BytesUploaded is the payload of file uploads (over SFTP or sessions).
	BytesUploaded int64
}

// Client is one SSH connection to one host. It is safe for concurrent use.
//
// No call blocks on a dead peer: every operation also ends when the context is done or the
// connection is closed, and the keepalive (and an upload's stall deadline) closes a connection
// whose link is dead. Close closes the network connection first, so that every reader of the
// connection (channels, the SFTP session) ends at once.
type Client struct {
	cfg    Config
	raw    *activityConn
	conn   *ssh.Client
	isRoot bool
	// noSudoPassword: the host's sudo needs no password, so the one given is never sent
	// (CheckSudo).
	noSudoPassword atomic.Bool

	sftpMu sync.Mutex
	sftpSt *sftpStart

	commands, transfers, sftps, bytesUp atomic.Int64

	// sessions holds one token per open channel (MaxSessions).
	sessions chan struct{}

	stop chan struct{}
	once sync.Once
	// lostErr is why the link was found dead (set once, before stop is closed by dead); nil
	// when the connection was closed on purpose.
	lostErr atomic.Pointer[error]
	// quietUntil (unix nanoseconds) holds back new channels after a channel k3strap closed
	// early on a Dropbear server (dropbear.go).
	quietUntil atomic.Int64
}

// keepalive sends keepalive@openssh.com every KeepaliveInterval and closes the connection
// after DefaultKeepaliveMax intervals in a row in which neither a reply nor any other byte
// arrived from the host (a busy but slow link, such as an upload under packet loss, is alive
// as long as the host keeps acknowledging).
func (c *Client) keepalive() {
	// A connection the host or the network ended (the host's kernel reset it, its network
	// namespace went away with a crash, a firewall cut it) is found dead at once, not at the
	// next keepalive: what waits on the host then says why.
	go func() {
		err := c.conn.Wait()
		select {
		case <-c.stop: // closed on purpose
		default:
			if err == nil {
				err = io.EOF
			}
			c.dead(fmt.Errorf("the connection was closed by the host or the network: %w", err))
		}
	}()
	t := time.NewTicker(c.cfg.KeepaliveInterval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		sent := time.Now()
		res := make(chan error, 1)
		go func() {
			_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
			res <- err
		}()
		select {
		case <-c.stop:
			return
		case err := <-res:
			if err != nil {
				c.dead(fmt.Errorf("keepalive request failed: %w", err))
				return
			}
			missed = 0
		case <-time.After(c.cfg.KeepaliveInterval):
			if c.raw.lastRead().After(sent) {
				missed = 0
				continue
			}
			missed++
			if missed >= DefaultKeepaliveMax {
				c.dead(fmt.Errorf("host unreachable: %d keepalives in a row unanswered (%s apart)", missed, c.cfg.KeepaliveInterval))
				return
			}
		}
	}
}

// dead closes a connection whose link was found dead (keepalives unanswered, an upload that
// stalled), recording why for Lost.
func (c *Client) dead(why error) {
	c.lostErr.CompareAndSwap(nil, &why)
	_ = c.Close()
}

// closedCause is why the connection is closed, for the error of an operation that found it
// so: what Lost says when the link was found dead, else errClosed.
func (c *Client) closedCause() error {
	if err := c.Lost(); err != nil {
		return fmt.Errorf("connection closed: %w", err)
	}
	return errClosed
}

// Done is closed when the connection is closed: on purpose (Close) or because its link was
// found dead (then Lost says why).
func (c *Client) Done() <-chan struct{} { return c.stop }

// Lost returns why the connection's link was found dead — keepalives unanswered for
// KeepaliveInterval × DefaultKeepaliveMax, a failed keepalive request, an upload that stalled,
// the connection ended by the host or the network — or nil while the connection is open or when it was closed on purpose.
func (c *Client) Lost() error {
	if p := c.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

// debug reports msg through Config.Debug.
func (c *Client) debug(msg string) {
	if c.cfg.Debug != nil {
		c.cfg.Debug(msg)
	}
}

// activityConn is the client's network connection; it records when bytes last arrived.
type activityConn struct {
	net.Conn
	last atomic.Int64
}

func newActivityConn(c net.Conn) *activityConn {
	a := &activityConn{Conn: c}
	a.last.Store(time.Now().UnixNano())
	return a
}

func (a *activityConn) Read(p []byte) (int, error) {
	n, err := a.Conn.Read(p)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (a *activityConn) lastRead() time.Time { return time.Unix(0, a.last.Load()) }

// Host returns the inventory name of the host.
func (c *Client) Host() string { return c.cfg.Host }

// User returns the login user.
func (c *Client) User() string { return c.cfg.User }

// Address returns host:port.
func (c *Client) Address() string { return c.cfg.addr() }

// IsRoot reports whether the login user is root (no sudo needed).
func (c *Client) IsRoot() bool { return c.isRoot }

// HasSudoPassword reports whether sudo gets a password on stdin.
func (c *Client) HasSudoPassword() bool {
	return !c.isRoot && c.cfg.SudoPassword != "" && !c.noSudoPassword.Load()
}

func (c *Client) skipSudoPassword() { c.noSudoPassword.Store(true) }

// Stats returns what the client has done so far.
func (c *Client) Stats() Stats {
	return Stats{Commands: c.commands.Load(), FileTransfers: c.transfers.Load(), SFTPSessions: c.sftps.Load(), BytesUploaded: c.bytesUp.Load()}
}

// Close ends the connection (and the SFTP session). Safe to call more than once, and it never
// waits for the host: the network connection is closed first, which ends every reader of it
// (pending channel opens, commands, SFTP requests fail at once), then the SSH client and the
// SFTP session are released in the background.
func (c *Client) Close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		// Closing a TCP socket never blocks; a stream through a bastion is a channel whose close
		// message may wait for a dead bastion link, so it is closed in the background.
		if c.cfg.Via == nil {
			err = c.raw.Close()
		} else {
			go func() { _ = c.raw.Close() }()
		}
		go func() {
			_ = c.conn.Close()
			c.sftpMu.Lock()
			st := c.sftpSt
			c.sftpMu.Unlock()
			if st != nil {
				<-st.done
				if st.sc != nil {
					_ = st.sc.Close()
				}
			}
		}()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

// closed reports whether the connection was closed (by Close or by the keepalive).
func (c *Client) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// SSH returns the underlying connection, for dialing through this host as a bastion.
func (c *Client) SSH() *ssh.Client { return c.conn }

// Result is the outcome of a command that ran (whatever its exit code).
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the remote exit status; -1 when the command was killed by a signal.
	ExitCode int
}

// OK reports exit code 0.
func (r *Result) OK() bool { return r.ExitCode == 0 }

// CommandError is a command that ran and exited non-zero.
type CommandError struct {
	Host     string
	Command  string
	ExitCode int
	Stderr   string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: `%s` exited %d", e.Host, e.Command, e.ExitCode)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// TransportError is a failure of the connection itself (it dropped, or a channel could not be
// opened), as opposed to a command that ran and failed. Idempotent steps may be retried after
// reconnecting.
type TransportError struct {
	Host string
	Op   string
	Err  error
}

func (e *TransportError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Host, e.Op, e.Err) }

func (e *TransportError) Unwrap() error { return e.Err }

// IsTransient reports whether err is a transport failure worth a retry after reconnecting:
// a *TransportError, or a connect error where the host answered but the connection failed
// (refused, reset, closed during the handshake, or a handshake that did not finish in time on
// a slow or lossy link). Permanent failures are not: a host that does not answer at all (TCP
// connect timeout, no route), host key and known_hosts problems, a key file that cannot be
// read or parsed, a key the host refuses, an ssh-agent that does not answer, algorithms the
// two sides do not share, a command that did not finish within its deadline, and
// cancellation.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var de *DeadlineError
	if errors.As(err, &de) {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		switch ce.Step {
		case StepHostKey, StepAuth, StepAgent:
			return false
		case StepSudo:
			// sudo's answer is the host's configuration; only a link lost while asking is not.
			var te *TransportError
			return errors.As(ce.Err, &te)
		case StepHandshake:
			return !strings.Contains(ce.Err.Error(), "no common algorithm")
		}
		msg := ce.Err.Error()
		return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
			strings.Contains(msg, "EOF")
	}
	return false
}

// ErrSudoPassword is wrapped by errors of commands that needed root when sudo asked for a
// password that k3strap does not have.
var ErrSudoPassword = errors.New("sudo needs a password")

func (c *Client) become() become {
	switch {
	case c.isRoot:
		return becomeNone
	case c.HasSudoPassword():
		return becomeSudoPass
	default:
		return becomeSudoN
	}
}

// Run runs cmd and waits for it, at most cmd.Timeout (DefaultCommandTimeout when unset). A
// non-zero exit is not an error here: look at Result.ExitCode, or use Check. Errors are
// transport failures, cancellation (the remote process gets SIGTERM and the channel is
// closed), a *DeadlineError when the command did not finish in time (stopped the same way),
// and sudo refusing for lack of a password (wrapping ErrSudoPassword).
func (c *Client) Run(ctx context.Context, cmd Cmd) (*Result, error) {
	return runResult(ctx, c.run, c.cfg.Host, c.cfg.User, cmd)
}

// Check runs cmd and turns a non-zero exit into a *CommandError carrying stderr's last lines.
func (c *Client) Check(ctx context.Context, cmd Cmd) (*Result, error) {
	res, err := c.Run(ctx, cmd)
	return checked(c.cfg.Host, cmd, res, err)
}

// Stream runs cmd and calls onLine for each line of its standard output as it arrives (the
// line without its newline). It returns when the command exits or ctx is done (the remote
// process gets SIGTERM), or at cmd.Timeout when set — a *DeadlineError (a stream whose
// context has no deadline gets DefaultCommandTimeout). Standard error is returned in the
// error when the exit is non-zero.
func (c *Client) Stream(ctx context.Context, cmd Cmd, onLine func(string)) error {
	return streamLines(ctx, c.run, c.cfg.Host, cmd, onLine)
}

// cancelGrace is how long a cancelled command gets to end after SIGTERM and the channel close
// before run returns without it (the channel is then left to the connection's fate).
const cancelGrace = 2 * time.Second

func (c *Client) run(parent context.Context, cmd Cmd, stream bool, stdout, stderr io.Writer) (int, error) {
	ctx := parent
	timeout := commandTimeout(parent, cmd, stream)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, timeout)
		defer cancel()
	}
	// ended is the error of a command whose context ended: its own deadline, or the caller's
	// context (cancelled, or the caller's deadline).
	ended := func() error {
		if parent.Err() == nil && timeout > 0 {
			return &DeadlineError{Host: c.cfg.Host, Command: cmd.name(), Timeout: timeout}
		}
		if errors.Is(parent.Err(), context.Canceled) {
			return fmt.Errorf("%s: %s: %w", c.cfg.Host, cmd.name(), cancelled(parent))
		}
		return fmt.Errorf("%s: %s: %w", c.cfg.Host, cmd.name(), parent.Err())
	}
	if err := c.acquire(ctx); err != nil {
		if ctx.Err() != nil {
			return 0, ended()
		}
		return 0, &TransportError{Host: c.cfg.Host, Op: cmd.name(), Err: err}
	}
	c.debug(cmd.String())
	// The channel is opened and the command started in the background: on a dead link both
	// wait for an answer that never comes, and ctx or the connection's close must end the wait.
	type started struct {
		sess *ssh.Session
		err  error
		open bool // the channel opened (the error, if any, is from starting the command)
	}
	st := make(chan started, 1)
	go func() {
		c.waitQuiet(ctx)
		sess, err := c.conn.NewSession()
		// Dropbear may refuse a channel opened while one k3strap ends is still closing (the
		// open answers EOF, the connection lives on; dropbear.go): held back and tried again.
		for try := 0; err != nil && errors.Is(err, io.EOF) && c.limitsCommands() && !c.closed() && ctx.Err() == nil && try < 2; try++ {
			c.closedEarly()
			c.waitQuiet(ctx)
			sess, err = c.conn.NewSession()
		}
		if err != nil {
			st <- started{err: err}
			return
		}
		sess.Stdout, sess.Stderr = smallCopy(stdout), smallCopy(stderr)
		var stdinPipe io.WriteCloser
		line, in := cmd.sent(c.become(), c.cfg.SudoPassword.Reveal)
		if in != nil {
			if stdinPipe, err = sess.StdinPipe(); err != nil {
				_ = sess.Close()
				st <- started{err: err, open: true}
				return
			}
		}
		if err := sess.Start(line); err != nil {
			_ = sess.Close()
			st <- started{err: err, open: true}
			return
		}
		if in != nil {
			go copyStdin(stdinPipe, in)
		}
		st <- started{sess: sess, open: true}
	}()
	var sess *ssh.Session
	select {
	case s := <-st:
		if s.err != nil {
			c.release()
			if !s.open || c.closed() || errors.Is(s.err, io.EOF) {
				return 0, &TransportError{Host: c.cfg.Host, Op: "opening a channel for " + cmd.name(), Err: s.err}
			}
			return 0, fmt.Errorf("%s: starting %s: %w", c.cfg.Host, cmd.name(), s.err)
		}
		sess = s.sess
	case <-ctx.Done():
		c.closedEarly()
		go func() {
			if s := <-st; s.sess != nil {
				_ = s.sess.Signal(ssh.SIGTERM)
				_ = s.sess.Close()
				c.closedEarly()
			}
			c.release()
		}()
		return 0, ended()
	case <-c.stop:
		go func() { <-st; c.release() }()
		if parent.Err() != nil {
			return 0, ended()
		}
		return 0, &TransportError{Host: c.cfg.Host, Op: cmd.name(), Err: c.closedCause()}
	}
	c.commands.Add(1)
	waited := make(chan error, 1)
	go func() {
		waited <- sess.Wait()
		_ = sess.Close()
		c.release()
	}()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		// SIGTERM and the channel close are messages to the host; on a dead link they may
		// wait, so they are sent in the background and the wait for the end is bounded.
		c.closedEarly() // before the next command can open a channel, and again once sent
		go func() {
			_ = sess.Signal(ssh.SIGTERM)
			_ = sess.Close()
			c.closedEarly()
		}()
		select {
		case <-waited:
		case <-c.stop:
		case <-time.After(cancelGrace):
		}
		return 0, ended()
	case <-c.stop:
		if parent.Err() != nil {
			return 0, ended()
		}
		return 0, &TransportError{Host: c.cfg.Host, Op: cmd.name(), Err: c.closedCause()}
	}
	if err == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		if ee.Signal() != "" {
			return -1, nil
		}
		return ee.ExitStatus(), nil
	}
	var em *ssh.ExitMissingError
	if errors.As(err, &em) || errors.Is(err, io.EOF) {
		return 0, &TransportError{Host: c.cfg.Host, Op: cmd.name(), Err: errors.New("connection lost before the command finished")}
	}
	return 0, &TransportError{Host: c.cfg.Host, Op: cmd.name(), Err: err}
}

// acquire takes a channel slot, waiting while MaxSessions channels are open.
func (c *Client) acquire(ctx context.Context) error {
	select {
	case c.sessions <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return errors.New("connection closed")
	}
}

func (c *Client) release() { <-c.sessions }

func sudoRefused(stderr []byte) bool {
	s := string(stderr)
	return strings.Contains(s, "a password is required") || strings.Contains(s, "a terminal is required") ||
		strings.Contains(s, "incorrect password attempt") || strings.Contains(s, "no password was provided")
}

// tail returns the last n non-empty lines of b joined by "; ".
func tail(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// DialContext opens a TCP connection from the host to addr through the SSH connection (a
// direct-tcpip channel), e.g. to the Kubernetes API on the server's loopback. It fails at once
// when the connection has ended.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.closed() {
		return nil, fmt.Errorf("%s: connection closed: %w", c.cfg.Host, net.ErrClosed)
	}
	return c.conn.DialContext(ctx, network, addr)
}
