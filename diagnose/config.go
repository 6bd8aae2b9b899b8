// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MergeConfigFiles merges K3s config files in the order given (config.yaml first, then the
// drop-ins in lexical order) with K3s's rules (docs/k3s.md#config-file,
// pkg/configfilearg/parser.go): the last file wins per key, a key ending in "+" appends to
// the list. Values become strings (lists item by item, scalars as one item). Documents that do
// not parse are skipped: this reads evidence, it does not validate.
func MergeConfigFiles(docs []string) map[string][]string {
	out := map[string][]string{}
	for _, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			continue
		}
		for k, v := range m {
			vals := toStrings(v)
			if base, ok := strings.CutSuffix(k, "+"); ok {
				out[base] = append(out[base], vals...)
				continue
			}
			out[k] = vals
		}
	}
	return out
}

func toStrings(v any) []string {
	switch t := v.(type) {
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			out = append(out, fmt.Sprint(x))
		}
		return out
	case nil:
		return nil
	default:
		return []string{fmt.Sprint(t)}
	}
}
