// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package suc renders what `k3strap upgrade --via suc` applies to a cluster: the
// system-upgrade-controller (SUC) itself from its embedded, unmodified v0.20.1 manifests
// (manifests/, see SOURCE.md) and the two Plans K3s documents for automated upgrades
// (manifests/k3s-upgrade.yaml): `k3s-server` (concurrency 1, control-plane nodes, cordon) and
// `k3s-agent` (a batch of agents at once, a prepare step that waits for the server Plan, drain
// with a timeout), both tolerating every taint the inventory declares (docs/failure-modes.md
// F3: a Plan's Job that does not tolerate its node's taint never runs). Pure functions; no I/O.
package suc

import (
	"bytes"
	"embed"
	"fmt"
	"github.com/k3strap/k3strap/k3s"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

//go:embed manifests/*.yaml
var files embed.FS

// Pinned release and names.
const (
	// Version is the SUC release k3strap deploys.
	Version = "v0.20.1"
	// ControllerImage is SUC's image at Version.
	ControllerImage = "rancher/system-upgrade-controller:" + Version
	// UpgradeImage is the image K3s's Plans run (tag: the K3s version with + as -).
	UpgradeImage = "rancher/k3s-upgrade"
	// Namespace and ServiceAccount are those of SUC's manifest.
	Namespace      = "system-upgrade"
	ServiceAccount = "system-upgrade"
	// ServerPlan and AgentPlan are the Plans' names (K3s's example).
	ServerPlan = "k3s-server"
	AgentPlan  = "k3s-agent"
	// ControllerDeployment is SUC's Deployment in Namespace.
	ControllerDeployment = "system-upgrade-controller"
	// PlanLabelPrefix + plan name labels a node once the plan's latest hash is applied.
	PlanLabelPrefix = "plan.upgrade.cattle.io/"
	// OptOutLabel: a node labelled k3s-upgrade=disabled (or false) is left out by both Plans.
	OptOutLabel = "k3s-upgrade"
	// DefaultDrainTimeout bounds an agent's drain.
	DefaultDrainTimeout = 10 * time.Minute
)

// Manifest returns an embedded file of manifests/ (e.g. "k3s-upgrade.yaml").
func Manifest(name string) []byte {
	b, err := files.ReadFile("manifests/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// Toleration is one Plan toleration (core/v1 Toleration's fields).
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// Options say what to render.
type Options struct {
	// K3sVersion is the release the Plans move nodes to (spec.k3s.version).
	K3sVersion string
	// AgentConcurrency is how many agents upgrade at once (at least 1).
	AgentConcurrency int
	// Tolerations are those of the inventory's taints; both Plans carry them.
	Tolerations []Toleration
	// DrainTimeout bounds an agent's drain (default DefaultDrainTimeout).
	DrainTimeout time.Duration
	// UpgradeImage replaces rancher/k3s-upgrade (airgap: a mirror).
	UpgradeImage string
	// ControllerImage replaces ControllerImage; KubectlImage the kubectl image SUC's Jobs use
	// for cordon and drain (airgap: a mirror).
	ControllerImage string
	KubectlImage    string
	// ControllerManifest replaces the embedded controller manifests (airgap: the file the
	// inventory names); the Plan CRD is applied in any case.
	ControllerManifest []byte
}

var (
	controllerImageRE = regexp.MustCompile(`(?m)^(\s*image:\s*)rancher/system-upgrade-controller:\S+`)
	kubectlImageRE    = regexp.MustCompile(`(?m)^(\s*SYSTEM_UPGRADE_JOB_KUBECTL_IMAGE:\s*)"[^"]*"`)
	docSeparatorRE    = regexp.MustCompile(`(?m)^---\s*$`)
)

// ControllerManifests returns the multi-document YAML that installs SUC: the Plan CRD, the
// namespace, service account, config map and Deployment (image pinned to Version or
// o.ControllerImage), and SUC's RBAC (ClusterRoles, Role, bindings to the service account).
func ControllerManifests(o Options) []byte {
	var buf bytes.Buffer
	add := func(b []byte) {
		b = bytes.TrimSpace(b)
		b = bytes.TrimPrefix(b, []byte("---\n"))
		buf.WriteString("---\n")
		buf.Write(b)
		buf.WriteString("\n")
	}
	add(Manifest("upgrade.cattle.io_plans.yaml"))
	if o.ControllerManifest != nil {
		add(o.ControllerManifest)
		return buf.Bytes()
	}
	img := ControllerImage
	if o.ControllerImage != "" {
		img = o.ControllerImage
	}
	ctl := controllerImageRE.ReplaceAll(Manifest("system-upgrade-controller.yaml"), []byte("${1}"+img))
	if o.KubectlImage != "" {
		ctl = kubectlImageRE.ReplaceAll(ctl, []byte(fmt.Sprintf("${1}%q", o.KubectlImage)))
	}
	add(ctl)
	for _, f := range []string{"clusterrole.yaml", "clusterrolebinding.yaml"} {
		add(inNamespace(Manifest(f)))
	}
	return buf.Bytes()
}

// inNamespace does to the multi-document YAML b what the `namespace: system-upgrade` of SUC's
// kustomization.yaml does to it (upstream applies manifests/ through kustomize, `kubectl apply
// -k`, and its release manifest is that build): the Role and RoleBinding, which name no
// namespace, go into Namespace, and every ServiceAccount subject of a binding that names no
// namespace gets Namespace. Applied as they are, the API server refuses the ClusterRoleBindings
// ("subjects[0].namespace: Required value") and the Role lands in the default namespace.
// The embedded files are well-formed (TestControllerManifests), so a document that does not
// decode is left as it is.
func inNamespace(b []byte) []byte {
	var out bytes.Buffer
	for _, doc := range docSeparatorRE.Split(string(b), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			out.WriteString("---\n" + strings.TrimSpace(doc) + "\n")
			continue
		}
		switch obj["kind"] {
		case "Role", "RoleBinding":
			if md, ok := obj["metadata"].(map[string]any); ok && md["namespace"] == nil {
				md["namespace"] = Namespace
			}
		}
		if subjects, ok := obj["subjects"].([]any); ok {
			for _, sub := range subjects {
				if m, ok := sub.(map[string]any); ok && m["kind"] == "ServiceAccount" && m["namespace"] == nil {
					m["namespace"] = Namespace
				}
			}
		}
		y, err := yaml.Marshal(obj)
		if err != nil {
			out.WriteString("---\n" + strings.TrimSpace(doc) + "\n")
			continue
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	return out.Bytes()
}

// plan is the subset of upgrade.cattle.io/v1 Plan k3strap writes.
type plan struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   planMeta `json:"metadata"`
	Spec       planSpec `json:"spec"`
}

type planMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type planSpec struct {
	Concurrency        int          `json:"concurrency"`
	Version            string       `json:"version"`
	NodeSelector       selector     `json:"nodeSelector"`
	ServiceAccountName string       `json:"serviceAccountName"`
	Tolerations        []Toleration `json:"tolerations,omitempty"`
	Cordon             bool         `json:"cordon,omitempty"`
	Prepare            *container   `json:"prepare,omitempty"`
	Drain              *drain       `json:"drain,omitempty"`
	Upgrade            container    `json:"upgrade"`
}

type selector struct {
	MatchExpressions []requirement `json:"matchExpressions"`
}

type requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

type container struct {
	Image string   `json:"image"`
	Args  []string `json:"args,omitempty"`
}

type drain struct {
	Force                    bool   `json:"force"`
	IgnoreDaemonSets         bool   `json:"ignoreDaemonSets"`
	DeleteEmptydirData       bool   `json:"deleteEmptydirData"`
	SkipWaitForDeleteTimeout int    `json:"skipWaitForDeleteTimeout"`
	Timeout                  string `json:"timeout"`
}

// serverTolerations are the control-plane taints K3s servers commonly carry (K3s's own
// docs and the SUC Deployment's tolerations); harmless where absent.
var serverTolerations = []Toleration{
	{Key: k3s.TaintCriticalAddonsOnly, Operator: "Exists"},
	{Key: k3s.TaintControlPlane, Operator: "Exists", Effect: "NoSchedule"},
	{Key: k3s.TaintMaster, Operator: "Exists", Effect: "NoSchedule"},
	{Key: k3s.TaintEtcd, Operator: "Exists", Effect: "NoExecute"},
}

// Plans returns the two Plans as multi-document YAML. Both select nodes by role
// (k3s.LabelControlPlane) and leave out nodes labelled k3s-upgrade=disabled or
// false and k3OS nodes, as K3s's example does — without its opt-in label, so that every node
// of the cluster is upgraded unless opted out.
func Plans(o Options) ([]byte, error) {
	if o.K3sVersion == "" {
		return nil, fmt.Errorf("the Plans need a K3s version (spec.k3s.version): SUC resolves channels itself, k3strap pins the version")
	}
	conc := max(o.AgentConcurrency, 1)
	timeout := o.DrainTimeout
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	img := UpgradeImage
	if o.UpgradeImage != "" {
		img = o.UpgradeImage
	}
	base := []requirement{
		{Key: OptOutLabel, Operator: "NotIn", Values: []string{"disabled", "false"}},
		{Key: "k3os.io/mode", Operator: "DoesNotExist"},
	}
	tols := SortTolerations(o.Tolerations)
	server := plan{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan",
		Metadata: planMeta{Name: ServerPlan, Namespace: Namespace, Labels: map[string]string{"k3s-upgrade": "server", "app.kubernetes.io/managed-by": "k3strap"}},
		Spec: planSpec{Concurrency: 1, Version: o.K3sVersion, ServiceAccountName: ServiceAccount, Cordon: true,
			NodeSelector: selector{MatchExpressions: append(append([]requirement{}, base...), requirement{Key: k3s.LabelControlPlane, Operator: "Exists"})},
			Tolerations:  mergeTolerations(serverTolerations, tols),
			Upgrade:      container{Image: img}}}
	agent := plan{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan",
		Metadata: planMeta{Name: AgentPlan, Namespace: Namespace, Labels: map[string]string{"k3s-upgrade": "agent", "app.kubernetes.io/managed-by": "k3strap"}},
		Spec: planSpec{Concurrency: conc, Version: o.K3sVersion, ServiceAccountName: ServiceAccount,
			NodeSelector: selector{MatchExpressions: append(append([]requirement{}, base...), requirement{Key: k3s.LabelControlPlane, Operator: "DoesNotExist"})},
			Tolerations:  tols,
			Prepare:      &container{Image: img, Args: []string{"prepare", ServerPlan}},
			Drain:        &drain{Force: true, IgnoreDaemonSets: true, DeleteEmptydirData: true, SkipWaitForDeleteTimeout: 60, Timeout: timeout.String()},
			Upgrade:      container{Image: img}}}
	var buf bytes.Buffer
	buf.WriteString("# Rendered by k3strap from system-upgrade-controller's examples/k3s-upgrade.yaml (templates/suc).\n")
	for _, p := range []plan{server, agent} {
		b, err := yaml.Marshal(p)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// SortTolerations returns ts deduplicated and sorted (stable output for diffs and tests).
func SortTolerations(ts []Toleration) []Toleration {
	seen := map[Toleration]bool{}
	var out []Toleration
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return strings.Join([]string{a.Key, a.Value, a.Effect, a.Operator}, "\x00") < strings.Join([]string{b.Key, b.Value, b.Effect, b.Operator}, "\x00")
	})
	return out
}

func mergeTolerations(a, b []Toleration) []Toleration {
	out := append([]Toleration{}, a...)
	seen := map[Toleration]bool{}
	for _, t := range a {
		seen[t] = true
	}
	for _, t := range b {
		if !seen[t] {
			out = append(out, t)
		}
	}
	return out
}

// TolerationFor returns the toleration of one declared taint: key, value (Equal when set,
// Exists otherwise) and effect exactly.
func TolerationFor(key, value, effect string) Toleration {
	if value == "" {
		return Toleration{Key: key, Operator: "Exists", Effect: effect}
	}
	return Toleration{Key: key, Operator: "Equal", Value: value, Effect: effect}
}
