// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package tui

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/schema"
)

// Building the inventory from the wizard's forms: the cluster the review screen renders
// and validates, the file's header, the defaults the forms offer.

// defaultKey returns the first of the usual private keys that exists in home/.ssh, as
// "~/.ssh/NAME", or "".
func defaultKey(home string) string {
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	for _, k := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		if _, err := os.Stat(filepath.Join(home, ".ssh", k)); err == nil {
			return "~/.ssh/" + k
		}
	}
	return ""
}

// backends lists the backend choices of a CNI type (inventory validation's lists).
func backends(cni string) []string {
	switch cni {
	case "calico":
		return []string{"VXLAN", "IPIP", "VXLANCrossSubnet", "IPIPCrossSubnet", "WireGuard", "None"}
	case "none":
		return []string{"-"}
	}
	return []string{"vxlan", "host-gw", "wireguard-native"}
}

// absPath is the inventory path made absolute (relative to the working directory).
func (w *Wizard) absPath() string {
	p := w.cluster.value("path")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// build returns the inventory as the forms describe it. Source is the target file, so that
// relative paths resolve as Load will resolve them.
func (w *Wizard) build() *inventory.Cluster {
	c := &inventory.Cluster{APIVersion: inventory.APIVersion, Kind: inventory.Kind, Source: w.absPath()}
	c.Metadata.Name = w.cluster.value("name")
	c.Spec.SSH = inventory.SSH{User: w.cluster.value("user"), KeyPath: w.cluster.value("key"), KnownHosts: w.cluster.value("knownHosts")}
	k := &c.Spec.K3s
	if v := w.k3s.value("version"); k3s.IsRelease(v) {
		k.Version = v
	} else {
		k.Channel = v
	}
	k.Install = inventory.InstallMode(w.k3s.value("install"))
	if k.Install == inventory.Airgap {
		k.Airgap = map[string]inventory.AirgapArtifacts{w.k3s.value("arch"): {
			Binary: w.k3s.value("binary"), Images: w.k3s.value("images"), Checksums: w.k3s.value("checksums"),
		}}
	}
	c.Spec.CNI.Type = inventory.CNIType(w.net.value("cni"))
	if c.Spec.CNI.Type != inventory.CNINone {
		c.Spec.CNI.Backend = w.net.value("backend")
	}
	switch w.net.value("rancher") {
	case "install":
		c.Spec.Rancher = &inventory.Rancher{Install: &inventory.RancherInstall{Hostname: w.net.value("rancherHost"), Version: w.net.value("rancherVersion")}}
	case "register":
		c.Spec.Rancher = &inventory.Rancher{Register: &inventory.RancherRegister{URL: w.net.value("rancherURL"), APITokenEnv: w.net.value("tokenEnv")}}
	}
	c.Spec.Hosts = append([]inventory.Host(nil), w.hosts...)
	return c
}

// header is the comment the wizard writes at the top of the file. Its first line is the
// yaml-language-server modeline (schema.Modeline, docs/schema.md) naming the schema that
// `k3strap schema > cluster.schema.json` writes next to the inventory, so an editor checks and
// completes the file.
func (w *Wizard) header() []string {
	modeline := strings.TrimPrefix(schema.Modeline("./"+schema.FileName), "# ") // Marshal adds "# "
	return append([]string{modeline, "Written by `k3strap init`; edit freely."}, inventory.DefaultHeader()...)
}

func (w *Wizard) defaultUser() string {
	if u := w.cluster.value("user"); u != "" {
		return u
	}
	return "root"
}
