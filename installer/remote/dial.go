// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The parts of a connect that a *ConnectError names in its Step.
const (
	// StepConnect is the TCP connect (through the bastion when there is one).
	StepConnect = "connect"
	// StepAgent is the ssh-agent: connecting to its socket, listing its keys, signing.
	StepAgent = "ssh-agent"
	// StepHandshake is the SSH key exchange, before the host key is verified.
	StepHandshake = "handshake"
	// StepHostKey is the host key check against known_hosts (reading, recording).
	StepHostKey = "host key"
	// StepAuth is the authentication: the key file, the keys offered, the host's answer.
	StepAuth = "auth"
	// StepSudo is the check that a login user other than root can become root with sudo
	// (Config.CheckSudo); its error wraps a *SudoError.
	StepSudo = "sudo"
)

// ConnectError is a failure to reach or log in to a host. Step says which part failed
// (StepConnect, StepAgent, StepHandshake, StepHostKey, StepAuth, StepSudo). When the context was
// cancelled (Ctrl-C) Err wraps context.Canceled and nothing else: the closed connection that
// cancelling left behind is not the cause.
type ConnectError struct {
	Host    string
	Address string
	Step    string
	Err     error
}

func (e *ConnectError) Error() string {
	if errors.Is(e.Err, context.Canceled) {
		return fmt.Sprintf("%s (%s): cancelled during the %s: %v", e.Host, e.Address, e.Step, e.Err)
	}
	return fmt.Sprintf("%s (%s): %s failed: %v", e.Host, e.Address, e.Step, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// cancelled is the error of an operation whose context ctx ended by cancellation: ctx.Err(),
// with the context's cause when one was given (context.WithCancelCause).
func cancelled(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// Dial connects and logs in. The key files and their certificates are loaded first (a
// certificate outside its validity window is a *CertificateError; an encrypted key's
// passphrase comes from cfg.Passphrase, which may wait for a person on a terminal: ctx only).
// Then one deadline, cfg.ConnectTimeout, bounds everything else: the ssh-agent (its socket,
// the key list, every signature), the TCP connect — or the ProxyCommand, killed at the
// deadline, or the channel through the jump host cfg.Via —, the handshake, the host key check,
// authentication and, with cfg.CheckSudo, sudo (CheckSudo gets what is left of the deadline);
// the context ends it at once (every socket it holds,
// the agent's included, is closed). Errors are *ConnectError naming the part that failed or
// timed out ("ssh-agent did not answer within 10s"); host key mismatches wrap
// *HostKeyMismatchError, refused host certificates *HostCertError, unreadable known_hosts
// files *KnownHostsError; a cancelled context
// gives an error wrapping context.Canceled (not the transport error cancelling caused).
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	addr := cfg.addr()
	if ctx.Err() != nil {
		return nil, &ConnectError{Host: cfg.Host, Address: addr, Step: StepConnect, Err: cancelled(ctx)}
	}
	// The key files first, before the deadline starts: a passphrase may be typed on a terminal.
	keys, _, err := keySigners(ctx, cfg, time.Now())
	if err != nil {
		if ctx.Err() != nil {
			err = cancelled(ctx)
		}
		return nil, &ConnectError{Host: cfg.Host, Address: addr, Step: StepAuth, Err: err}
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	deadline, _ := dctx.Deadline()
	fail := func(step string, err error) (*Client, error) {
		if ctx.Err() != nil {
			err = cancelled(ctx)
		}
		return nil, &ConnectError{Host: cfg.Host, Address: addr, Step: step, Err: err}
	}
	if ctx.Err() != nil {
		return fail(StepConnect, nil)
	}
	auths, ag, err := authMethods(dctx, cfg, keys, deadline)
	if err != nil {
		if ag != nil && (ag.timedOut.Load() || errors.Is(err, context.DeadlineExceeded)) {
			return fail(StepAgent, ag.timeoutError(cfg.ConnectTimeout))
		}
		step := StepAuth
		if ag != nil {
			step = StepAgent
		}
		return fail(step, err)
	}
	if ag != nil {
		// Authentication is over when Dial returns: the agent is not needed afterwards. A
		// request it does not answer ends at the socket's deadline (the connect deadline), or at
		// once when ctx is cancelled: the socket is closed then.
		defer func() { _ = ag.Close() }()
		stop := context.AfterFunc(ctx, func() { _ = ag.Close() })
		defer stop()
	}
	// stage is the part of the connect in progress, for an error at the deadline.
	var stage atomic.Value
	stage.Store(StepConnect)
	sshCfg := &ssh.ClientConfig{
		User:    cfg.User,
		Auth:    auths,
		Timeout: cfg.ConnectTimeout,
	}
	var verify ssh.HostKeyCallback
	switch {
	case cfg.InsecureIgnoreHostKey:
		verify = ssh.InsecureIgnoreHostKey() // #nosec: explicit --insecure-ignore-host-key
	case cfg.KnownHosts != nil:
		verify = cfg.KnownHosts.CallbackContext(dctx)
		sshCfg.HostKeyAlgorithms = cfg.KnownHosts.HostKeyAlgorithms(addr)
	default:
		return fail(StepHostKey, errors.New("no known_hosts file configured"))
	}
	sshCfg.HostKeyCallback = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		stage.Store(StepHostKey)
		if err := verify(hostname, remote, key); err != nil {
			return err
		}
		stage.Store(StepAuth)
		return nil
	}

	var conn net.Conn
	var pc *proxyConn
	switch {
	case cfg.ProxyCommand != "":
		pc, err = startProxyCommand(cfg.ProxyCommand)
		if pc != nil {
			conn = pc
		}
	case cfg.Via != nil:
		conn, err = cfg.Via.conn.DialContext(dctx, "tcp", addr)
	default:
		conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s (host down, wrong address, or a firewall dropping SSH): %w", cfg.ConnectTimeout, err)
		}
		return fail(StepConnect, err)
	}
	stage.Store(StepHandshake)
	// The handshake shares the deadline; cancellation closes the socket.
	_ = conn.SetDeadline(deadline)
	stopWatch := context.AfterFunc(dctx, func() { _ = conn.Close() })
	raw := newActivityConn(conn)
	c, chans, reqs, err := ssh.NewClientConn(raw, addr, sshCfg)
	stopped := stopWatch()
	if err != nil || !stopped {
		_ = conn.Close()
		if err == nil {
			err = dctx.Err()
		}
		at := stage.Load().(string)
		// The socket's deadline and the context's fire together; either says time is up.
		expired := dctx.Err() != nil || !time.Now().Before(deadline)
		var mm *HostKeyMismatchError
		var khe *KnownHostsError
		switch {
		case ctx.Err() != nil:
			return fail(at, nil)
		case ag != nil && ag.timedOut.Load():
			return fail(StepAgent, ag.timeoutError(cfg.ConnectTimeout))
		case errors.As(err, &mm):
			return fail(StepHostKey, mm)
		case errors.As(err, &khe):
			return fail(StepHostKey, khe)
		case errors.As(err, new(*HostCertError)):
			return fail(StepHostKey, err)
		case pc != nil && at == StepHandshake && pc.exitError() != nil:
			return fail(StepConnect, pc.exitError())
		case strings.Contains(err.Error(), "unable to authenticate"):
			return fail(StepAuth, fmt.Errorf("%w (user %q; check ssh.user, ssh.keyPath or the ssh-agent%s)", err, cfg.User, certHint(keys, cfg.User)))
		case expired && at == StepAuth:
			return fail(StepAuth, fmt.Errorf("authentication did not finish within %s: %w", cfg.ConnectTimeout, err))
		case expired && at == StepHostKey:
			return fail(StepHostKey, fmt.Errorf("the host key check did not finish within %s (known_hosts locked by another process?): %w", cfg.ConnectTimeout, err))
		case expired:
			return fail(StepHandshake, fmt.Errorf("no SSH handshake within %s: %w", cfg.ConnectTimeout, err))
		case at == StepAuth && (errors.Is(err, io.EOF) || strings.Contains(err.Error(), "disconnect")):
			// The host hung up while we offered keys: sshd's MaxAuthTries, a revoked key.
			return fail(StepAuth, fmt.Errorf("the host closed the connection during authentication (too many keys offered, or a key it refuses): %w", err))
		}
		return fail(at, err)
	}
	_ = conn.SetDeadline(time.Time{})
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = cfg.KeepaliveInterval * DefaultKeepaliveMax
	}
	cl := &Client{cfg: cfg, raw: raw, conn: ssh.NewClient(c, chans, reqs), isRoot: cfg.User == "root",
		stop: make(chan struct{}), sessions: make(chan struct{}, cfg.MaxSessions)}
	go cl.keepalive()
	if cfg.CheckSudo {
		// sudo shares the connect deadline: a sudo that hangs (PAM, LDAP, a name lookup) or
		// wants a password fails the connect, naming the host and the fix.
		if err := CheckSudo(ctx, cl, time.Until(deadline)); err != nil {
			_ = cl.Close()
			return fail(StepSudo, err)
		}
	}
	return cl, nil
}

