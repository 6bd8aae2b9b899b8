// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/k3strap/k3strap/events"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/installer/kube"
	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/installer/remote"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

// hostState is one host during a run.
type hostState struct {
	host *inventory.Host
	// client is the host's connection; read it through c() (a retry may replace it).
	client remote.Host
	facts  *facts.Host
	plan   *plan.HostPlan
	// connErr is why the host could not be reached.
	connErr error
	// planErr is why no plan could be built for the host (reported after preflight).
	planErr error
	// staged is closed when the stage step finished uploading the host's files (nil when it
	// stages nothing for the host).
	staged chan struct{}
	// staging is what the stage step did there: written by it before staged is closed, applied
	// to facts by the host's join (applyStaging), so that no other step sees facts change
	// under it.
	staging staging
	// fresh says the host ran no K3s when the facts were gathered: its node is created by this
	// run (K3s sets its labels and taints at registration).
	fresh bool
	// selected is false for the first server when --host left it out and the command added
	// it for the token, the API or the lock.
	selected bool

	mu      sync.Mutex
	status  events.Status
	message string
	// changes are what a dry-run found pending on the host (addChange), in order.
	changes []events.Change

	// kube is the server's Kubernetes API (hostState.api, kubeapi.go), made once.
	kubeMu sync.Mutex
	kube   *kube.API
}

// c returns the host's current connection.
func (hs *hostState) c() remote.Host {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.client
}

func (hs *hostState) setClient(c remote.Host) {
	hs.mu.Lock()
	old := hs.client
	hs.client = c
	hs.mu.Unlock()
	if old != nil && old != c {
		_ = old.Close()
	}
}

func (hs *hostState) setResult(st events.Status, msg string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	// A failure is never overwritten by a later success message.
	if hs.status == events.StatusFailed && st != events.StatusFailed {
		return
	}
	hs.status, hs.message = st, msg
}

// setResultIfUnset records a result only when the host has none yet.
func (hs *hostState) setResultIfUnset(st events.Status, msg string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.status == "" {
		hs.status, hs.message = st, msg
	}
}

// addChange records one change a dry-run found pending for the host (the summary's
// HostResult.Changes).
func (hs *hostState) addChange(c events.Change) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.changes = append(hs.changes, c)
}

// appendNote adds a note to the host's summary message, keeping its status.
func (hs *hostState) appendNote(note string) { hs.note("", note) }

// note adds a note to the host's summary message and, unless the host failed, sets status st
// ("" keeps it; an unset status becomes ok).
func (hs *hostState) note(st events.Status, note string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.message = appendMsg(hs.message, note)
	switch {
	case hs.status == events.StatusFailed:
	case st != "":
		hs.status = st
	case hs.status == "":
		hs.status = events.StatusOK
	}
}

func appendMsg(msg, add string) string {
	if msg == "" {
		return add
	}
	return msg + "; " + add
}

// sh runs a k3strap script as root on hs and returns its stdout; a non-zero exit is an error
// carrying the script's last stderr lines.
func (hs *hostState) sh(ctx context.Context, label, script string, stdin string, args ...string) (string, error) {
	return hs.shWithin(ctx, 0, label, script, stdin, args...)
}

// shWithin is sh with the command's deadline (0: remote.DefaultCommandTimeout).
func (hs *hostState) shWithin(ctx context.Context, timeout time.Duration, label, script string, stdin string, args ...string) (string, error) {
	if hs.c() == nil {
		return "", fmt.Errorf("unreachable: %s", errText(hs.connErr))
	}
	cmd := remote.Script(label, script, args...).AsRoot().WithTimeout(timeout)
	if stdin != "" {
		cmd = cmd.WithStdin(strings.NewReader(stdin))
	}
	res, err := hs.c().Check(ctx, cmd)
	if err != nil {
		return "", err
	}
	return string(res.Stdout), nil
}

// serviceActive reports whether hs's K3s unit runs now (asked, not from facts).
func (hs *hostState) serviceActive(ctx context.Context) bool {
	if hs.c() == nil {
		return false
	}
	unit := k3s.Unit(string(hs.host.Role))
	if hs.facts != nil && hs.facts.InitSystem == "openrc" {
		// rc-service's status exits 0 only for a started service
		res, err := hs.c().Run(ctx, remote.Command("rc-service", unit, "status").AsRoot())
		return err == nil && res.ExitCode == 0
	}
	res, err := hs.c().Run(ctx, remote.Command("systemctl", "is-active", unit).AsRoot())
	return err == nil && strings.TrimSpace(string(res.Stdout)) == "active"
}

// systemctl stops hs's K3s unit (verb "stop": returns once it stopped) or starts it (verb
// "start") and returns when it did so. A start does not wait for systemd's READY, as apply's
// starts (startCommand) do not: a K3s agent sends READY only after a fresh node heartbeat,
// which can come minutes after its node is Ready; callers wait for the node instead.
func (hs *hostState) systemctl(ctx context.Context, verb string) (time.Time, error) {
	at := time.Now()
	if verb == "start" && hs.plan != nil {
		if hs.c() == nil {
			return at, fmt.Errorf("unreachable: %s", errText(hs.connErr))
		}
		_, err := hs.c().Check(ctx, hs.startCommand("start", false))
		return at, err
	}
	_, err := hs.shWithin(ctx, systemctlTimeout, "systemctl "+verb, systemctlScript, "", verb, k3s.Unit(string(hs.host.Role)))
	return at, err
}

// startCommand (re)starts the unit without waiting for it to become ready (the supervisor
// watches): systemd `--no-block`, OpenRC's rc-service in the background; with enable, the unit
// is enabled right after the start is queued (see enableCommand).
func (hs *hostState) startCommand(verb string, enable bool) remote.Cmd {
	openrc := hs.facts.InitSystem == "openrc"
	if !openrc && !enable {
		return remote.Command("systemctl", verb, "--no-block", hs.plan.Service).AsRoot()
	}
	label, flag := verb+" "+hs.plan.Service, ""
	if enable {
		flag = "enable"
		if !openrc {
			label = verb + " and enable " + hs.plan.Service
		}
	}
	return remote.Script(label, startScript, hs.plan.Service, verb, flag, hs.facts.InitSystem).AsRoot()
}

// enableCommand enables the unit of hs (left running or stopped as it is).
func (hs *hostState) enableCommand() remote.Cmd {
	return remote.Script("enable "+hs.plan.Service, enableScript, hs.plan.Service, hs.facts.InitSystem).AsRoot()
}
