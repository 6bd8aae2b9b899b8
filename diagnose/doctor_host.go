// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/checkid"
	"github.com/k3strap/k3strap/finding"
	"github.com/k3strap/k3strap/k3s"
)

// A host's resources: K3s certificates, the clock, disk space.

// checkCerts: K3s certificates expiring within CertWarn (cert-expiring) or expired.
func checkCerts(in *Input) []finding.Finding {
	var out []finding.Finding
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		if ne.Facts == nil {
			continue
		}
		var soon, gone []finding.Evidence
		first := time.Time{}
		for _, c := range ne.Facts.Certs {
			left := c.NotAfter.Sub(in.Now)
			line := finding.Evidence{Text: fmt.Sprintf("%s (CN %s) expires %s (%s)", c.Path, c.Subject, c.NotAfter.UTC().Format(time.RFC3339), humanDays(left)), Source: hostSrc(ne, c.Path)}
			switch {
			case left <= 0:
				gone = append(gone, line)
			case left < in.CertWarn:
				soon = append(soon, line)
			default:
				continue
			}
			if first.IsZero() || c.NotAfter.Before(first) {
				first = c.NotAfter
			}
		}
		name := nameOr(ne.Node, ne.Host)
		fixes := []string{
			"restart K3s on the node (`systemctl restart " + unitOf(ne) + "`): K3s renews certificates that expire within 120 days at start",
			"or `k3s certificate rotate` (servers) then restart; CA certificates need `k3s certificate rotate-ca`",
		}
		if len(gone) > 0 {
			out = append(out, finding.Finding{ID: checkid.CertExpired, Severity: finding.Error, Host: name,
				Title: fmt.Sprintf("%s on %s expired", plural(len(gone), "K3s certificate", "K3s certificates"), name), Message: "Expired certificates break the API, the kubelet or joins.",
				Evidence: append(gone, soon...), Fixes: fixes})
			continue
		}
		if len(soon) > 0 {
			out = append(out, finding.Finding{ID: checkid.CertExpiring, Severity: finding.Warning, Host: name,
				Title:    fmt.Sprintf("%s on %s expire within %d days", plural(len(soon), "K3s certificate", "K3s certificates"), name, int(in.CertWarn.Hours()/24)),
				Message:  fmt.Sprintf("The first expires %s (%s).", first.UTC().Format(time.RFC3339), humanDays(first.Sub(in.Now))),
				Evidence: soon, Fixes: fixes})
		}
	}
	return out
}

func humanDays(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("%d days ago", int(-d.Hours()/24))
	}
	if d < 48*time.Hour {
		return "in " + d.Round(time.Minute).String()
	}
	return fmt.Sprintf("in %d days", int(d.Hours()/24))
}

// checkClockSkew: hosts whose clock differs from the workstation's by more than ClockSkewMax.
func checkClockSkew(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, ne := range in.Nodes {
		if ne.Facts == nil || ne.Facts.RemoteClock.IsZero() {
			continue
		}
		s := ne.ClockSkew
		if s < 0 {
			s = -s
		}
		if s <= in.ClockSkewMax {
			continue
		}
		sev := finding.Warning
		if s > k3s.ClockSkewError {
			sev = finding.Error
		}
		name := nameOr(ne.Node, ne.Host)
		out = append(out, finding.Finding{ID: checkid.DoctorClockSkew, Severity: sev, Host: name,
			Title:    fmt.Sprintf("the clock of %s is off by %s", name, ne.ClockSkew.Round(time.Millisecond)),
			Message:  "Clock skew breaks TLS certificate validity, etcd and token checks.",
			Evidence: []finding.Evidence{{Text: fmt.Sprintf("host clock %s, skew %s against the workstation", ne.Facts.RemoteClock.UTC().Format(time.RFC3339Nano), ne.ClockSkew.Round(time.Millisecond)), Source: ne.Host + ": date"}},
			Fixes:    []string{"run time synchronisation on every node (systemd-timesyncd or chrony)"}})
	}
	return out
}

// checkDisk: the node reports DiskPressure, or the filesystem of /var/lib/rancher is nearly
// full (the kubelet evicts below 15 % free for imagefs by default).
func checkDisk(in *Input) []finding.Finding {
	var out []finding.Finding
	seen := map[string]bool{}
	for _, n := range in.View.Nodes {
		for _, c := range n.Status.Conditions {
			if (c.Type == corev1.NodeDiskPressure || c.Type == corev1.NodeMemoryPressure || c.Type == corev1.NodePIDPressure) && c.Status == corev1.ConditionTrue {
				id := checkid.DiskPressure
				if c.Type != corev1.NodeDiskPressure {
					id = strings.ToLower(strings.TrimSuffix(string(c.Type), "Pressure")) + "-pressure"
				}
				seen[n.Name+id] = true
				out = append(out, finding.Finding{ID: id, Severity: finding.Error, Host: n.Name,
					Title:    fmt.Sprintf("node %s reports %s", n.Name, c.Type),
					Message:  fmt.Sprintf("The kubelet reports %s (%s): it evicts pods and refuses new ones.", c.Type, c.Message),
					Evidence: []finding.Evidence{{Text: fmt.Sprintf("condition %s=True %s: %s", c.Type, c.Reason, c.Message), Source: nodeSrc(n.Name)}},
					Fixes:    []string{"free space or memory on the node (images: `k3s crictl rmi --prune`; logs; data)"}})
			}
		}
	}
	for i := range in.Nodes {
		ne := &in.Nodes[i]
		f := ne.Facts
		name := nameOr(ne.Node, ne.Host)
		if f == nil || f.DiskPath == "" || seen[name+"disk-pressure"] || f.DiskUsedPercent < 80 {
			continue
		}
		sev := finding.Warning
		if f.DiskUsedPercent >= 85 {
			sev = finding.Error
		}
		out = append(out, finding.Finding{ID: checkid.DiskPressure, Severity: sev, Host: name,
			Title:    fmt.Sprintf("the disk of %s is %d%% full", name, f.DiskUsedPercent),
			Message:  fmt.Sprintf("%s has %d MiB free (%d%% used); the kubelet starts evicting pods when less than 15%% is free.", f.DiskPath, f.DiskFreeKiB/1024, f.DiskUsedPercent),
			Evidence: []finding.Evidence{{Text: fmt.Sprintf("df %s: %d KiB free of %d KiB (%d%% used)", f.DiskPath, f.DiskFreeKiB, f.DiskTotalKiB, f.DiskUsedPercent), Source: hostSrc(ne, "df -Pk "+k3s.DirDataRoot)}},
			Fixes:    []string{"free space on the node (unused images: `k3s crictl rmi --prune`; old logs) or grow the disk"}})
	}
	return out
}
