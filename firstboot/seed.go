// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package firstboot is zero-touch first boot (docs/edge-first-boot.md): what a technician or an
// image builder puts on an edge box so that it converges itself in local mode at every boot,
// with no SSH session from anywhere — a cloud-init NoCloud seed (user-data, meta-data) and, for
// images without cloud-init, a systemd unit and a payload directory (k3strap, the site
// inventory with this box's connection set to local, the token in a 0600 file, the airgap
// bundle or where it is on removable media, seed.json) — and the box side of it: the status
// file, console and motd lines a technician reads, the clock checks, and the bounded wait for
// the cluster's API that joining boxes do before they join.
package firstboot

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
)

// Paths on the box. The unit (files/k3strap-firstboot.service) and install.sh name them too.
const (
	// BoxDir is where install.sh puts the payload and where `firstboot run` reads it.
	BoxDir = "/var/lib/k3strap"
	// PayloadDir is the payload's directory name beside user-data and meta-data in a seed.
	PayloadDir = "k3strap"
	// UnitName is the systemd unit converging the box at every boot.
	UnitName = "k3strap-firstboot.service"
	// InventoryName, TokenName, SeedInfoName and BundleName are the payload's files.
	InventoryName = "cluster.yaml"
	TokenName     = "token"
	SeedInfoName  = "seed.json"
	BundleName    = "site.tar"
)

//go:embed files/k3strap-firstboot.service
var unitFile []byte

//go:embed files/install.sh
var installScript []byte

//go:embed files/user-data
var userDataTemplate string

// SeedOptions say what Write puts into each host's seed.
type SeedOptions struct {
	// Out is the output directory: one subdirectory per host (Out/<host>/user-data, meta-data,
	// k3strap/...). Existing files of those hosts are replaced.
	Out string
	// Hosts are the inventory hosts to write seeds for; empty means every host.
	Hosts []string
	// Binary is the k3strap executable put on the boxes (it must be built for their
	// architecture; default: the running one).
	Binary string
	// BundleOnMedia, when set, is where the airgap bundle will be on the box (removable media,
	// e.g. /media/usb/site.tar): the bundle is not copied into the payload, its sha256 is
	// recorded in seed.json and checked by the box before anything else.
	BundleOnMedia string
	// Now is the seed's creation time (recorded: a box whose clock is before it is refused).
	Now time.Time
	// PullConfig, when set, is a pull configuration (docs/edge-pull.md) on this machine: each
	// seed carries it with host set to its box, and the files it names (pinned signers,
	// minisign key, management credential), which install.sh puts beside pull.ConfigPath
	// before it runs `k3strap pull install` — the box pulls its desired state from its first
	// boot on.
	PullConfig string
}

// Info is seed.json: what the box checks before it runs.
type Info struct {
	// Cluster and Host say whose seed this is.
	Cluster string `json:"cluster"`
	Host    string `json:"host"`
	// Created is when the seed was written (RFC 3339, UTC).
	Created time.Time `json:"created"`
	// BundleSHA256 is the sha256 (hex) of the airgap bundle, "" for online installs; BundlePath
	// is where it is on the box.
	BundleSHA256 string `json:"bundleSHA256,omitempty"`
	BundlePath   string `json:"bundlePath,omitempty"`
}

// Seed is what Write wrote for one host.
type Seed struct {
	Host string
	// Dir is the host's seed directory (user-data, meta-data, k3strap/).
	Dir string
	// InstanceID is meta-data's instance-id: cloud-init runs the user-data once per
	// instance-id; it changes with the payload.
	InstanceID string
}

// SeedError is invalid input to Write (exit 2 in the command layer).
type SeedError struct{ Err error }

func (e SeedError) Error() string { return e.Err.Error() }
func (e SeedError) Unwrap() error { return e.Err }

func seedErr(format string, args ...any) error { return SeedError{fmt.Errorf(format, args...)} }

