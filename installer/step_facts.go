// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/remote"
)

// factsStep runs the facts script on every reachable host: one SSH command per host that
// prints one document (OS, kernel, K3s state, checksums of every managed path).
//
// Reads: connections; s.planner.ManagedPaths. Writes: hostState.facts (nil when unreachable:
// connErr set) and hostState.fresh.
type factsStep struct{}

func (factsStep) Phase() events.Phase { return events.PhaseFacts }

func (factsStep) Summary() string {
	return "gather facts: one command per host (OS, kernel, ports, network and firewalls, K3s state, checksums of managed files)"
}

func (factsStep) Run(ctx context.Context, s *session) error {
	s.gather(ctx)
	return ctx.Err()
}

// gather runs the facts script on every reachable host: one command per host.
func (s *session) gather(ctx context.Context) {
	em := s.in.emitter(events.PhaseFacts)
	em.Started("gathering facts")
	hosts := s.reachable()
	s.each(ctx, hosts, func(ctx context.Context, hs *hostState) {
		cmd := s.factsCommand(hs)
		sent := time.Now()
		res, err := hs.c().Run(ctx, cmd)
		received := time.Now()
		if err == nil && res.ExitCode != 0 {
			err = &remote.CommandError{Host: hs.host.Name, Command: cmd.String(), ExitCode: res.ExitCode, Stderr: strings.TrimSpace(string(res.Stderr))}
		}
		if err != nil {
			hs.connErr = err
			s.contact(hs, err)
			em.Step(hs.host.Name, "facts", events.StatusFailed, err.Error())
			return
		}
		f, err := facts.Parse(res.Stdout)
		if err != nil {
			hs.connErr = fmt.Errorf("reading the facts document: %w", err)
			em.Step(hs.host.Name, "facts", events.StatusFailed, hs.connErr.Error())
			return
		}
		f.Name = hs.host.Name
		f.SetClockSkew(sent, received)
		hs.facts, hs.fresh = f, !f.K3s.Installed()
		em.Step(hs.host.Name, "facts", events.StatusOK, fmt.Sprintf("%s %s, kernel %s, %s", f.OS.PrettyName, f.Arch, f.KernelRelease, describeK3s(f)))
	})
	if len(hosts) == 0 {
		em.Finished(events.StatusSkipped, "no host reachable")
		return
	}
	em.Finished(phaseOutcome(hosts, "gathered", func(hs *hostState) bool { return hs.facts != nil }))
}

// factsCommand is the facts script for hs, run as the login user (it calls sudo itself, with
// the password on stdin when there is one) within factsTimeout.
func (s *session) factsCommand(hs *hostState) remote.Cmd {
	script := facts.Script(facts.ScriptInput{Files: s.planner.ManagedPaths(hs.host), SudoPasswordOnStdin: hs.c().HasSudoPassword(),
		ResolvConf: s.in.cluster.ResolvConf(hs.host)})
	cmd := remote.Script("gather facts", script).WithTimeout(factsTimeout)
	cmd.PasswordStdin = true
	return cmd
}

func describeK3s(f *facts.Host) string {
	if !f.K3s.Installed() {
		return "no K3s"
	}
	s := "K3s " + f.K3s.BinaryVersion
	if f.K3s.Service != "" {
		s += fmt.Sprintf(" (%s %s)", f.K3s.Service, f.K3s.ServiceActive)
	}
	return s
}
