// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// dialLocal is dial for a host whose connection is local (docs/edge-first-boot.md "Local
// mode"): the machine k3strap runs on, as remote.Local — commands through /bin/sh with the
// same quoting and sudo rules as over SSH, files written in place atomically. Every step,
// check, supervisor and event then runs as over SSH.
// As over SSH (remote.Config.CheckSudo), a login user other than root has sudo checked within
// the connect timeout, so that a sudo that refuses, asks for a password or hangs is named now.
func (s *session) dialLocal(ctx context.Context, hs *hostState, cfg remote.Config) (remote.Host, error) {
	name := hs.host.Name
	l, err := remote.NewLocal(remote.LocalConfig{Host: name, Address: hs.host.Address, SudoPassword: cfg.SudoPassword,
		// The command lines --verbose shows, as over SSH.
		Debug: func(msg string) { s.in.emitter(events.PhaseSSH).Debug(name, msg) }})
	if err != nil {
		return nil, err
	}
	if cfg.CheckSudo {
		timeout := cfg.ConnectTimeout
		if timeout <= 0 {
			timeout = remote.DefaultConnectTimeout
		}
		if err := remote.CheckSudo(ctx, l, timeout); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}
