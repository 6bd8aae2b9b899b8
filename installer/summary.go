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
	sum := events.SummaryInfo{Command: command, OK: err == nil, ExitCode: code, ExitMeaning: meaning, Kubeconfig: s.out.kubeconfig,
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
		hr := events.HostResult{Host: hs.host.Name, Role: string(hs.host.Role), Status: st, Message: msg}
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
	switch {
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