// authMethods returns the ways to log in: one "publickey" method (x/crypto/ssh tries one per
// connection) offering the key files' signers — each certificate before its key, every key in
// order (keys are the signers keySigners loaded) — and, when no key file is usable, the keys
// of the ssh-agent (connected within ctx; every request on its socket ends at deadline).
func authMethods(ctx context.Context, cfg Config, keys []ssh.Signer, deadline time.Time) ([]ssh.AuthMethod, *agentConn, error) {
	if len(keys) > 0 {
		return []ssh.AuthMethod{ssh.PublicKeys(keys...)}, nil, nil
	}
	if !cfg.UseAgent {
		return nil, nil, errors.New("no key: set ssh.keyPath or ssh.agent")
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, errors.New("ssh.agent is on but SSH_AUTH_SOCK is not set")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
	if err != nil {
		ag := &agentConn{sock: sock}
		if ctx.Err() != nil {
			ag.timedOut.Store(ctx.Err() == context.DeadlineExceeded)
			return nil, ag, ctx.Err()
		}
		return nil, ag, fmt.Errorf("connecting to the ssh-agent at %s: %w", sock, err)
	}
	_ = conn.SetDeadline(deadline)
	ag := &agentConn{Conn: conn, sock: sock}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(agent.NewClient(ag).Signers)}, ag, nil
}

