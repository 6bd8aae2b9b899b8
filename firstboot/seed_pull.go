// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package firstboot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/pull"
)

// PullConfigName is the pull configuration's name in a seed's payload; install.sh installs it
// as pull.ConfigPath and runs `k3strap pull install` (docs/edge-first-boot.md "Pull mode from
// the first boot").
const PullConfigName = "pull.yaml"

// The names of the files a pull configuration names, in a payload and in pullBoxDir() on the
// box (install.sh names them too).
const (
	pullSignersName    = "allowed_signers"
	pullMinisignName   = "minisign.pub"
	pullManagementName = "mgmt.kubeconfig"
)

// pullPayloadNames are every name a pull configuration and its files take in a payload.
func pullPayloadNames() []string {
	return []string{PullConfigName, pullSignersName, pullMinisignName, pullManagementName}
}

// pullBoxDir is the directory of pull.ConfigPath: the pull configuration and the files it names
// (the pinned signers, the minisign key, the management credential) go there on the box.
func pullBoxDir() string { return filepath.Dir(pull.ConfigPath) }

// pullSeedFile is a file the pull configuration names, carried in the payload under name and
// installed as pullBoxDir()/name with mode.
type pullSeedFile struct {
	name string
	data []byte
	mode os.FileMode
}

// pullSeed is a pull configuration read on the workstation, ready for each box: its YAML with
// the file paths rewritten to the box's, and the files.
type pullSeed struct {
	doc   yaml.Node
	files []pullSeedFile
}

// readPullSeed reads the pull configuration at path as `pull run` would (pull.LoadConfig: an
// invalid one is a *pull.ConfigError naming the file and line) and the files it names, read on
// this machine: verify.allowedSigners, source.https.minisignKey and management.kubeconfig.
// Their paths in the box's copy become pullBoxDir()'s. Refused (SeedError): a configuration
// that sets host (the seed sets it per box) or a tokenFile other than the seed's token, whose
// box would have no token there.
func readPullSeed(path string) (*pullSeed, error) {
	c, err := pull.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if c.Host != "" {
		return nil, seedErr("%s: host is set (%s), but a seed's pull configuration is written for each box with its own host — fix: drop host: from the file", path, c.Host)
	}
	if c.TokenFile != filepath.Join(BoxDir, TokenName) {
		return nil, seedErr("%s: tokenFile %s is not where the seed puts the cluster token (%s) — fix: drop tokenFile: from the file", path, c.TokenFile, filepath.Join(BoxDir, TokenName))
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &pullSeed{}
	if err := yaml.Unmarshal(raw, &s.doc); err != nil || s.doc.Kind != yaml.DocumentNode || len(s.doc.Content) == 0 {
		return nil, fmt.Errorf("%s: reading the pull configuration again: %v", path, err)
	}
	root := s.doc.Content[0]
	for _, f := range []struct {
		key, name string
		mode      os.FileMode
	}{
		{"verify.allowedSigners", pullSignersName, 0o644},
		{"source.https.minisignKey", pullMinisignName, 0o644},
		{"management.kubeconfig", pullManagementName, 0o600},
	} {
		n := pathNode(root, f.key)
		if n == nil || n.Value == "" {
			continue
		}
		data, err := os.ReadFile(n.Value)
		if err != nil {
			return nil, seedErr("%s: %s: %v — fix: give the file's path on this machine; the seed carries it to the box", path, f.key, errors.Unwrap(err))
		}
		s.files = append(s.files, pullSeedFile{name: f.name, data: data, mode: f.mode})
		mapSet(parentNode(root, f.key), lastKey(f.key), filepath.Join(pullBoxDir(), f.name))
	}
	return s, nil
}

// forHost returns the box's pull configuration: the file with host set to host and the paths
// of the files it names on the box.
func (s *pullSeed) forHost(host string) ([]byte, error) {
	var doc yaml.Node
	b, err := yaml.Marshal(&s.doc)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	// host first, where a reader looks for it.
	mapDelete(root, "host")
	root.Content = append([]*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "host"},
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: host},
	}, root.Content...)
	return encodeWritten(&doc, host, "pull mode from the first boot (docs/edge-pull.md)")
}

// pathNode returns the value at the dotted key below m (nil when absent).
func pathNode(m *yaml.Node, key string) *yaml.Node {
	for _, k := range splitKey(key) {
		m = mapGet(m, k)
		if m == nil {
			return nil
		}
	}
	return m
}

// parentNode returns the mapping holding the dotted key's last part.
func parentNode(m *yaml.Node, key string) *yaml.Node {
	parts := splitKey(key)
	for _, k := range parts[:len(parts)-1] {
		m = mapGet(m, k)
	}
	return m
}

func lastKey(key string) string { p := splitKey(key); return p[len(p)-1] }

func splitKey(key string) []string { return strings.Split(key, ".") }
