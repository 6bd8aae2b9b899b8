// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package knobs reads the simulator's test-only knobs (e2e/k3ssim/README.md, "Knobs"): the YAML file
// /etc/k3ssim/sim.yaml and, overriding it key by key, the environment variables
// K3SSIM_<UPPER_SNAKE> (so /etc/default/k3s can set them). Knobs are never read from the
// k3strap inventory.
package knobs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Knobs are the simulator's tunables.
type Knobs struct {
	// TimeScale multiplies every delay (1.0 = real K3s timings; 0.1 = bring-up in ~1.6 s).
	TimeScale float64 `yaml:"timeScale"`
	// SubnetEnvWaitsForTaint makes flannel write subnet.env only once the uninitialized taint
	// is gone (the K3s 1.21 behaviour of k3s-io/k3s#11619).
	SubnetEnvWaitsForTaint bool `yaml:"subnetEnvWaitsForTaint"`
	// ConflictOnNextReplace: the next N PUTs on nodes first bump the stored node's
	// resourceVersion, so a replace carrying the old one gets 409 Conflict.
	ConflictOnNextReplace int `yaml:"conflictOnNextReplace"`
	// CRDStall reproduces the half-created-CRD stall of docs/k3s.md#bring-up-timeline (~60 s CRD wait, taint
	// and subnet.env held back ~70 s, real seconds before scaling).
	CRDStall bool `yaml:"crdStall"`
	// DeploymentDelay is the unscaled time until applied Deployments become available and
	// HelmChart install jobs finish (default 5 s; multiplied by TimeScale when used).
	DeploymentDelay time.Duration `yaml:"-"`
	// FailHelmCharts names HelmCharts whose install job fails with a log tail.
	FailHelmCharts []string `yaml:"failHelmCharts"`
	// IngressPort is the TCP port of the ingress stand-in (Traefik + ServiceLB's svclb on a
	// real K3s): it listens once an Ingress exists and answers for its hosts. Default 443; 0
	// turns it off.
	IngressPort int `yaml:"ingressPort"`
}

// Names lists every knob key as written in sim.yaml, in documentation order.
var Names = []string{"timeScale", "subnetEnvWaitsForTaint", "conflictOnNextReplace", "crdStall", "deploymentDelay", "failHelmCharts", "ingressPort"}