// ReadRegularFile reads a local file that must be a regular file: a FIFO or a device given by
// mistake (a key path of /dev/stdin) would block the read forever, out of reach of any
// deadline, so it is refused before it is opened.
func ReadRegularFile(p string) ([]byte, error) {
	if err := regularFile(p); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// regularFile returns an error when p exists and is not a regular file (following links).
func regularFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
	}
	return nil
}

// agentConn is the ssh-agent's socket during a Dial. Every request on it shares the connect
// deadline; one that ran into it is remembered, so that the error names the agent rather than
// the handshake it held up.
type agentConn struct {
	net.Conn
	sock     string
	timedOut atomic.Bool
}

func (a *agentConn) Read(p []byte) (int, error) {
	n, err := a.Conn.Read(p)
	a.note(err)
	return n, err
}

func (a *agentConn) Write(p []byte) (int, error) {
	n, err := a.Conn.Write(p)
	a.note(err)
	return n, err
}

func (a *agentConn) Close() error {
	if a.Conn == nil {
		return nil
	}
	return a.Conn.Close()
}

func (a *agentConn) note(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		a.timedOut.Store(true)
	}
}

// timeoutError says that the agent did not answer within d.
func (a *agentConn) timeoutError(d time.Duration) error {
	return fmt.Errorf("ssh-agent did not answer within %s (socket %s: an agent waiting for a confirmation, or one forwarded over a session that died; check `ssh-add -l`): %w",
		d, a.sock, os.ErrDeadlineExceeded)
}

// certHint describes the user certificates offered, for an authentication failure: the CA
// that signed each and its principals, which the host's TrustedUserCAKeys and the login user
// must match (sshd_config(5)); "" when no certificate was offered.
func certHint(keys []ssh.Signer, user string) string {
	var out []string
	for _, k := range keys {
		if c, ok := k.PublicKey().(*ssh.Certificate); ok {
			out = append(out, fmt.Sprintf("certificate %q signed by CA %s for principals %v", c.KeyId, ssh.FingerprintSHA256(c.SignatureKey), c.ValidPrincipals))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf("; offered %s: the host must trust that CA (TrustedUserCAKeys) and a principal must be %q", strings.Join(out, ", "), user)
}
