package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer"
	"github.com/k3strap/k3strap/installer/remote"
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

// sshTestTimeout bounds one connection test (connect, handshake, two commands).
const sshTestTimeout = 20 * time.Second

// TestSSH connects to h exactly as apply does (installer.Installer.Dial: the inventory, then
// ~/.ssh/config, the bastion, known_hosts with an unknown key recorded — trust on first use,
// reported in HostKey). It runs `uname -srm` and, for a user other than root, `sudo -n true`.
// ctx and a 20 s timeout bound it. It changes nothing on the host.
func TestSSH(ctx context.Context, c *inventory.Cluster, h *inventory.Host) SSHResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, sshTestTimeout)
	defer cancel()
	res := SSHResult{}
	done := func(ok bool, detail string) SSHResult {
		res.OK, res.Detail, res.Seconds = ok, detail, time.Since(start).Seconds()
		return res
	}
	// Dial exactly as apply does (~/.ssh/config, bastion, known_hosts); a recorded host key
	// arrives as a warning event.
	in := installer.New(c, installer.Options{}, events.SinkFunc(func(e events.Event) {
		if e.Type == events.Warning && strings.Contains(e.Message, "trust on first use") {
			res.HostKey = e.Message
		}
	}))
	cl, closeAll, err := in.Dial(ctx, h)
	if err != nil {
		var ce *remote.ConnectError
		if errors.As(err, &ce) {
			return done(false, fmt.Sprintf("%s failed: %v", ce.Step, ce.Err))
		}
		return done(false, err.Error())
	}
	defer closeAll()
	out, err := cl.Check(ctx, remote.Command("uname", "-srm"))
	if err != nil {
		return done(false, "logged in, but running a command failed: "+err.Error())
	}
	detail := fmt.Sprintf("%s@%s · %s", cl.User(), cl.Address(), strings.TrimSpace(string(out.Stdout)))
	if !cl.IsRoot() {
		r, err := cl.Run(ctx, remote.Command("true").AsRoot())
		switch {
		case errors.Is(err, remote.ErrSudoPassword):
			detail += " · sudo needs a password (set ssh.sudoPasswordEnv, or run with --ask-sudo-password)"
		case err != nil:
			return done(false, "logged in, but sudo failed: "+err.Error())
		case r.ExitCode != 0:
			detail += fmt.Sprintf(" · sudo failed (exit %d): %s", r.ExitCode, strings.TrimSpace(string(r.Stderr)))
		default:
			detail += " · sudo ok"
		}
	}
	return done(true, detail)
}