// EnvName returns the environment variable for a knob key: K3SSIM_ + UPPER_SNAKE
// (timeScale -> K3SSIM_TIME_SCALE).
func EnvName(key string) string {
	var b strings.Builder
	b.WriteString("K3SSIM_")
	for i, r := range key {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// Defaults returns the knobs with nothing configured.
func Defaults() Knobs {
	return Knobs{TimeScale: 1, DeploymentDelay: 5 * time.Second, IngressPort: 443}
}

// Load reads the knobs file at path (a missing file is fine) and applies the K3SSIM_*
// variables from getenv on top. It returns an error naming the file or variable for a value
// that does not parse.
func Load(path string, getenv func(string) string) (Knobs, error) {
	k := Defaults()
	raw := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := yaml.Unmarshal(data, &raw); err != nil {
			return k, fmt.Errorf("knobs file %s: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return k, fmt.Errorf("knobs file %s: %w", path, err)
	}
	for _, name := range Names {
		src := path + ": " + name
		v, ok := raw[name]
		if env := getenv(EnvName(name)); env != "" {
			v, ok, src = env, true, EnvName(name)
		}
		if !ok || v == nil {
			continue
		}
		if err := k.set(name, v); err != nil {
			return k, fmt.Errorf("knob %s: %w", src, err)
		}
	}
	if k.TimeScale <= 0 {
		return k, fmt.Errorf("knob timeScale must be > 0, got %v", k.TimeScale)
	}
	return k, nil
}

func (k *Knobs) set(name string, v any) error {
	s := strings.TrimSpace(fmt.Sprint(v))
	var err error
	switch name {
	case "timeScale":
		k.TimeScale, err = strconv.ParseFloat(s, 64)
	case "subnetEnvWaitsForTaint":
		k.SubnetEnvWaitsForTaint, err = strconv.ParseBool(s)
	case "conflictOnNextReplace":
		k.ConflictOnNextReplace, err = strconv.Atoi(s)
	case "crdStall":
		k.CRDStall, err = strconv.ParseBool(s)
	case "deploymentDelay":
		k.DeploymentDelay, err = parseDuration(s)
	case "ingressPort":
		k.IngressPort, err = strconv.Atoi(s)
	case "failHelmCharts":
		k.FailHelmCharts = nil
		switch l := v.(type) {
		case []any:
			for _, x := range l {
				k.FailHelmCharts = append(k.FailHelmCharts, fmt.Sprint(x))
			}
		default:
			for _, x := range strings.Split(s, ",") {
				if x = strings.TrimSpace(x); x != "" {
					k.FailHelmCharts = append(k.FailHelmCharts, x)
				}
			}
		}
	}
	return err
}

// parseDuration accepts a Go duration ("5s", "1m") or a plain number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// FailsHelmChart reports whether the HelmChart name is listed in FailHelmCharts.
func (k Knobs) FailsHelmChart(name string) bool {
	for _, n := range k.FailHelmCharts {
		if n == name {
			return true
		}
	}
	return false
}

// ConflictSource reads conflictOnNextReplace on every call to Take, as the spec asks
// ("read ... on each request"), and decrements it. When the value comes from the knobs file,
// the decremented value is written back to that file (so the file always shows what is
// left). When it comes from K3SSIM_CONFLICT_ON_NEXT_REPLACE, the environment cannot be
// changed, so the caller passes the persisted state (last value seen, remaining) instead.
type ConflictSource struct {
	// Path is the physical path of the knobs file.
	Path string
	// Getenv reads the process environment.
	Getenv func(string) string
}

// EnvConflictState is what the caller persists for an environment-supplied count: Seen is
// the last value read from the environment, Remaining how many conflicts are still due.
type EnvConflictState struct {
	Seen      int `json:"seen"`
	Remaining int `json:"remaining"`
}

// Take reports whether the current PUT must first be made stale, consuming one count. st is
// the persisted state for the environment case; Take updates it in place. Errors reading or
// rewriting the file are returned with the file named.
func (c ConflictSource) Take(st *EnvConflictState) (bool, error) {
	if env := c.Getenv(EnvName("conflictOnNextReplace")); env != "" {
		n, err := strconv.Atoi(strings.TrimSpace(env))
		if err != nil {
			return false, fmt.Errorf("knob %s: %w", EnvName("conflictOnNextReplace"), err)
		}
		if n != st.Seen {
			st.Seen, st.Remaining = n, n
		}
		if st.Remaining > 0 {
			st.Remaining--
			return true, nil
		}
		return false, nil
	}
	data, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("knobs file %s: %w", c.Path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return false, fmt.Errorf("knobs file %s: %w", c.Path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return false, nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "conflictOnNextReplace" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(m.Content[i+1].Value))
		if err != nil {
			return false, fmt.Errorf("knobs file %s: conflictOnNextReplace: %w", c.Path, err)
		}
		if n <= 0 {
			return false, nil
		}
		m.Content[i+1].Value = strconv.Itoa(n - 1)
		m.Content[i+1].Tag = "!!int"
		var out bytes.Buffer
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return false, fmt.Errorf("knobs file %s: %w", c.Path, err)
		}
		tmp := c.Path + ".tmp"
		if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
			return false, fmt.Errorf("knobs file %s: %w", c.Path, err)
		}
		if err := os.Rename(tmp, c.Path); err != nil {
			return false, fmt.Errorf("knobs file %s: %w", c.Path, err)
		}
		return true, nil
	}
	return false, nil
}
