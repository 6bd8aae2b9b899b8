// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/k3strap/k3strap/airgapbundle"
)

// Bundle is the opened airgap bundle of spec.k3s.airgapBundle (Cluster.Bundle).
type Bundle = airgapbundle.Opened

// Inventory fields a bundle file can stand for (airgapbundle.File.Field), besides
// spec.k3s.airgap.<arch>.{binary,images,checksums} and spec.k3s.selinuxRPMs.<distribution>.
const (
	fieldInstallScript    = "spec.k3s.airgapInstallScript"
	fieldCloudController  = "spec.k3s.externalCloudController.manifest"
	fieldCalico           = "spec.cni.calico.manifest"
	fieldRancherChart     = "spec.rancher.install.airgap.rancherChart"
	fieldCertManagerChart = "spec.rancher.install.airgap.certManagerChart"
)

// BundleSources lists the local files `k3strap bundle` packs for c: per architecture of
// spec.k3s.airgap the binary, images archive and checksums (under <arch>/), the
// airgapInstallScript (install.sh), the selinuxRPMs (selinux/<distribution>/), the Calico
// manifest or chart (cni/), the external cloud controller manifest (cloud-controller/) and the
// Rancher and cert-manager chart archives (rancher/). Files keep their base names (checksums
// files name them). Registry and Rancher TLS files are left out (site-specific; keys are
// secrets), and so is every file the inventory names as a secret: a source that is one of them
// (the same file by path or inode) is refused.
func (c *Cluster) BundleSources() ([]airgapbundle.Source, error) {
	k := &c.Spec.K3s
	if k.Install != Airgap || len(k.Airgap) == 0 {
		return nil, errors.New("the inventory has no airgap artifacts to bundle: set spec.k3s.install: airgap and spec.k3s.airgap.<arch> with binary:, images: and checksums:")
	}
	if k.Version == "" {
		return nil, errors.New("spec.k3s.version is not set: a bundle is for one K3s release")
	}
	var out []airgapbundle.Source
	add := func(role airgapbundle.Role, arch, dist, field, dir, local string) {
		if local == "" {
			return
		}
		local = c.ResolvePath(local)
		p := filepath.Base(local)
		if dir != "" {
			p = dir + "/" + p
		}
		out = append(out, airgapbundle.Source{Local: local, File: airgapbundle.File{Role: role, Arch: arch, Distribution: dist, Field: field, Path: p}})
	}
	archs := make([]string, 0, len(k.Airgap))
	for a := range k.Airgap {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	for _, arch := range archs {
		a := k.Airgap[arch]
		base := "spec.k3s.airgap." + arch
		add(airgapbundle.RoleBinary, arch, "", base+".binary", arch, a.Binary)
		add(airgapbundle.RoleImages, arch, "", base+".images", arch, a.Images)
		add(airgapbundle.RoleChecksums, arch, "", base+".checksums", arch, a.Checksums)
	}
	if k.AirgapInstallScript != "" {
		local := c.ResolvePath(k.AirgapInstallScript)
		out = append(out, airgapbundle.Source{Local: local, File: airgapbundle.File{Role: airgapbundle.RoleInstallScript, Field: fieldInstallScript, Path: "install.sh"}})
	}
	dists := make([]string, 0, len(k.SELinuxRPMs))
	for d := range k.SELinuxRPMs {
		dists = append(dists, d)
	}
	sort.Strings(dists)
	for _, d := range dists {
		add(airgapbundle.RoleSELinuxRPM, "", d, "spec.k3s.selinuxRPMs."+d, "selinux/"+d, k.SELinuxRPMs[d])
	}
	if cal := c.Spec.CNI.Calico; cal != nil && c.Spec.CNI.Type == CNICalico {
		add(manifestOrChart(cal.Manifest), "", "", fieldCalico, "cni", cal.Manifest)
	}
	if e := k.ExternalCloudController; e != nil && k.CloudController == CloudControllerExternal {
		add(airgapbundle.RoleManifest, "", "", fieldCloudController, "cloud-controller", e.Manifest)
	}
	if r := c.Spec.Rancher; r != nil && r.Install != nil && r.Install.Airgap != nil {
		add(airgapbundle.RoleChart, "", "", fieldRancherChart, "rancher", r.Install.Airgap.RancherChart)
		add(airgapbundle.RoleChart, "", "", fieldCertManagerChart, "rancher", r.Install.Airgap.CertManagerChart)
	}
	secrets := c.secretFiles()
	for _, s := range out {
		for _, sec := range secrets {
			if sameFile(s.Local, sec.path) {
				return nil, fmt.Errorf("%s (%s) is the secret file of %s: a bundle never holds secrets", s.Field, s.Local, sec.field)
			}
		}
	}
	return out, nil
}

func manifestOrChart(p string) airgapbundle.Role {
	l := strings.ToLower(p)
	if strings.HasSuffix(l, ".tgz") || strings.HasSuffix(l, ".tar.gz") {
		return airgapbundle.RoleChart
	}
	return airgapbundle.RoleManifest
}

type secretFile struct{ field, path string }

// secretFiles are the local files the inventory names that hold secrets (SSH keys, sudo
// passwords, registry passwords and TLS keys of spec.registries and the hosts' own, proxy
// passwords, the Rancher TLS key).
func (c *Cluster) secretFiles() []secretFile {
	var out []secretFile
	add := func(field, p string) {
		if p != "" {
			out = append(out, secretFile{field, c.ResolvePath(p)})
		}
	}
	ssh := func(base string, s *SSH) {
		add(base+".keyPath", s.KeyPath)
		add(base+".sudoPasswordFile", s.SudoPasswordFile)
		add(base+".keyPassphraseFile", s.KeyPassphraseFile)
		if s.Bastion != nil {
			add(base+".bastion.keyPath", s.Bastion.KeyPath)
		}
		for i, b := range s.Bastions {
			add(fmt.Sprintf("%s.bastions[%d].keyPath", base, i), b.KeyPath)
		}
	}
	registries := func(base string, r *Registries) {
		if r == nil {
			return
		}
		for host, cfg := range r.Configs {
			cb := base + ".configs." + host
			if cfg.Auth != nil {
				add(cb+".auth.passwordFile", cfg.Auth.PasswordFile)
			}
			if cfg.TLS != nil {
				add(cb+".tls.keyFile", cfg.TLS.KeyFile)
			}
		}
	}
	ssh("spec.ssh", &c.Spec.SSH)
	registries("spec.registries", c.Spec.Registries)
	if p := c.Spec.Proxy; p != nil {
		add("spec.proxy.passwordFile", p.PasswordFile)
	}
	for i := range c.Spec.Hosts {
		ssh(fmt.Sprintf("spec.hosts[%d].ssh", i), &c.Spec.Hosts[i].SSH)
		registries(fmt.Sprintf("spec.hosts[%d].registries", i), c.Spec.Hosts[i].Registries)
		if p := c.Spec.Hosts[i].Proxy; p != nil {
			add(fmt.Sprintf("spec.hosts[%d].proxy.passwordFile", i), p.PasswordFile)
		}
	}
	if r := c.Spec.Rancher; r != nil && r.Install != nil && r.Install.TLSSecret != nil {
		add("spec.rancher.install.tlsSecret.keyFile", r.Install.TLSSecret.KeyFile)
	}
	return out
}

func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// applyBundle opens spec.k3s.airgapBundle (Load calls it after the overrides, before the
// defaults) and puts its files in place of the inventory's paths: each architecture of the
// bundle replaces spec.k3s.airgap.<arch>, and the install script, SELinux RPMs, Calico and
// cloud controller manifests and Rancher charts replace the paths of those fields where the
// inventory uses them. install defaults to airgap, version to the bundle's release. Problems
// are field errors at spec.k3s.airgapBundle (missing, unreadable or corrupt bundle; install:
// online) or spec.k3s.version (another release than the bundle's).
func (c *Cluster) applyBundle(opts LoadOptions) ErrorList {
	k := &c.Spec.K3s
	if k.AirgapBundle == "" {
		return nil
	}
	v := &validator{c: c}
	const path = "spec.k3s.airgapBundle"
	k.AirgapBundle = c.ResolvePath(k.AirgapBundle)
	switch k.Install {
	case "":
		k.Install = Airgap
	case Airgap:
	default:
		v.add(path, atValue, "", fmt.Sprintf("airgapBundle is only used with install: airgap, not install: %s", k.Install),
			"set install: airgap (or leave install out), or remove airgapBundle")
		return v.errs
	}
	fix := "correct the path (relative paths are relative to the inventory file's directory), or write the bundle with `k3strap bundle -f FILE -O " + filepath.Base(k.AirgapBundle) + "` where the artifacts are"
	cache, err := airgapbundle.DefaultCacheDir()
	if err != nil {
		v.add(path, atValue, "", err.Error(), "set $"+airgapbundle.CacheDirEnv+" to a writable directory")
		return v.errs
	}
	b, err := airgapbundle.Open(k.AirgapBundle, cache)
	switch {
	case err == nil:
	case opts.SkipFileChecks && errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		v.add(path, atValue, "", fmt.Sprintf("airgap bundle %s does not exist", k.AirgapBundle), fix)
		return v.errs
	case errors.Is(err, airgapbundle.ErrCorrupt):
		v.add(path, atValue, "", fmt.Sprintf("airgap bundle %s is not usable: %v", k.AirgapBundle, err),
			"copy the bundle again (compare its sha256sum with the one printed by `k3strap bundle`), or write it again with `k3strap bundle`")
		return v.errs
	default:
		v.add(path, atValue, "", fmt.Sprintf("airgap bundle %s cannot be read: %v", k.AirgapBundle, err), fix)
		return v.errs
	}
	m := b.Manifest
	switch {
	case k.Version == "" && k.Channel == "":
		k.Version = m.K3sVersion
	case k.Version != "" && k.Version != m.K3sVersion:
		v.add("spec.k3s.version", atValue, "", fmt.Sprintf("spec.k3s.version is %s but the airgap bundle %s holds K3s %s", k.Version, k.AirgapBundle, m.K3sVersion),
			fmt.Sprintf("set version: %s (or leave version out to take the bundle's), or write a bundle of %s with `k3strap bundle`", m.K3sVersion, k.Version))
	}
	c.Bundle = b
	arts := map[string]*AirgapArtifacts{}
	for i := range m.Files {
		f := &m.Files[i]
		local := b.Local(f)
		switch f.Role {
		case airgapbundle.RoleBinary, airgapbundle.RoleImages, airgapbundle.RoleChecksums:
			a := arts[f.Arch]
			if a == nil {
				a = &AirgapArtifacts{}
				arts[f.Arch] = a
			}
			switch f.Role {
			case airgapbundle.RoleBinary:
				a.Binary = local
			case airgapbundle.RoleImages:
				a.Images = local
			default:
				a.Checksums = local
			}
		case airgapbundle.RoleSELinuxRPM:
			if k.SELinuxRPMs == nil {
				k.SELinuxRPMs = map[string]string{}
			}
			k.SELinuxRPMs[f.Distribution] = local
		}
		switch f.Field {
		case fieldInstallScript:
			k.AirgapInstallScript = local
		case fieldCloudController:
			if k.CloudController == CloudControllerExternal {
				if k.ExternalCloudController == nil {
					k.ExternalCloudController = &ExternalCloudController{}
				}
				k.ExternalCloudController.Manifest = local
			}
		case fieldCalico:
			if c.Spec.CNI.Type == CNICalico {
				if c.Spec.CNI.Calico == nil {
					c.Spec.CNI.Calico = &CalicoSpec{}
				}
				c.Spec.CNI.Calico.Manifest = local
			}
		case fieldRancherChart, fieldCertManagerChart:
			if r := c.Spec.Rancher; r != nil && r.Install != nil {
				if r.Install.Airgap == nil {
					r.Install.Airgap = &RancherAirgap{}
				}
				if f.Field == fieldRancherChart {
					r.Install.Airgap.RancherChart = local
				} else {
					r.Install.Airgap.CertManagerChart = local
				}
			}
		}
	}
	if len(arts) > 0 && k.Airgap == nil {
		k.Airgap = map[string]AirgapArtifacts{}
	}
	for arch, a := range arts {
		k.Airgap[arch] = *a
	}
	if len(arts) == 0 {
		v.add(path, atValue, "", fmt.Sprintf("airgap bundle %s holds no K3s binary", k.AirgapBundle),
			"write the bundle with `k3strap bundle` from an inventory with spec.k3s.airgap.<arch>.binary")
	}
	return v.errs
}
