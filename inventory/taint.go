// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/k3strap/k3strap/k3s"
)

// Taint is a node taint written key[=value]:Effect, as K3s's node-taint flag and kubectl take it.
type Taint struct {
	Key    string
	Value  string
	Effect corev1.TaintEffect
}

// Well-known taint keys (docs/k3s.md).
const ()

// ParseTaint parses key[=value]:Effect. The effect must be NoSchedule, PreferNoSchedule or
// NoExecute; key must be a qualified name and value a valid label value. The error says what is
// wrong and what a valid taint looks like.
func ParseTaint(s string) (Taint, error) {
	k, v, eff, err := k3s.ParseTaint(s)
	if err != nil {
		return Taint{}, err
	}
	t := Taint{Key: k, Value: v, Effect: corev1.TaintEffect(eff)}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return Taint{}, fmt.Errorf("taint %q has an invalid key %q: %s", s, t.Key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return Taint{}, fmt.Errorf("taint %q has an invalid value %q: %s", s, t.Value, strings.Join(errs, "; "))
	}
	return t, nil
}

// String returns key[=value]:Effect.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// Core returns the Kubernetes form of t.
func (t Taint) Core() corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
}

// FromCore converts a Kubernetes taint.
func FromCore(c corev1.Taint) Taint { return Taint{Key: c.Key, Value: c.Value, Effect: c.Effect} }

// Blocks reports whether t keeps pods without a matching toleration off the node
// (NoSchedule or NoExecute; PreferNoSchedule only discourages).
func (t Taint) Blocks() bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// Managed reports whether the taint belongs to K3s or Kubernetes (node.kubernetes.io/*,
// node.cloudprovider.kubernetes.io/*) and must never be removed by k3strap (F5).
func (t Taint) Managed() bool {
	return strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/")
}

// ToleratedBy reports whether any of tolerations tolerates t, with Kubernetes's matching rules
// (k8s.io/api/core/v1 Toleration.ToleratesTaint).
func (t Taint) ToleratedBy(tolerations []corev1.Toleration) bool {
	c := t.Core()
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), &c, false) {
			return true
		}
	}
	return false
}

// Toleration returns the toleration that tolerates exactly t (operator Equal, or Exists when
// the taint has no value).
func (t Taint) Toleration() corev1.Toleration {
	if t.Value == "" {
		return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect}
	}
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect}
}

// MarshalYAML writes the key[=value]:Effect form.
func (t Taint) MarshalYAML() (any, error) { return t.String(), nil }

// UnmarshalYAML reads the key[=value]:Effect form.
func (t *Taint) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a taint is a string key[=value]:Effect", n.Line)}}
	}
	p, err := ParseTaint(n.Value)
	if err != nil {
		return &TaintError{Line: n.Line, Column: n.Column, Err: err}
	}
	*t = p
	return nil
}

// TaintError is a taint that did not parse, with its position in the inventory file.
type TaintError struct {
	Line, Column int
	Err          error
}

func (e *TaintError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the parse error.
func (e *TaintError) Unwrap() error { return e.Err }

// Duration is a time.Duration written as a Go duration string ("10s", "1m30s") in YAML.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML reads a duration string such as "10s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (write e.g. 10s or 1m30s)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// Position is a place in the inventory file (1-based).
type Position struct {
	Line, Column int
}

// Positions maps a field path such as "spec.hosts[1].taints[0]" to its Position.
type Positions map[string]Position

// AppendTolerations returns base followed by the tolerations of add that base does not hold
// already (same key, operator, value and effect), for inventory or Kubernetes tolerations.
func AppendTolerations[T corev1.Toleration | Toleration](base []T, add ...T) []T {
	key := func(t T) [4]string {
		var c corev1.Toleration
		switch v := any(t).(type) {
		case corev1.Toleration:
			c = v
		case Toleration:
			c = v.Core()
		}
		return [4]string{c.Key, string(c.Operator), c.Value, string(c.Effect)}
	}
	out := append([]T(nil), base...)
	seen := map[[4]string]bool{}
	for _, t := range out {
		seen[key(t)] = true
	}
	for _, t := range add {
		if k := key(t); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return out
}
