// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package facts

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/k3strap/k3strap/k3s"
)

// EvidenceScript prints what diagnosing a K3s server needs, in one SSH command (run as root,
// arguments EvidenceArgs; evidence.sh, the host paths of k3s.ShellVars before it): the unit's
// journal tail (400 lines), every pod and the node as JSON (through the host's own `k3s
// kubectl`), the K3s config files (config.yaml and its drop-ins, lexical order; secret keys
// never printed), whether flannel's subnet.env exists and the service state. ParseEvidence
// reads its output. It is the facts script's companion: facts describe a host before anything
// is installed, evidence a K3s that runs (or fails to).
var EvidenceScript = k3s.ShellVars() + evidenceScript

//go:embed evidence.sh
var evidenceScript string

// EvidenceArgs are EvidenceScript's arguments: the K3s unit (k3s or k3s-agent), the node name
// and the journal line fragments a diagnosis needs from before the tail (k3s.JournalKeyLines,
// newline-separated).
func EvidenceArgs(service, node string) []string {
	return []string{service, node, strings.Join(k3s.JournalKeyLines(), "\n")}
}

// Evidence is what EvidenceScript printed, parsed.
type Evidence struct {
	// Journal holds the non-empty journal lines of the unit, oldest first.
	Journal []string
	// Pods are every pod of the cluster (nil when the API did not answer).
	Pods []corev1.Pod
	// Node is the node object (nil when it is not registered or the API did not answer).
	Node *corev1.Node
	// ConfigFiles are the K3s config files' texts in the order K3s reads them, secret keys
	// left out.
	ConfigFiles []string
	// SubnetEnvPresent says whether /run/flannel/subnet.env exists (nil: not reported).
	SubnetEnvPresent *bool
	// ServiceState is `systemctl is-active` of the unit ("" when not reported).
	ServiceState string
}

// ParseEvidence reads EvidenceScript's output. Sections it cannot parse stay empty; it never
// fails (a diagnosis works with what there is).
func ParseEvidence(out []byte) Evidence {
	var ev Evidence
	section := ""
	var cur strings.Builder
	flushFile := func() {
		if cur.Len() > 0 {
			ev.ConfigFiles = append(ev.ConfigFiles, cur.String())
			cur.Reset()
		}
	}
	for _, line := range strings.Split(string(bytes.TrimRight(out, "\n")), "\n") {
		switch {
		case line == "@journal", line == "@pods", line == "@node", line == "@config":
			section = line
			continue
		case strings.HasPrefix(line, "@file "):
			flushFile()
			continue
		case strings.HasPrefix(line, "@subnet "):
			present := strings.TrimSpace(strings.TrimPrefix(line, "@subnet ")) == "present"
			ev.SubnetEnvPresent = &present
			section = ""
			continue
		case strings.HasPrefix(line, "@service "):
			ev.ServiceState = strings.TrimSpace(strings.TrimPrefix(line, "@service "))
			continue
		case line == "@end":
			section = ""
			continue
		}
		switch section {
		case "@journal":
			if strings.TrimSpace(line) != "" {
				ev.Journal = append(ev.Journal, line)
			}
		case "@pods":
			if strings.HasPrefix(line, "{") {
				var l corev1.PodList
				if json.Unmarshal([]byte(line), &l) == nil {
					ev.Pods = l.Items
				}
			}
		case "@node":
			if strings.HasPrefix(line, "{") {
				var n corev1.Node
				if json.Unmarshal([]byte(line), &n) == nil {
					ev.Node = &n
				}
			}
		case "@config":
			cur.WriteString(line + "\n")
		}
	}
	flushFile()
	return ev
}
