// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package templates renders every file k3strap puts on a host: K3s's config.yaml, the install
// script, and (issues 4 and 5) the CNI and Rancher manifests. Files live in an embed.FS; render
// functions are typed and pure, so golden tests pin their output. Nothing here knows about SSH.
package templates

import (
	"bytes"
	_ "embed"
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

//go:embed install/k3s-install.sh
var installScript []byte

// InstallScript returns k3strap's K3s install script (templates/install/k3s-install.sh), which
// follows the environment interface of the official get.k3s.io script.
func InstallScript() []byte { return append([]byte(nil), installScript...) }

// configHeader starts every rendered config.yaml.
const configHeader = "# Managed by k3strap: edit the inventory and re-run `k3strap apply`, not this file.\n" +
	"# Keys are K3s flag names (k3s %s --help).\n"

// K3sConfig renders cfg as K3s's /etc/rancher/k3s/config.yaml for role: a header comment, then
// the keys in the order of the K3sConfig type (typed fields) followed by Extra sorted by name.
// Secrets (token, agent-token) are refused: k3strap passes the token through token-file so
// that config.yaml, `k3strap render` and diffs never hold it. Every key must be a flag of role
// in the K3s flag table (k3s.Flags); an unknown key is an error naming it (K3s itself would only warn).
func K3sConfig(role inventory.Role, cfg inventory.K3sConfig) ([]byte, error) {
	if cfg.Token != "" || cfg.AgentToken != "" {
		return nil, fmt.Errorf("config.yaml must not carry the token: pass it through token-file")
	}
	table := k3s.Flags()
	for _, k := range cfg.Keys() {
		if _, ok := table.Lookup(role.FlagRole(), k); !ok {
			return nil, fmt.Errorf("K3s %s does not accept config key %q (flag table of K3s %s)", role, k, k3s.FlagsVersion)
		}
	}
	var node yaml.Node
	if err := node.Encode(cfg); err != nil {
		return nil, fmt.Errorf("rendering config.yaml: %w", err)
	}
	sortExtra(&node, cfg)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, configHeader, role)
	if len(node.Content) == 0 {
		return buf.Bytes(), nil
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return nil, fmt.Errorf("rendering config.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sortExtra orders the inline Extra keys (which yaml encodes in map order) by name, after the
// typed keys, so the rendering is byte-for-byte stable across runs.
func sortExtra(n *yaml.Node, cfg inventory.K3sConfig) {
	if n.Kind != yaml.MappingNode || len(cfg.Extra) == 0 {
		return
	}
	type pair struct{ k, v *yaml.Node }
	var typed, extra []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		p := pair{n.Content[i], n.Content[i+1]}
		if _, ok := cfg.Extra[p.k.Value]; ok {
			extra = append(extra, p)
		} else {
			typed = append(typed, p)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].k.Value < extra[j].k.Value })
	n.Content = n.Content[:0]
	for _, p := range append(typed, extra...) {
		n.Content = append(n.Content, p.k, p.v)
	}
}