// Write writes the seeds of opts.Hosts of the loaded inventory c, whose file's bytes are raw
// (the site inventory is carried as written — comments, relative paths and all — with
// hosts[i].connection set to local and spec.k3s.token and spec.k3s.airgapBundle replaced).
// The token is spec.k3s.token, else $K3STRAP_K3S_TOKEN's value (token, from the caller), else
// the one an earlier Write left in Out/.token, else a new one (crypto/rand, kept in Out/.token
// 0600 so that seeds written later join the same cluster). Errors: a host not in the inventory,
// an inventory with spec.k3s.airgap files but no bundle, a pull configuration a seed cannot
// carry (SeedError); an invalid pull configuration (*pull.ConfigError); I/O errors as they are.
func Write(c *inventory.Cluster, raw []byte, token string, opts SeedOptions) ([]Seed, error) {
	if len(opts.Hosts) == 0 {
		for _, h := range c.Spec.Hosts {
			opts.Hosts = append(opts.Hosts, h.Name)
		}
	}
	var hosts []*inventory.Host
	for _, n := range opts.Hosts {
		h := c.Host(n)
		if h == nil {
			var names []string
			for _, h := range c.Spec.Hosts {
				names = append(names, h.Name)
			}
			return nil, seedErr("%s: no host %q in the inventory (its hosts: %s): seeds are written for hosts of the inventory — add the host to spec.hosts first, or check the name", c.Source, n, strings.Join(names, ", "))
		}
		hosts = append(hosts, h)
	}
	k := c.Spec.K3s
	if k.Install == inventory.Airgap && k.AirgapBundle == "" {
		return nil, seedErr("%s: spec.k3s.airgap names separate files, which a box cannot read from this machine: write one bundle with `k3strap bundle -f %s -O site.tar` and set spec.k3s.airgapBundle: site.tar", c.Source, c.Source)
	}
	if opts.BundleOnMedia != "" && !filepath.IsAbs(opts.BundleOnMedia) {
		return nil, seedErr("--bundle-on-media %s: give the bundle's absolute path on the box (e.g. /media/usb/site.tar)", opts.BundleOnMedia)
	}
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("the k3strap binary to put on the boxes: %w (give it with --binary)", err)
		}
		opts.Binary = exe
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var ps *pullSeed
	if opts.PullConfig != "" {
		var err error
		if ps, err = readPullSeed(opts.PullConfig); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Out, 0o700); err != nil {
		return nil, err
	}
	tok, err := seedToken(opts.Out, c.Spec.K3s.Token.Reveal(), token)
	if err != nil {
		return nil, err
	}
	var bundleSum, bundleBox string
	if c.Bundle != nil {
		bundleSum = c.Bundle.SHA256
		bundleBox = filepath.Join(BoxDir, BundleName)
		if opts.BundleOnMedia != "" {
			bundleBox = opts.BundleOnMedia
		}
	}
	var seeds []Seed
	for _, h := range hosts {
		s, err := writeHost(c, raw, h, tok, bundleSum, bundleBox, ps, opts)
		if err != nil {
			return seeds, fmt.Errorf("host %s: %w", h.Name, err)
		}
		seeds = append(seeds, s)
	}
	return seeds, nil
}

