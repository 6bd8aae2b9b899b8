// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"time"
)

// UpgradeVia says how `k3strap upgrade` moves nodes to a new spec.k3s.version.
type UpgradeVia string

// Upgrade paths (README "Upgrades: over SSH or with system-upgrade-controller").
const (
	// UpgradeViaSSH: k3strap drains, upgrades and uncordons each node over SSH (default; the
	// only way for clusters without SUC and for nodes SUC cannot schedule on).
	UpgradeViaSSH UpgradeVia = "ssh"
	// UpgradeViaSUC: k3strap deploys system-upgrade-controller, applies the K3s Plans and
	// watches them.
	UpgradeViaSUC UpgradeVia = "suc"
)

// Upgrade is spec.k3s.upgrade.
type Upgrade struct {
	// Via is ssh (default) or suc.
	Via UpgradeVia `yaml:"via,omitempty"`
	// SUC tunes the system-upgrade-controller path.
	SUC *SUCSettings `yaml:"suc,omitempty"`
}

// SUCSettings tune `upgrade --via suc`; for airgap clusters they name a manifest and mirrored
// images.
type SUCSettings struct {
	// Manifest is a local file replacing the embedded system-upgrade-controller v0.20.1
	// manifests (namespace, RBAC, Deployment), e.g. with a mirrored image.
	Manifest string `yaml:"manifest,omitempty"`
	// ControllerImage, UpgradeImage (rancher/k3s-upgrade, tagged by SUC with the version) and
	// KubectlImage (SUC's cordon/drain image) replace the public images.
	ControllerImage string `yaml:"controllerImage,omitempty"`
	UpgradeImage    string `yaml:"upgradeImage,omitempty"`
	KubectlImage    string `yaml:"kubectlImage,omitempty"`
	// DrainTimeout bounds an agent's drain (Go duration, default 10m).
	DrainTimeout string `yaml:"drainTimeout,omitempty"`
}

// UpgradeVia returns how upgrades run for this inventory (ssh unless spec.k3s.upgrade.via).
func (c *Cluster) UpgradeVia() UpgradeVia {
	if u := c.Spec.K3s.Upgrade; u != nil && u.Via != "" {
		return u.Via
	}
	return UpgradeViaSSH
}

// SUC returns spec.k3s.upgrade.suc (never nil).
func (c *Cluster) SUC() SUCSettings {
	if u := c.Spec.K3s.Upgrade; u != nil && u.SUC != nil {
		return *u.SUC
	}
	return SUCSettings{}
}

func (v *validator) upgrade() {
	u := v.c.Spec.K3s.Upgrade
	if u == nil {
		return
	}
	switch u.Via {
	case "", UpgradeViaSSH, UpgradeViaSUC:
	default:
		fix := "write via: ssh or via: suc"
		if s, ok := closest(string(u.Via), []string{"ssh", "suc"}); ok {
			fix = "did you mean " + s + "?"
		}
		v.add("spec.k3s.upgrade.via", atValue, "", fmt.Sprintf("unknown upgrade path %q", u.Via), fix)
	}
	if s := u.SUC; s != nil {
		if s.Manifest != "" {
			v.file("spec.k3s.upgrade.suc.manifest", "", v.c.ResolvePath(s.Manifest), "system-upgrade-controller manifest",
				"download manifests/system-upgrade-controller.yaml of SUC v0.20.1 (with your mirrored image)")
		}
		if s.DrainTimeout != "" {
			if d, err := time.ParseDuration(s.DrainTimeout); err != nil || d <= 0 {
				v.add("spec.k3s.upgrade.suc.drainTimeout", atValue, "", fmt.Sprintf("drainTimeout %q is not a positive duration", s.DrainTimeout), "write e.g. drainTimeout: 10m")
			}
		}
	}
}
