// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config reproduces how K3s v1.36.3 turns its config file, drop-ins, environment and
// command line into flags (k3s-io/k3s pkg/configfilearg/parser.go, docs/k3s.md "Config
// file"), and resolves the settings the simulator acts on.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ReadFiles reads the config file at path (physical path) plus its drop-ins path+".d/*.yaml"
// (and *.yml, case-insensitive, lexical order) and flattens them into "--key=value" arguments
// as K3s does: keys in order of first appearance, the last file wins per key, a key ending in
// "+" appends to the list built so far, list values become one argument per item. A missing
// main file is fine when drop-ins exist or when explicit is false; otherwise the error is
// returned. A file that is not a YAML mapping is an error naming the file.
func ReadFiles(path string, explicit bool) ([]string, error) {
	files, err := dropIns(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if len(files) == 0 {
			if explicit {
				return nil, err
			}
			return nil, nil
		}
	} else {
		files = append([]string{path}, files...)
	}

	var (
		seen   = map[string]bool{}
		order  []string
		values = map[string]value{}
	)
	for _, f := range files {
		kvs, err := readMapping(f)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			k := kv.key
			isAppend := strings.HasSuffix(k, "+")
			k = strings.TrimSuffix(k, "+")
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
			if old, ok := values[k]; ok && isAppend {
				values[k] = value{list: true, items: append(old.slice(), kv.val.slice()...)}
			} else {
				values[k] = kv.val
			}
		}
	}
	var args []string
	for _, k := range order {
		v := values[k]
		prefix := "--"
		if len(k) == 1 {
			prefix = "-"
		}
		if v.list {
			for _, item := range v.items {
				args = append(args, prefix+k+"="+item)
			}
			continue
		}
		args = append(args, prefix+k+"="+v.scalar)
	}
	return args, nil
}

// value is one config value: a scalar or a list of scalars.
type value struct {
	list   bool
	scalar string
	items  []string
}

// slice is K3s's toSlice: a scalar counts as one item, an empty scalar as none.
func (v value) slice() []string {
	if v.list {
		return v.items
	}
	if strings.TrimSpace(v.scalar) == "" {
		return nil
	}
	return []string{v.scalar}
}

type keyValue struct {
	key string
	val value
}

func readMapping(file string) ([]keyValue, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty file
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a YAML mapping of flag names to values", file)
	}
	var out []keyValue
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		kv := keyValue{key: k.Value}
		switch v.Kind {
		case yaml.SequenceNode:
			kv.val.list = true
			for _, item := range v.Content {
				kv.val.items = append(kv.val.items, scalarString(item))
			}
		default:
			kv.val.scalar = scalarString(v)
		}
		out = append(out, kv)
	}
	return out, nil
}

// scalarString renders a YAML node the way wrangler's convert.ToString does for scalars; a
// null becomes "".
func scalarString(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			return ""
		}
		return n.Value
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return ""
	}
	return fmt.Sprint(v)
}

func dropIns(path string) ([]string, error) {
	dir := path + ".d"
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := strings.ToLower(e.Name())
		if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}
