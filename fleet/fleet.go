// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fleet rolls the per-cluster engine out over many sites: a fleet file (kind Fleet)
// lists the sites' inventories, the defaults they share and a rollout policy — a canary, then
// waves by count or percent, ordered or grouped by a site label, so many sites at once, a
// per-site timeout, when to stop — and the runner applies each site's inventory under that
// policy, recording its progress in a state file so that a rollout continues where it stopped.
// See docs/fleet.md.
//
// The package holds no knowledge of how one cluster is installed: the command layer gives the
// runner a function that runs a command on one site (installer.New(...).Apply and the like);
// the fleet plans, gates, records and reports.
package fleet

import (
	"github.com/k3strap/k3strap/inventory"
)

// Kind identifies a fleet document (apiVersion is inventory.APIVersion).
const Kind = "Fleet"

// Fleet is one fleet document.
type Fleet struct {
	APIVersion string             `yaml:"apiVersion"`
	Kind       string             `yaml:"kind"`
	Metadata   inventory.Metadata `yaml:"metadata"`
	Spec       Spec               `yaml:"spec"`

	// Source is the fleet file's path as given to Load.
	Source string `yaml:"-"`
	// Positions and KeyPositions map field paths ("spec.sites[2].path") to where their value
	// and their key stand in Source.
	Positions, KeyPositions inventory.Positions `yaml:"-"`
	// Sites are the loaded sites in fleet order: spec.sites in file order, the files of a glob
	// in lexical order.
	Sites []*Site `yaml:"-"`
}

// Spec is what the fleet file declares.
type Spec struct {
	// Sites name the site inventories (kind Cluster), a path or a glob each.
	Sites []SiteRef `yaml:"sites"`
	// Defaults are values every site inventory gets unless it sets them itself (defaults.go
	// says field by field how they merge).
	Defaults Defaults `yaml:"defaults,omitempty"`
	// Rollout is the policy of apply and upgrade.
	Rollout Rollout `yaml:"rollout,omitempty"`
}

// SiteRef is one entry of spec.sites.
type SiteRef struct {
	// Path is a site inventory, or a glob (path.Match syntax: *, ?, [...]) matching several;
	// relative to the fleet file's directory.
	Path string `yaml:"path"`
	// Labels describe the site (region: eu-west, tier: store); rollout.orderBy and groupBy
	// read them. Every site a glob matches gets them.
	Labels map[string]string `yaml:"labels,omitempty"`
}

// Defaults are the values a site inventory may leave out and take from the fleet. No secret
// is among them: a site's token stays in its inventory or K3STRAP_K3S_TOKEN.
type Defaults struct {
	K3s        DefaultsK3s           `yaml:"k3s,omitempty"`
	SSH        inventory.SSH         `yaml:"ssh,omitempty"`
	Registries *inventory.Registries `yaml:"registries,omitempty"`
}

// DefaultsK3s are the K3s release and artifacts every site gets unless it sets its own; the
// fields are those of an inventory's spec.k3s.
type DefaultsK3s struct {
	Version             string                               `yaml:"version,omitempty"`
	Channel             string                               `yaml:"channel,omitempty"`
	Install             inventory.InstallMode                `yaml:"install,omitempty"`
	Airgap              map[string]inventory.AirgapArtifacts `yaml:"airgap,omitempty"`
	AirgapBundle        string                               `yaml:"airgapBundle,omitempty"`
	AirgapInstallScript string                               `yaml:"airgapInstallScript,omitempty"`
	SELinuxRPMs         map[string]string                    `yaml:"selinuxRPMs,omitempty"`
	InstallScriptURL    string                               `yaml:"installScriptURL,omitempty"`
	InstallScriptSHA256 string                               `yaml:"installScriptSHA256,omitempty"`
	ReleaseURL          string                               `yaml:"releaseURL,omitempty"`
}

// Rollout is the policy apply and upgrade follow. Commands that change nothing (preflight,
// check, doctor, apply --dry-run) use only Concurrency and SiteTimeout: they run every site,
// with no canary and no stop.
type Rollout struct {
	// Canary is how many sites form the first wave (default 1; 0: no canary). A canary that
	// fails always stops the rollout.
	Canary *int `yaml:"canary,omitempty"`
	// Batch is the size of each later wave: a number of sites ("5") or a percentage of the
	// run's sites ("25%", rounded up, at least 1). Default DefaultBatch.
	Batch Amount `yaml:"batch,omitempty"`
	// OrderBy is a site label: sites are ordered by its value (sites without it last), the
	// fleet order breaking ties.
	OrderBy string `yaml:"orderBy,omitempty"`
	// GroupBy is a site label: a wave never mixes sites with different values of it.
	GroupBy string `yaml:"groupBy,omitempty"`
	// Concurrency is how many sites run at once (default DefaultConcurrency).
	Concurrency int `yaml:"concurrency,omitempty"`
	// SiteTimeout bounds one site's run (default DefaultSiteTimeout); a site that takes longer
	// is stopped as Ctrl-C stops a run, and counts as failed.
	SiteTimeout inventory.Duration `yaml:"siteTimeout,omitempty"`
	// MaxFailedSites is how many sites may fail before the rollout stops: a number ("2") or a
	// percentage of the run's sites ("5%", rounded down). Default 0: the first failure stops
	// it. Sites already running finish; no new site starts.
	MaxFailedSites Amount `yaml:"maxFailedSites,omitempty"`
	// Pause asks for a confirmation before each wave after the first (on a terminal; --yes
	// answers yes).
	Pause bool `yaml:"pause,omitempty"`
	// Unreachable is what a rollout does with a site it cannot reach (unreachable.go,
	// docs/fleet.md "Offline sites").
	Unreachable Unreachable `yaml:"unreachable,omitempty"`
}

// Rollout defaults.
const (
	DefaultCanary      = 1
	DefaultBatch       = Amount("25%")
	DefaultConcurrency = 10
	DefaultSiteTimeout = inventory.Duration(30 * 60 * 1e9) // 30 minutes
	// MaxConcurrency is the most sites run at once: each holds its hosts' SSH connections
	// (--concurrency of them), so a larger number only exhausts this machine's sockets.
	MaxConcurrency = 1000
)

// CanaryCount returns the canary's size (DefaultCanary when unset).
func (r Rollout) CanaryCount() int {
	if r.Canary == nil {
		return DefaultCanary
	}
	return *r.Canary
}

// BatchSize returns the size of the waves after the canary (DefaultBatch when unset).
func (r Rollout) BatchSize() Amount {
	if r.Batch == "" {
		return DefaultBatch
	}
	return r.Batch
}

// Site is one site of a fleet: its inventory, loaded with the fleet's defaults.
type Site struct {
	// Name is the site inventory's metadata.name, unique in the fleet.
	Name string
	// Path is the site inventory file.
	Path string
	// Labels are the labels of the spec.sites entry that named it.
	Labels map[string]string
	// Entry is the index of that spec.sites entry.
	Entry int
	// Cluster is the site's inventory with the fleet defaults and the command line's
	// overrides applied, validated.
	Cluster *inventory.Cluster
	// Digest identifies what the site was asked to be (digest.go): the inventory file's bytes
	// without its secrets and the fleet defaults it took, as "sha256:HEX".
	Digest string
}
