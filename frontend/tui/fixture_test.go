// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"time"

	"github.com/k3strap/k3strap/events"
)

// t0 is the fixture runs' start.
var t0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// recorder builds a fixture run with the installer's Emitter, at fixed times.
type recorder struct {
	rec events.Recorder
	at  time.Duration
}

func (r *recorder) em(phase events.Phase) events.Emitter {
	return events.Emitter{Sink: &r.rec, Phase: phase, Now: func() time.Time { return t0.Add(r.at) }}
}

func (r *recorder) after(d time.Duration) *recorder { r.at += d; return r }

var fixtureHosts = []HostInfo{
	{Name: "cp1", Address: "192.0.2.10", Role: "server", First: true},
	{Name: "cp2", Address: "192.0.2.11", Role: "server"},
	{Name: "edge-1", Address: "192.0.2.20", Role: "agent"},
}

// applyStart is the first part of an HA apply: connect, facts, preflight with a warning and an
// ignored error, uploads under way, the first server's bring-up half done.
func applyStart() *recorder {
	r := &recorder{}
	c := r.em(events.PhaseConnect)
	c.Started("connecting to 3 hosts")
	r.after(300 * time.Millisecond)
	c.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	c.Step("cp2", "connect", events.StatusOK, "connected to 192.0.2.11:22 as root")
	c.Step("edge-1", "connect", events.StatusOK, "connected to 192.0.2.20:22 as pi")
	c.Warn("edge-1", "recorded host key SHA256:Yx3lqkYV0b9oS1ZsA2X for 192.0.2.20:22 in known_hosts (trust on first use)")
	c.Finished(events.StatusOK, "")
	f := r.after(400 * time.Millisecond).em(events.PhaseFacts)
	f.Started("gathering facts")
	f.Step("cp1", "facts", events.StatusOK, "Debian GNU/Linux 12 amd64, kernel 6.1.0-18, no K3s")
	f.Step("cp2", "facts", events.StatusOK, "Debian GNU/Linux 12 amd64, kernel 6.1.0-18, no K3s")
	f.Step("edge-1", "facts", events.StatusOK, "Raspbian 12 arm64, kernel 6.6.20, no K3s")
	f.Finished(events.StatusOK, "")
	p := r.after(100 * time.Millisecond).em(events.PhasePreflight)
	p.Started("running preflight checks")
	p.Finding("edge-1", events.PreflightResult{Check: "Swap", Severity: "warning", Message: "swap is on (512 MiB)", Fix: "turn it off: swapoff -a and remove the swap line from /etc/fstab"})
	p.Finding("cp2", events.PreflightResult{Check: "Memory", Severity: "ignored", Message: "1.0 GiB of memory; a server needs 2 GiB", Fix: "give the host more memory"})
	p.Finished(events.StatusOK, "1 warnings")
	r.after(100*time.Millisecond).em(events.PhasePlan).Finished(events.StatusOK, "")
	r.em(events.PhaseFirstServer).Started("first server cp1")
	u := r.after(200 * time.Millisecond).em(events.PhaseUpload)
	const size = 70 << 20
	u.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: 0, Total: size})
	r.after(2 * time.Second)
	u.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: size, Total: size})
	u.Progress("cp1", events.Upload{File: "/usr/local/bin/k3s", Bytes: size, Total: size, Done: true})
	u.Progress("cp1", events.Upload{File: "/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst", Bytes: 0, Total: 160 << 20})
	r.after(4 * time.Second)
	u.Progress("cp1", events.Upload{File: "/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst", Bytes: 117 << 20, Total: 160 << 20})
	return r
}

// applyBringUp continues applyStart: uploads done, install, the first server's milestones.
func applyBringUp(r *recorder) *recorder {
	u := r.after(1500 * time.Millisecond).em(events.PhaseUpload)
	u.Progress("cp1", events.Upload{File: "/var/lib/rancher/k3s/agent/images/k3s-airgap-images-amd64.tar.zst", Bytes: 160 << 20, Total: 160 << 20, Done: true})
	in := r.after(500 * time.Millisecond).em(events.PhaseInstall)
	in.Debug("cp1", "sh -c <install K3s script> /var/lib/k3strap/install.sh with INSTALL_K3S_EXEC=server INSTALL_K3S_SKIP_START=true")
	in.Step("cp1", "install", events.StatusChanged, "install script ran (unit written)")
	in.Step("cp1", "start", events.StatusChanged, "started k3s")
	sv := r.em(events.PhaseSupervise)
	sv.Started("watching cp1 come up (stall grace 1m0s, timeout 10m0s)")
	for _, m := range []events.MilestoneInfo{
		{Name: "service-active", Seconds: 0.4},
		{Name: "api-ready", Seconds: 6.1},
		{Name: "node-registered", Seconds: 7.9},
	} {
		r.after(2 * time.Second)
		sv.Milestone("cp1", m)
	}
	return r
}