// seedToken returns the token the seeds carry (see Write).
func seedToken(out, inInventory, fromEnv string) (string, error) {
	if inInventory != "" {
		return inInventory, nil
	}
	if fromEnv != "" {
		return fromEnv, nil
	}
	p := filepath.Join(out, ".token")
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(buf)
	if err := writeAtomic(p, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}

func writeHost(c *inventory.Cluster, raw []byte, h *inventory.Host, token, bundleSum, bundleBox string, ps *pullSeed, opts SeedOptions) (Seed, error) {
	dir := filepath.Join(opts.Out, h.Name)
	pay := filepath.Join(dir, PayloadDir)
	if err := os.MkdirAll(pay, 0o700); err != nil {
		return Seed{}, err
	}
	inv, err := hostInventory(raw, h.Name, bundleBox)
	if err != nil {
		return Seed{}, fmt.Errorf("%s: %w", c.Source, err)
	}
	info := Info{Cluster: c.Metadata.Name, Host: h.Name, Created: opts.Now.UTC().Truncate(time.Second), BundleSHA256: bundleSum, BundlePath: bundleBox}
	infoJSON, _ := json.MarshalIndent(info, "", "  ")
	type payloadFile struct {
		name string
		data []byte
		mode os.FileMode
	}
	files := []payloadFile{
		{InventoryName, inv, 0o600},
		{TokenName, []byte(token + "\n"), 0o600},
		{SeedInfoName, append(infoJSON, '\n'), 0o644},
		{UnitName, unitFile, 0o644},
		{"install.sh", installScript, 0o755},
	}
	// A seed written again without the pull configuration (or without one of its files) must
	// not leave the earlier one for install.sh to install.
	for _, n := range pullPayloadNames() {
		_ = os.Remove(filepath.Join(pay, n))
	}
	if ps != nil {
		cfg, err := ps.forHost(h.Name)
		if err != nil {
			return Seed{}, fmt.Errorf("%s: %w", opts.PullConfig, err)
		}
		files = append(files, payloadFile{PullConfigName, cfg, 0o644})
		for _, f := range ps.files {
			files = append(files, payloadFile{f.name, f.data, f.mode})
		}
	}
	digest := sha256.New()
	for _, f := range files {
		if err := writeAtomic(filepath.Join(pay, f.name), f.data, f.mode); err != nil {
			return Seed{}, err
		}
		if f.name != SeedInfoName { // seed.json holds the creation time: not part of the identity
			digest.Write(f.data)
		}
	}
	binSum, err := copyFile(opts.Binary, filepath.Join(pay, "k3strap"), 0o755)
	if err != nil {
		return Seed{}, fmt.Errorf("copying the k3strap binary %s: %w", opts.Binary, err)
	}
	digest.Write([]byte(binSum + bundleSum))
	bundleCopy := filepath.Join(pay, BundleName)
	if c.Bundle != nil && opts.BundleOnMedia == "" {
		if _, err := copyFile(c.Spec.K3s.AirgapBundle, bundleCopy, 0o600); err != nil {
			return Seed{}, fmt.Errorf("copying the airgap bundle %s: %w", c.Spec.K3s.AirgapBundle, err)
		}
	} else {
		_ = os.Remove(bundleCopy)
	}
	id := fmt.Sprintf("k3strap-%s-%s-%s", c.Metadata.Name, h.Name, hex.EncodeToString(digest.Sum(nil))[:12])
	meta := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", id, h.Name)
	if err := writeAtomic(filepath.Join(dir, "meta-data"), []byte(meta), 0o644); err != nil {
		return Seed{}, err
	}
	ud := strings.NewReplacer("{{HOST}}", h.Name, "{{CLUSTER}}", c.Metadata.Name).Replace(userDataTemplate)
	if err := writeAtomic(filepath.Join(dir, "user-data"), []byte(ud), 0o644); err != nil {
		return Seed{}, err
	}
	return Seed{Host: h.Name, Dir: dir, InstanceID: id}, nil
}

// hostInventory returns the site inventory raw with host's connection set to local, the
// token removed (it is in the token file), the SSH settings removed (spec.ssh, hosts[].ssh)
// and spec.k3s.airgapBundle pointing at bundleBox (unchanged when ""). Comments and the rest
// of the document stay as written.
func hostInventory(raw []byte, host, bundleBox string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("reading the inventory again: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("the inventory is not one YAML document")
	}
	root := doc.Content[0]
	spec := mapGet(root, "spec")
	if spec == nil {
		return nil, errors.New("the inventory has no spec")
	}
	// SSH settings name files of the workstation (keys, known_hosts) that the box has not: a
	// box in local mode reaches no host over SSH.
	mapDelete(spec, "ssh")
	if k := mapGet(spec, "k3s"); k != nil {
		mapDelete(k, "token")
		if bundleBox != "" {
			mapSet(k, "airgapBundle", bundleBox)
		}
	}
	hosts := mapGet(spec, "hosts")
	found := false
	if hosts != nil && hosts.Kind == yaml.SequenceNode {
		for _, h := range hosts.Content {
			mapDelete(h, "ssh")
			if n := mapGet(h, "name"); n != nil && n.Value == host {
				mapSet(h, "connection", string(inventory.ConnectionLocal))
				found = true
			} else if c := mapGet(h, "connection"); c != nil && c.Value == string(inventory.ConnectionLocal) {
				// Another host marked local (the operator's own local run): on this box it is
				// reached as any other.
				mapDelete(h, "connection")
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("host %s not found in spec.hosts", host)
	}
	return encodeWritten(&doc, host, "the site inventory, this host local (docs/edge-first-boot.md)")
}

// encodeWritten encodes doc (2-space indents, comments kept) under a first line saying that the
// seed wrote it for host and what it is.
func encodeWritten(doc *yaml.Node, host, what string) ([]byte, error) {
	buf := bytes.NewBufferString("# Written by `k3strap firstboot seed` for host " + host + ": " + what + ".\n")
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func mapSet(m *yaml.Node, key, value string) {
	if v := mapGet(m, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Content, v.Style = yaml.ScalarNode, "!!str", value, nil, 0
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

func mapDelete(m *yaml.Node, key string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// writeAtomic writes data to p through a temporary file in its directory and a rename.
func writeAtomic(p string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// copyFile copies src to dst atomically with mode and returns src's sha256 (hex).
func copyFile(src, dst string, mode os.FileMode) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), os.Rename(tmp.Name(), dst)
}
