// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/k3strap/k3strap/events"
)

// summary emits the run's summary event.
func (s *session) summary(start time.Time, err error) {
	command := s.command
	code, meaning := s.in.opts.Exit(err)
	sum := events.SummaryInfo{Command: command, OK: err == nil || KindOf(err) == KindChangesPending, ExitCode: code, ExitMeaning: meaning, Kubeconfig: s.out.kubeconfig,
		RancherURL: s.out.rancherURL, RancherPasswordFile: s.out.rancherPasswordFile, RancherPasswordNew: s.out.rancherPasswordNew,
		Seconds: time.Since(start).Seconds()}
	var failed []string
	for _, hs := range s.hosts {
		hs.mu.Lock()
		st, msg := hs.status, hs.message
		hs.mu.Unlock()
		if st == "" {
			if errors.Is(hs.connErr, context.Canceled) {
				// Ctrl-C (or another failure) stopped its connect: not the host's failure; the
				// run's own error says why.
				st, msg = events.StatusSkipped, "not connected: the run was stopped while connecting"
			} else if hs.connErr != nil {
				st, msg = events.StatusFailed, hs.connErr.Error()
			} else if err != nil {
				st, msg = events.StatusSkipped, "not reached"
			} else {
				st = events.StatusOK
			}
		}
		if st == events.StatusFailed {
			failed = append(failed, hs.host.Name)
		}
		hr := events.HostResult{Host: hs.host.Name, Role: string(hs.host.Role), Status: st, Message: msg, Changes: hs.pendingChanges()}
		sum.Changes += len(hr.Changes)
		if c := hs.c(); c != nil {
			cs := c.Stats()
			hr.SSHCommands, hr.FileTransfers = cs.Commands, cs.FileTransfers
		}
		sum.Hosts = append(sum.Hosts, hr)
	}
	file := s.in.cluster.Source
	if file == "" {
		file = "FILE"
	}
	dry := s.in.opts.DryRun
	switch {
	case dry && err != nil && KindOf(err) != KindChangesPending:
		// A failed dry-run: what to look at and the dry-run again — never a command that
		// changes anything.
		if len(failed) > 0 {
			sum.Next = append(sum.Next, "look at: "+strings.Join(failed, ", "))
		}
		sum.Next = append(sum.Next, fmt.Sprintf("k3strap %s --dry-run -f %s   # again once fixed", command, file))
	case dry && sum.Changes > 0:
		sum.Next = append(sum.Next, fmt.Sprintf("k3strap %s -f %s   # makes the %d changes above", command, file, sum.Changes))
	case dry:
	case err == nil && command == "apply":
		if s.out.kubeconfig != "" {
			sum.Next = append(sum.Next, "export KUBECONFIG="+s.out.kubeconfig, "kubectl get nodes")
		}
	case err == nil && command == "backup" && s.day2 != nil && s.day2.saved != "":
		sum.Next = append(sum.Next, s.day2.restoreCommands(file)...)
	case KindOf(err) == KindDrift:
		// check found drift: the repair is apply's, not another check.
		sum.Next = append(sum.Next, "look at: "+strings.Join(failed, ", "), fmt.Sprintf("k3strap apply --reconcile-taints -f %s   # repairs the drift by read-modify-write", file))
	case err != nil && len(failed) > 0:
		again := "re-running resumes where it stopped"
		if command == "preflight" {
			again = "again once the findings are fixed"
		}
		sum.Next = append(sum.Next, "look at: "+strings.Join(failed, ", "), fmt.Sprintf("k3strap %s -f %s   # %s", command, file, again))
	}
	s.in.emitter(events.CommandPhase(command)).Summary(sum)
}

// pendingChanges returns a copy of what a dry-run found pending on hs.
func (hs *hostState) pendingChanges() []events.Change {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]events.Change(nil), hs.changes...)
}

// changesPending returns, for a dry-run with Options.DetailedExitCode that succeeded and found
// changes, the KindChangesPending outcome; otherwise err as it is.
func (s *session) changesPending(err error) error {
	if err != nil || !s.in.opts.DryRun || !s.in.opts.DetailedExitCode {
		return err
	}
	n := 0
	for _, hs := range s.hosts {
		n += len(hs.pendingChanges())
	}
	if n == 0 {
		return nil
	}
	return &Failure{Kind: KindChangesPending, Phase: events.PhaseDryRun, Info: events.ErrorInfo{
		Message: fmt.Sprintf("%d changes pending (--dry-run --detailed-exitcode)", n)}}
}
