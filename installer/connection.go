// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
)

// RecordedKey is a host key recorded in known_hosts on first contact (trust on first use).
type RecordedKey struct {
	// Address is host:port as dialed; Fingerprint the key's SHA256 fingerprint; KnownHosts
	// the file it was recorded in.
	Address, Fingerprint, KnownHosts string
}

// ConnectionTest is the outcome of TestConnection.
type ConnectionTest struct {
	// Connected is true when k3strap logged in and ran a command.
	Connected bool
	// FailedStep names what failed when !Connected: "config", a connect step (remote.StepConnect,
	// StepAgent, StepHandshake, StepHostKey, StepAuth), "command" or remote.StepSudo (sudo did
	// not answer within the connect deadline, or the link failed); Err says why.
	FailedStep string
	Err        error
	// User and Address are who and where k3strap logged in as (address host:port).
	User, Address string
	// Uname is `uname -srm` of the host.
	Uname string
	// KeyRecorded is set when the host's key was recorded now (trust on first use).
	KeyRecorded *RecordedKey
	// Root is true when the login user is root (sudo is not needed).
	Root bool
	// SudoOK is true when sudo works for a non-root user (without a password, or with the one
	// given); SudoNeedsPassword when sudo asks for one that was not given; SudoError says
	// what else went wrong with sudo.
	SudoOK, SudoNeedsPassword bool
	SudoError                 string
	// Duration is how long the test took.
	Duration time.Duration
}

// connectionTestTimeout bounds one connection test (connect, handshake, two commands).
const connectionTestTimeout = 20 * time.Second

// TestConnection connects to h exactly as apply does (the inventory, then ~/.ssh/config, the
// bastion, known_hosts with an unknown key recorded: trust on first use), checks sudo for a
// user other than root (remote.CheckSudo: `sudo -n true`, or sudo with the given password,
// within what is left of the connect deadline) and runs `uname -srm`. ctx and a 20 s timeout
// bound it. It changes nothing on the host but known_hosts on the workstation.
func (in *Installer) TestConnection(ctx context.Context, h *inventory.Host) ConnectionTest {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, connectionTestTimeout)
	defer cancel()
	s := in.newSession(command{name: "connect"})
	defer s.close()
	res := ConnectionTest{}
	done := func(step string, err error) ConnectionTest {
		res.FailedStep, res.Err, res.Duration = step, err, time.Since(start)
		res.Connected = err == nil
		s.khMu.Lock()
		if len(s.recorded) > 0 {
			k := s.recorded[0]
			res.KeyRecorded = &k
		}
		s.khMu.Unlock()
		return res
	}
	cfg, err := s.remoteConfig(ctx, h)
	if err != nil {
		return done("config", err)
	}
	hs := &hostState{host: h}
	// sudo is tried here rather than in Dial, so that a sudo wanting a password is reported
	// (SudoNeedsPassword) instead of failing the test — within the same connect deadline.
	cfg.CheckSudo = false
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = remote.DefaultConnectTimeout
	}
	deadline := time.Now().Add(timeout)
	c, err := s.dial(ctx, hs, cfg)
	if err != nil {
		var ce *remote.ConnectError
		if errors.As(err, &ce) {
			return done(ce.Step, ce.Err)
		}
		return done("connect", err)
	}
	hs.setClient(c)
	defer func() { _ = c.Close() }()
	res.User, res.Address, res.Root = c.User(), c.Address(), c.IsRoot()
	if !res.Root {
		err := remote.CheckSudo(ctx, c, time.Until(deadline))
		var se *remote.SudoError
		switch {
		case errors.As(err, &se) && se.Reason == remote.SudoNeedsPassword:
			res.SudoNeedsPassword = true
		case errors.As(err, &se) && se.Reason == remote.SudoTimeout:
			return done(remote.StepSudo, fmt.Errorf("logged in, but %w", se))
		case errors.As(err, &se):
			res.SudoError = se.Error()
		case err != nil:
			return done(remote.StepSudo, fmt.Errorf("logged in, but sudo failed: %w", err))
		default:
			res.SudoOK = true
		}
	}
	out, err := c.Check(ctx, remote.Command("uname", "-srm").WithTimeout(cfg.ConnectTimeout))
	if err != nil {
		return done("command", fmt.Errorf("logged in, but running a command failed: %w", err))
	}
	res.Uname = strings.TrimSpace(string(out.Stdout))
	return done("", nil)
}
