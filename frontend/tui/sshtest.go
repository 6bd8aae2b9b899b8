package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

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

// TestSSH connects to h the way the installer does (installer/remote.Dial; the host's SSH
// settings over the cluster's; key paths resolved against c.Source; ssh-agent when
// SSH_AUTH_SOCK is set and the inventory does not say otherwise), verifying the host key
// against known_hosts and recording an unknown one (trust on first use, reported in HostKey).
// It runs `uname -srm` and, for a user other than root, `sudo -n true`. ctx and a 20 s timeout
// bound it. It changes nothing on the host.
func TestSSH(ctx context.Context, c *inventory.Cluster, h *inventory.Host) SSHResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, sshTestTimeout)
	defer cancel()
	sc := c.HostSSH(h)
	kh := c.ResolvePath(sc.KnownHosts)
	if kh == "" {
		kh = c.ResolvePath(inventory.DefaultKnownHosts)
	}
	res := SSHResult{}
	known := &remote.KnownHosts{Path: kh, OnRecord: func(_, fp string) {
		res.HostKey = fmt.Sprintf("recorded host key %s in %s (trust on first use)", fp, kh)
	}}
	cfg := remote.Config{
		Host:           h.Name,
		Address:        h.Address,
		Port:           sc.Port,
		User:           sc.User,
		KeyPath:        c.ResolvePath(sc.KeyPath),
		KnownHosts:     known,
		ConnectTimeout: sc.ConnectTimeout.D(),
	}
	if sc.Agent != nil {
		cfg.UseAgent = *sc.Agent
	} else {
		cfg.UseAgent = os.Getenv("SSH_AUTH_SOCK") != ""
	}
	done := func(ok bool, detail string) SSHResult {
		res.OK, res.Detail, res.Seconds = ok, detail, time.Since(start).Seconds()
		return res
	}
	cl, err := remote.Dial(ctx, cfg)
	if err != nil {
		var ce *remote.ConnectError
		if errors.As(err, &ce) {
			return done(false, fmt.Sprintf("%s failed: %v", ce.Step, ce.Err))
		}
		return done(false, err.Error())
	}
	defer cl.Close()
	out, err := cl.Check(ctx, remote.Command("uname", "-srm"))
	if err != nil {
		return done(false, "logged in, but running a command failed: "+err.Error())
	}
	detail := fmt.Sprintf("%s@%s · %s", sc.User, cl.Address(), strings.TrimSpace(string(out.Stdout)))
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
