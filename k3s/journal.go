// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

// Fragments of the log lines K3s v1.36.3 prints that a diagnosis reads, as they appear in the
// unit's journal (testdata/real-k3s-v1.36.3/log-lines-*.txt; docs/k3s.md "Bring-up timeline",
// docs/failure-modes.md F1).
const (
	// LineWaitingTaint: the network policy controller waits for the uninitialized taint (every
	// 2 s from ~20 s after the start while the taint stays).
	LineWaitingTaint = "waiting for removal of node.cloudprovider.kubernetes.io/uninitialized taint"
	// LineShutdownTaint: K3s shuts itself down after ~15 min of that wait (F1).
	LineShutdownTaint = "network policy controller failed to wait for node.cloudprovider.kubernetes.io/uninitialized taint"
	// LineRunningKubelet: the kubelet's full command line, printed once per start.
	LineRunningKubelet = "Running kubelet "
	// LineRunningCCM: the embedded cloud controller starts.
	LineRunningCCM = "Running cloud-controller-manager"
	// LineSkippingCCM: the embedded cloud controller is disabled.
	LineSkippingCCM = "Skipping a cloud provider controller"
	// LineWaitingCRD: the manifest deployer waits for a CRD of the packaged manifests.
	LineWaitingCRD = "Waiting for CRD"
	// LineWaitingUntaint: the embedded cloud controller's own wait for an untainted node.
	LineWaitingUntaint = "Waiting for untainted node"
	// LineCriticalMismatch: a joining server's critical configuration differs.
	LineCriticalMismatch = "critical configuration value mismatch"
)

// Fragments of the lines that say why a K3s process ended: logrus's fatal level, K3s's own
// shutdown when a component fails, and systemd's line for the end of the unit's main process.
const (
	LineFatal      = "level=fatal"
	LineShutdown   = "Shutdown request received"
	LineMainExited = "Main process exited"
	// LineRestartScheduled is systemd's line when it schedules a unit's restart after an exit
	// ("k3s.service: Scheduled restart job, restart counter is at 1."; systemd's
	// src/core/service.c, as seen in `journalctl -u` on Debian 12's systemd 252): the trace of a
	// restart that carries its time. Doctor counts these
	// within CrashLoopWindow (facts.DoctorNode.RestartTimes).
	LineRestartScheduled = "Scheduled restart job"
)

// JournalKeyLines are the fragments of the lines a diagnosis needs even when they scrolled out
// of the journal tail it reads (a K3s start prints hundreds of lines in its first seconds; the
// kubelet's command line comes early): evidence scripts grep the older journal for them.
func JournalKeyLines() []string {
	return []string{LineRunningKubelet, LineRunningCCM, LineSkippingCCM, LineWaitingTaint, LineShutdownTaint,
		LineWaitingCRD, LineWaitingUntaint, LineCriticalMismatch, LineFatal, LineShutdown, LineMainExited}
}
