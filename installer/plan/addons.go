// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"os"
	"path"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/cni"
)

// ManifestPrefix starts the name of every manifest k3strap places in the first server's
// manifests folder, where K3s's deploy controller applies it (docs/rancher.md).
const ManifestPrefix = "k3strap-"

// manifestFile is a manifest for k3s.DirManifests: mode 0600 (it may hold secrets), applied by K3s
// live, so no restart.
func manifestFile(name string, content []byte, secret bool) File {
	f := contentFile(path.Join(k3s.DirManifests, ManifestPrefix+name), 0o600, content, false)
	f.Secret = secret
	return f
}

// addonFiles returns the manifests the first server gets: the external cloud controller,
// the CNI and Rancher. Each source lives in its own file.
func (pl *Planner) addonFiles() ([]File, error) {
	pl.addonsOnce.Do(func() { pl.addons, pl.addonsErr = pl.renderAddons() })
	return pl.addons, pl.addonsErr
}

// renderAddons renders the add-on manifests (addonFiles caches them: once per run).
func (pl *Planner) renderAddons() ([]File, error) {
	var out []File
	for _, src := range []func() ([]File, error){pl.cloudControllerManifests, pl.kubeVIPManifests, pl.cniManifests, pl.rancherManifests} {
		fs, err := src()
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// cloudControllerManifests places the declared external cloud controller's manifest, so it
// runs right after the first server starts and clears the uninitialized taint (F1).
func (pl *Planner) cloudControllerManifests() ([]File, error) {
	k := pl.Cluster.Spec.K3s
	if k.CloudController != inventory.CloudControllerExternal || k.ExternalCloudController == nil {
		return nil, nil
	}
	b, err := os.ReadFile(pl.Cluster.ResolvePath(k.ExternalCloudController.Manifest))
	if err != nil {
		return nil, fmt.Errorf("external cloud controller manifest: %w", err)
	}
	return []File{manifestFile("cloud-controller.yaml", b, false)}, nil
}

// cniManifests returns the CNI manifests for the first server's manifests folder:
// kube-flannel for flannel-standalone; the tigera operator and the Installation for Calico;
// nothing for K3s's embedded flannel and none. Rendered by templates/cni; a local
// spec.cni.calico.manifest is read here.
func (pl *Planner) cniManifests() ([]File, error) {
	ms, err := cni.Manifests(pl.Cluster, os.ReadFile)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, m := range ms {
		out = append(out, manifestFile(m.Name, m.Content, false))
	}
	return out, nil
}
