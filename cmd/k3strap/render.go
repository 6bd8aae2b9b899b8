// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/k3strap/k3strap/installer/plan"
	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

func (a *app) renderCmd() *cobra.Command {
	var hosts []string
	var apiAddress string
	cmd := &cobra.Command{
		Use:   "render -f FILE [--host NAME]",
		Short: "Print exactly what each host gets (config.yaml, files, install environment); secrets masked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.load()
			if err != nil {
				return err
			}
			sel := map[string]bool{}
			for _, h := range hosts {
				if c.Host(h) == nil {
					return usageError{fmt.Errorf("--host %s: no such host in %s", h, c.Source)}
				}
				sel[h] = true
			}
			c.APIAddress = apiAddress
			pl := &plan.Planner{Cluster: c, MaskedOnly: true}
			if a.output == "json" || a.output == "yaml" {
				docs := []renderDoc{}
				for i := range c.Spec.Hosts {
					h := &c.Spec.Hosts[i]
					if len(sel) > 0 && !sel[h.Name] {
						continue
					}
					d, err := renderDocument(pl, c, h)
					if err != nil {
						return err
					}
					docs = append(docs, d)
				}
				_, err := writeDocument(a.stdout, a.output, docs)
				return err
			}
			for i := range c.Spec.Hosts {
				h := &c.Spec.Hosts[i]
				if len(sel) > 0 && !sel[h.Name] {
					continue
				}
				if err := a.renderHost(pl, c, h); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "only these hosts")
	cmd.Flags().StringVar(&apiAddress, "api-address", "", "extra API address (added to tls-san)")
	return cmd
}

// renderArches returns the architectures a host's plan is rendered for: the one plan ("") of an
// online install, or each architecture spec.k3s.airgap provides, sorted (an airgap host's
// artifacts depend on its architecture, which only facts reveal).
func renderArches(c *inventory.Cluster) []string {
	if c.Spec.K3s.Install != inventory.Airgap {
		return []string{""}
	}
	arches := make([]string, 0, len(c.Spec.K3s.Airgap))
	for arch := range c.Spec.K3s.Airgap {
		arches = append(arches, arch)
	}
	sort.Strings(arches)
	return arches
}

// renderHost prints one host's plan. Airgap artifacts depend on the host's architecture,
// which only facts reveal: the plan is shown for each architecture the inventory provides.
func (a *app) renderHost(pl *plan.Planner, c *inventory.Cluster, h *inventory.Host) error {
	arches := renderArches(c)
	w := a.stdout
	for i, arch := range arches {
		p, err := pl.Plan(h, arch)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(w, "### host %s (%s, %s)%s\n", h.Name, h.Address, h.Role, map[bool]string{true: " — first server, initialises the cluster", false: ""}[p.First])
			fmt.Fprintf(w, "--- %s (mode 0600)\n%s", k3s.PathConfig, k3s.Mask(string(p.ConfigYAML))) // etcd-s3 keys
			fmt.Fprintf(w, "--- %s (mode 0600): the cluster token (secret, not shown)\n", k3s.PathTokenFile)
		}
		if arch != "" {
			fmt.Fprintf(w, "--- files for %s hosts\n", arch)
		} else {
			fmt.Fprintln(w, "--- files")
		}
		for _, f := range p.Files {
			if f.Path == k3s.PathConfig {
				continue
			}
			src := "k3strap"
			if f.LocalPath != "" {
				src = f.LocalPath
			}
			sum := "sha256 " + f.SHA256
			if f.Secret {
				sum = "secret: content and checksum not shown"
			}
			fmt.Fprintf(w, "  %s  mode %04o  %s  %s  from %s\n", f.Path, f.Mode, sizeOf(f.Size), sum, src)
		}
		if i == 0 {
			// Add-on manifests (CNI) in full, unless secret or large (a local operator manifest).
			for _, f := range p.Files {
				if strings.HasPrefix(f.Path, k3s.DirManifests+"/") && !f.Secret && f.Content != nil && f.Size <= 64<<10 {
					fmt.Fprintf(w, "--- %s (mode %04o)\n%s", f.Path, f.Mode, f.Content)
				}
			}
			for _, f := range p.Files {
				if f.Shown != nil {
					fmt.Fprintf(w, "--- %s (mode %04o, secrets masked)\n%s", f.Path, f.Mode, f.Shown)
				}
			}
			fmt.Fprintf(w, "--- install: %s %s (%s)\n", strings.Join(k3s.MaskEnv(p.InstallEnv), " "), k3s.PathInstallScript, p.ScriptSource)
			fmt.Fprintf(w, "--- service: %s\n\n", p.Service)
		}
	}
	return nil
}

func sizeOf(n int64) string { return fmt.Sprintf("%d bytes", n) }

// renderDoc is one host as `render -o json|yaml` prints it: the same facts as the plain
// output, secrets masked the same way (a secret file has no content and no checksum).
type renderDoc struct {
	Host    string `json:"host"`
	Address string `json:"address"`
	Role    string `json:"role"`
	// First is true for the server that initialises the cluster.
	First bool `json:"first"`
	// Config is config.yaml with its secrets masked.
	Config  string `json:"config"`
	Service string `json:"service"`
	// Install is the install script's environment (masked) and which script runs.
	Install renderInstall `json:"install"`
	// Files per architecture ("" when the plan does not depend on it: online installs).
	Files []renderFile `json:"files"`
}

type renderInstall struct {
	Env    []string `json:"env"`
	Script string   `json:"script"`
	Source string   `json:"source"`
}

// renderFile is one planned file: mode as an octal string ("0600"), size in bytes, the
// sha256 of its content ("" for a secret), where it comes from (k3strap or a local path), and
// the content for small non-secret files (add-on manifests) or the masked one of a secret
// file that has one.
type renderFile struct {
	Arch    string `json:"arch,omitempty"`
	Path    string `json:"path"`
	Mode    string `json:"mode"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`
	Secret  bool   `json:"secret,omitempty"`
	Source  string `json:"source"`
	Content string `json:"content,omitempty"`
}

// renderDocument builds one host's renderDoc (the plan for each architecture the inventory
// provides, as renderHost shows it).
func renderDocument(pl *plan.Planner, c *inventory.Cluster, h *inventory.Host) (renderDoc, error) {
	arches := renderArches(c)
	d := renderDoc{Host: h.Name, Address: h.Address, Role: string(h.Role), Files: []renderFile{}}
	for i, arch := range arches {
		p, err := pl.Plan(h, arch)
		if err != nil {
			return d, err
		}
		if i == 0 {
			d.First, d.Service = p.First, p.Service
			d.Config = k3s.Mask(string(p.ConfigYAML))
			d.Install = renderInstall{Env: k3s.MaskEnv(p.InstallEnv), Script: k3s.PathInstallScript, Source: p.ScriptSource}
		}
		for _, f := range p.Files {
			rf := renderFile{Arch: arch, Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode), Size: f.Size, Secret: f.Secret, Source: "k3strap"}
			if f.LocalPath != "" {
				rf.Source = f.LocalPath
			}
			switch {
			case f.Path == k3s.PathConfig:
				rf.Content = d.Config
			case f.Secret:
				if f.Shown != nil {
					rf.Content = string(f.Shown)
				}
			default:
				rf.SHA256 = f.SHA256
				if f.Content != nil && f.Size <= 64<<10 {
					rf.Content = string(f.Content)
				}
			}
			d.Files = append(d.Files, rf)
		}
	}
	return d, nil
}
