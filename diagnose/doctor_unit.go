// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"time"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/facts"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// The host and its K3s unit: hosts doctor could not read, a unit that does not stay up.

// checkUnreachable: hosts doctor could not read.
func checkUnreachable(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, ne := range in.Nodes {
		if ne.Err == "" {
			continue
		}
		out = append(out, finding.Finding{ID: checkid.Unreachable, Severity: finding.Error, Host: nameOr(ne.Node, ne.Host),
			Title:    "doctor could not read this host",
			Message:  "Nothing was gathered from " + ne.Host + ": " + ne.Err,
			Evidence: []finding.Evidence{{Text: ne.Err, Source: ne.Host + ": ssh"}},
			Fixes:    []string{"check that the host is up and reachable over SSH with the same settings (user, key, bastion, sudo)"}})
	}
	return out
}

func nameOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// slowStart is how long a K3s unit may stay activating without a restart before doctor says so:
// an agent sends READY only once its network is up, which K3s users see take minutes
// (docs/k3s.md "Readiness of the unit").
const slowStart = 10 * time.Minute

// crashLooping reports whether systemd shows the unit failing, by the crash-loop rule the
// bring-up supervisor shares (k3s.CrashLoop): failed, or not active after repeated restarts (an
// exit waiting for its restart, SubState auto-restart, counts as one) — or stopped. A unit
// activating with no restart is starting (K3s has not sent READY yet), and one restart is
// systemd recovering from one exit, not failing (docs/k3s.md "Readiness of the unit").
func crashLooping(f *facts.DoctorNode) bool {
	if f.ActiveState == "active" {
		return false
	}
	n := f.Restarts
	if f.SubState == "auto-restart" {
		n++
	}
	return k3s.CrashLoop(f.ActiveState, n) || f.ActiveState != "activating"
}

// checkCrashLoop: a K3s unit that does not stay up (crash loop, failed start) or that
// restarted, with the fatal journal lines as evidence (ServiceFailing); a unit activating for
// longer than slowStart without a restart is a slow start.
func checkCrashLoop(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		f := ne.Facts
		if f == nil || f.Unit == "" {
			continue
		}
		name := nameOr(ne.Node, ne.Host)
		ev := Evidence{NodeName: name, Journal: f.Journal, ServiceState: f.ActiveState}
		// F1's shutdown is reported by checkF1 with its cause.
		if n, _ := ev.journalMatches(k3s.LineShutdownTaint); n > 0 {
			continue
		}
		state := finding.Evidence{Text: fmt.Sprintf("unit %s is %s/%s, systemd restarted it %s", f.Unit, f.ActiveState, f.SubState, plural(f.Restarts, "time", "times")),
			Source: hostSrc(ne, "systemctl show "+f.Unit)}
		switch {
		case crashLooping(f):
			d := ServiceFailing(ev, f.Unit)
			fd := fromDiagnosis(d, finding.Error, name, ne)
			fd.ID = checkid.CrashLoop
			if d.ID == "critical-config-mismatch" {
				fd.ID = d.ID
			}
			fd.Evidence = append(fd.Evidence, state)
			out = append(out, fd)
		case f.ActiveState == "activating" && f.Restarts == 0:
			if f.StartedAt.IsZero() || in.Now.Sub(f.StartedAt) < slowStart {
				continue
			}
			since := in.Now.Sub(f.StartedAt).Round(time.Second)
			fd := finding.Finding{ID: checkid.SlowStart, Severity: finding.Warning, Host: name,
				Title: fmt.Sprintf("%s has been starting for %s", f.Unit, since),
				Message: fmt.Sprintf("systemd still waits for %s to say it is ready, %s after it started, without a restart. K3s says so once its "+
					"network is up; that normally takes seconds to a few minutes.", f.Unit, since),
				Evidence: []finding.Evidence{state, {Text: "main process started " + f.StartedAt.UTC().Format(time.RFC3339), Source: hostSrc(ne, "systemctl show "+f.Unit)}},
				Fixes:    []string{"read `journalctl -u " + f.Unit + "` for what K3s waits for (the API server through its tunnel, the node's PodCIDR, flannel)"}}
			for _, l := range FatalLines(f.Journal) {
				fd.Evidence = append(fd.Evidence, finding.Evidence{Text: trimLine(l), Source: hostSrc(ne, "journalctl -u "+f.Unit)})
			}
			out = append(out, fd)
		case f.Restarts > 0:
			fatal := FatalLines(f.Journal)
			fd := finding.Finding{ID: checkid.ServiceRestarts, Severity: finding.Warning, Host: name,
				Title:   fmt.Sprintf("%s restarted %s", f.Unit, plural(f.Restarts, "time", "times")),
				Message: fmt.Sprintf("The %s service runs now but systemd restarted it %s.", f.Unit, plural(f.Restarts, "time", "times")),
				Evidence: []finding.Evidence{{Text: fmt.Sprintf("NRestarts=%d, active since %s", f.Restarts, f.ActiveSince.Format(time.RFC3339)),
					Source: hostSrc(ne, "systemctl show "+f.Unit)}},
				Fixes: []string{"read `journalctl -u " + f.Unit + "` around the restarts"}}
			if len(fatal) > 0 {
				fd.Message += " K3s last exited because: " + journalMessage(fatal[len(fatal)-1])
			}
			for _, l := range fatal {
				fd.Evidence = append(fd.Evidence, finding.Evidence{Text: trimLine(l), Source: hostSrc(ne, "journalctl -u "+f.Unit)})
			}
			out = append(out, fd)
		}
	}
	return out
}
