// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package installer

import (
	"strings"

	"github.com/k3strap/k3strap/events"
)

// Every command's step list, in one place: `k3strap steps` and each command's --help print
// them, and runCommand runs them. A step lives in step_<phase>.go, its type named after its
// phase (installer/steps_test.go checks both). docs/architecture.md draws apply's.

// command is a k3strap command: its name and its steps in order.
type command struct {
	// name is the command as the user types it (messages, the summary's command).
	name  string
	steps []step
	// withFirst adds the first server to the session when --host selected only other hosts:
	// the command needs it (token, API, lock).
	withFirst bool
}

// commandNames lists every command that runs as steps, in the order `k3strap steps` shows them.
// A variant of a command (upgrade --via suc) is listed under its own name after the command.
var commandNames = []string{
	"apply", "upgrade", "upgrade --via suc", "upgrade --watch", "preflight", "check", "reset", "kubeconfig", "doctor",
	"backup", "backup-list", "restore", "remove-node", "rotate-certificates", "rotate-token", "join-local",
}

// joinLocalName is the command join-local runs as: `k3strap firstboot run` on a box that
// joins a cluster by itself (its session has no first server).
const joinLocalName = "firstboot run"

// commandFor returns the steps of the command listed as name (no steps for an unknown name).
func commandFor(name string) command {
	connectAll, connectFirst := connectStep{}, connectStep{firstOnly: true}
	planned := []step{connectAll, factsStep{}, planStep{}}
	switch name {
	case "apply", "upgrade":
		// upgrade is apply for a new spec.k3s.version: servers one at a time, agents in batches.
		return command{name: name, withFirst: true, steps: append(planned,
			pathsStep{}, preflightStep{}, lockStep{}, firstServerStep{}, stageStep{}, superviseStep{}, replaceNodesStep{},
			joinServersStep{}, joinAgentsStep{}, bringUpStep{}, kubeconfigStep{}, reconcileNodesStep{}, cniStep{}, rancherStep{})}
	case "upgrade --via suc":
		return command{name: "upgrade", withFirst: true, steps: []step{connectFirst, sucDeployStep{}, sucWatchStep{}}}
	case "upgrade --watch":
		return command{name: "upgrade", withFirst: true, steps: []step{connectFirst, sucWatchStep{}}}
	case "preflight":
		return command{name: name, steps: append(planned, pathsStep{}, preflightStep{})}
	case "check":
		return command{name: name, withFirst: true, steps: []step{connectFirst, driftStep{}}}
	case "reset":
		return command{name: name, withFirst: true, steps: []step{connectAll, factsStep{}, resetStep{}}}
	case "kubeconfig":
		return command{name: name, withFirst: true, steps: []step{connectFirst, kubeconfigStep{requested: true}}}
	case "doctor":
		return command{name: name, steps: []step{connectAll, clusterViewStep{}, evidenceStep{}, discoverStep{}, findingsStep{}, fixStep{}, bundleStep{}}}
	case "backup":
		return command{name: name, withFirst: true, steps: []step{connectFirst, lockStep{}, etcdCheckStep{}, snapshotStep{}, snapshotCopyStep{}}}
	case "backup-list":
		return command{name: name, withFirst: true, steps: []step{connectFirst, etcdCheckStep{}, snapshotListStep{}}}
	case "restore":
		return command{name: name, withFirst: true, steps: append(planned, lockStep{}, etcdCheckStep{}, restoreCheckStep{}, restoreStopStep{},
			clusterResetStep{}, superviseStep{}, bringUpStep{}, rejoinServersStep{}, restartAgentsStep{})}
	case "remove-node":
		return command{name: name, withFirst: true, steps: append(planned, lockStep{}, removeNodeStep{})}
	case "rotate-certificates":
		return command{name: name, withFirst: true, steps: append(planned, lockStep{}, rotateCertificatesStep{})}
	case "join-local":
		// A box in local mode joining a cluster whose first server it cannot reach over SSH
		// (`k3strap firstboot run`; docs/edge-first-boot.md).
		return command{name: joinLocalName, steps: append(planned, pathsStep{}, preflightStep{}, waitAPIStep{}, joinSelfStep{})}
	case "rotate-token":
		return command{name: name, withFirst: true, steps: append(planned, lockStep{}, rotateTokenStep{})}
	}
	return command{name: name}
}

// StepInfo describes one step of a command for `k3strap steps` and the commands' --help.
type StepInfo struct {
	// Phase is the step's name (also the phase of its events).
	Phase events.Phase
	// Summary says what it does in one line.
	Summary string
	// Changes is true when the step changes hosts, the cluster or local files, or watches
	// what such a change does: --dry-run previews it instead of running it.
	Changes bool
}

// Commands lists the commands that run as steps, in the order `k3strap steps` shows them;
// variants of a command follow it ("upgrade --via suc", "upgrade --watch").
func Commands() []string { return append([]string(nil), commandNames...) }

// Variants returns command and its variants as Commands lists them ("upgrade": upgrade,
// upgrade --via suc, upgrade --watch); nil for an unknown command.
func Variants(command string) []string {
	var out []string
	for _, n := range commandNames {
		if n == command || strings.HasPrefix(n, command+" ") {
			out = append(out, n)
		}
	}
	return out
}

// Steps returns the steps of the command listed as name, in order (nil for an unknown name).
func Steps(name string) []StepInfo {
	var out []StepInfo
	for _, st := range commandFor(name).steps {
		_, changes := st.(previewer)
		out = append(out, StepInfo{Phase: st.Phase(), Summary: st.Summary(), Changes: changes})
	}
	return out
}
