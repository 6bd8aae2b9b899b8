// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"context"
	"fmt"

	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/inventory"
)

// SSHResult is the outcome of trying one host's SSH connection.
type SSHResult struct {
	// OK is true when k3strap logged in and ran a command.
	OK bool
	// Detail says what was found: user@address:port, the kernel and architecture, whether
	// sudo works without a password; or, when !OK, what failed and what to check.
	Detail string
	// HostKey is set when the host's key was recorded now (trust on first use): its SHA256
	// fingerprint and the known_hosts file.
	HostKey string
	// Seconds is how long the test took.
	Seconds float64
}

// SSHTester tries the SSH connection to host h of cluster c.
type SSHTester func(ctx context.Context, c *inventory.Cluster, h *inventory.Host) SSHResult

// TestSSH connects to h exactly as apply does, through installer.Installer.TestConnection
// (the inventory, then ~/.ssh/config, the bastion, known_hosts with an unknown key recorded —
// trust on first use, reported in HostKey), and says what it found. It changes nothing on
// the host.
func TestSSH(ctx context.Context, c *inventory.Cluster, h *inventory.Host) SSHResult {
	t := installer.New(c, installer.Options{}, nil).TestConnection(ctx, h)
	res := SSHResult{Seconds: t.Duration.Seconds()}
	if k := t.KeyRecorded; k != nil {
		res.HostKey = fmt.Sprintf("recorded host key %s for %s in %s (trust on first use)", k.Fingerprint, k.Address, k.KnownHosts)
	}
	if !t.Connected {
		res.Detail = fmt.Sprintf("%s failed: %v", t.FailedStep, t.Err)
		return res
	}
	res.OK = true
	res.Detail = fmt.Sprintf("%s@%s · %s", t.User, t.Address, t.Uname)
	switch {
	case t.Root:
	case t.SudoNeedsPassword:
		res.Detail += " · sudo needs a password (set ssh.sudoPasswordEnv, or run with --ask-sudo-password)"
	case t.SudoError != "":
		res.Detail += " · sudo failed (" + t.SudoError + ")"
	default:
		res.Detail += " · sudo ok"
	}
	return res
}
