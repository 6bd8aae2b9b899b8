// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/installer/remote"
)

// dialLocal is dial for a host whose connection is local (docs/edge-first-boot.md "Local
// mode"): the machine k3strap runs on, as remote.Local — commands through /bin/sh with the
// same quoting and sudo rules as over SSH, files written in place atomically. Every step,
// check, supervisor and event then runs as over SSH.
func (s *session) dialLocal(hs *hostState, cfg remote.Config) (remote.Host, error) {
	name := hs.host.Name
	return remote.NewLocal(remote.LocalConfig{Host: name, Address: hs.host.Address, SudoPassword: cfg.SudoPassword,
		// The command lines --verbose shows, as over SSH.
		Debug: func(msg string) { s.in.emitter(events.PhaseSSH).Debug(name, msg) }})
}