// applyDone finishes the run successfully: remaining milestones, joins, kubeconfig, summary.
func applyDone(r *recorder) *recorder {
	sv := r.em(events.PhaseSupervise)
	for _, m := range []events.MilestoneInfo{
		{Name: "uninitialized-taint-gone", Seconds: 9.0},
		{Name: "podcidr-set", Seconds: 9.2, Detail: "10.42.0.0/24"},
		{Name: "subnet-env", Seconds: 10.5, Detail: "network 10.42.0.0/16, subnet 10.42.0.1/24, MTU 1450"},
		{Name: "node-ready", Seconds: 12.3},
	} {
		r.after(time.Second)
		sv.Milestone("cp1", m)
	}
	sv.Finished(events.StatusOK, "cp1 is up after 12.3 s")
	j := r.after(time.Second).em(events.PhaseJoinServers)
	j.Step("cp2", "join", events.StatusRunning, "joining server cp2")
	r.after(8 * time.Second)
	j.Step("cp2", "node", events.StatusOK, "node Ready")
	ja := r.em(events.PhaseJoinAgents)
	ja.Step("edge-1", "join", events.StatusRunning, "joining agent edge-1")
	r.after(6 * time.Second)
	ja.Step("edge-1", "node", events.StatusOK, "node Ready")
	r.em(events.PhaseKubeconfig).Step("cp1", "kubeconfig", events.StatusChanged, "wrote /home/ada/lab.kubeconfig")
	r.em(events.CommandPhase("apply")).Summary(events.SummaryInfo{Command: "apply", OK: true, ExitCode: 0, Seconds: 41.7,
		Kubeconfig: "/home/ada/lab.kubeconfig", RancherURL: "https://rancher.192.0.2.10.sslip.io",
		Next: []string{"export KUBECONFIG=/home/ada/lab.kubeconfig", "kubectl get nodes"},
		Hosts: []events.HostResult{
			{Host: "cp1", Role: "server", Status: events.StatusChanged, Message: "wrote /usr/local/bin/k3s, config.yaml; ran the install script; started"},
			{Host: "cp2", Role: "server", Status: events.StatusChanged, Message: "joined"},
			{Host: "edge-1", Role: "agent", Status: events.StatusChanged, Message: "joined"},
		}})
	return r
}

// preflightFailed is a preflight run that finds errors (the F1 trap) on one host.
func preflightFailed() *recorder {
	r := &recorder{}
	c := r.em(events.PhaseConnect)
	c.Started("connecting to 3 hosts")
	r.after(300 * time.Millisecond)
	c.Step("cp1", "connect", events.StatusOK, "connected to 192.0.2.10:22 as root")
	c.Step("cp2", "connect", events.StatusOK, "connected to 192.0.2.11:22 as root")
	c.Step("edge-1", "connect", events.StatusFailed, "edge-1 (192.0.2.20:22): connect failed: no answer within 10s (host down, wrong address, or a firewall dropping SSH)")
	f := r.after(400 * time.Millisecond).em(events.PhaseFacts)
	f.Step("cp1", "facts", events.StatusOK, "Debian GNU/Linux 12 amd64, kernel 6.1.0-18, no K3s")
	f.Step("cp2", "facts", events.StatusOK, "Debian GNU/Linux 12 amd64, kernel 6.1.0-18, no K3s")
	p := r.after(100 * time.Millisecond).em(events.PhasePreflight)
	p.Started("running preflight checks")
	p.Finding("cp1", events.PreflightResult{Check: "CloudController", Severity: "error",
		Message: "kubelet-arg cloud-provider=external with the embedded cloud controller disabled: the uninitialized taint never clears",
		Fix:     "remove kubelet-arg cloud-provider=external, or set spec.k3s.cloudController: external with its manifest"})
	p.Finding("edge-1", events.PreflightResult{Check: "SSH", Severity: "error", Message: "cannot reach the host over SSH",
		Fix: "check the address and that sshd runs; try ssh -p 22 root@192.0.2.20"})
	p.Finding("cp2", events.PreflightResult{Check: "Port-6443", Severity: "warning", Message: "port 6443 is in use by nginx", Fix: "stop nginx or move it"})
	p.Finished(events.StatusFailed, "2 preflight errors")
	r.em(events.PhasePreflight).Summary(events.SummaryInfo{Command: "preflight", OK: false, ExitCode: 3, ExitMeaning: "preflight failed", Seconds: 1.2,
		Next: []string{"look at: cp1, edge-1", "k3strap preflight -f lab.yaml   # again once the findings are fixed"},
		Hosts: []events.HostResult{
			{Host: "cp1", Role: "server", Status: events.StatusFailed, Message: "preflight: CloudController"},
			{Host: "cp2", Role: "server", Status: events.StatusOK},
			{Host: "edge-1", Role: "agent", Status: events.StatusFailed, Message: "preflight: SSH"},
		}})
	return r
}
