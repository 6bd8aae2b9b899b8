// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"path"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
	"github.com/k3strap/k3strap/templates/rancher"
)

// Manifest files of the Rancher install on the first server (k3s.DirManifests, prefixed with
// ManifestPrefix), in the order they are uploaded: the bootstrap password Secret and the TLS
// Secrets before the HelmCharts that read them.
const (
	ManifestRancherBootstrap = "rancher-bootstrap.yaml"
	ManifestRancherTLS       = "rancher-tls.yaml"
	ManifestCertManager      = "cert-manager.yaml"
	ManifestRancher          = "rancher.yaml"
)

// RancherManifestPath returns the path on the first server of one of the Manifest* files.
func RancherManifestPath(name string) string { return path.Join(k3s.DirManifests, ManifestPrefix+name) }

// RancherPasswordFile returns where a generated Rancher bootstrap password is kept on the
// workstation: next to the kubeconfig, mode 0600.
func RancherPasswordFile(kubeconfig string) string { return kubeconfig + ".rancher-bootstrap-password" }

// bootstrapPasswordLength is the length of a generated bootstrap password; Rancher asks for at
// least 12 characters.
const bootstrapPasswordLength = 24

// GenerateBootstrapPassword returns a random password of letters and digits from crypto/rand.
func GenerateBootstrapPassword() (string, error) {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, bootstrapPasswordLength)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("generating the Rancher bootstrap password: %w", err)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b), nil
}

// rancherManifests returns the Rancher install manifests for the first server: the
// bootstrap password Secret (Secret file; generated with crypto/rand when the inventory has
// none, then kept as the host has it, like the cluster token), the TLS Secrets from local files,
// and the cert-manager and rancher HelmCharts. Every file is mode 0600; the Secret ones are
// never shown by render.
func (pl *Planner) rancherManifests() ([]File, error) {
	c := pl.Cluster
	if c.Spec.Rancher == nil || c.Spec.Rancher.Install == nil {
		return nil, nil
	}
	in := c.Spec.Rancher.Install
	var out []File

	pw, generated := in.BootstrapPassword.Reveal(), false
	if pw == "" {
		var err error
		if pw, err = GenerateBootstrapPassword(); err != nil {
			return nil, err
		}
		generated = true
	}
	b, err := rancher.BootstrapSecret(pw)
	if err != nil {
		return nil, err
	}
	f := manifestFile(ManifestRancherBootstrap, b, true)
	f.Keep = generated
	out = append(out, f)

	var tf rancher.TLSFiles
	if s := in.TLSSecret; s != nil && in.EffectiveTLSSource() == inventory.TLSSecret {
		if tf.Cert, err = os.ReadFile(c.ResolvePath(s.CertFile)); err != nil {
			return nil, fmt.Errorf("rancher TLS certificate: %w", err)
		}
		if tf.Key, err = os.ReadFile(c.ResolvePath(s.KeyFile)); err != nil {
			return nil, fmt.Errorf("rancher TLS key: %w", err)
		}
	}
	if in.PrivateCA && in.PrivateCAFile != "" {
		if tf.CA, err = os.ReadFile(c.ResolvePath(in.PrivateCAFile)); err != nil {
			return nil, fmt.Errorf("rancher private CA: %w", err)
		}
	}
	if len(tf.Cert) > 0 || len(tf.CA) > 0 {
		b, err := rancher.TLSSecrets(tf)
		if err != nil {
			return nil, err
		}
		out = append(out, manifestFile(ManifestRancherTLS, b, true))
	}

	tolerations := inventory.CoreTolerations(in.Tolerations)
	if in.EffectiveTLSSource().NeedsCertManager() {
		cm := rancher.Chart{Repo: in.CertManagerRepo(), Version: in.CertManagerVersion()}
		if in.Airgap != nil && in.Airgap.CertManagerChart != "" {
			if cm.Archive, err = os.ReadFile(c.ResolvePath(in.Airgap.CertManagerChart)); err != nil {
				return nil, fmt.Errorf("cert-manager chart archive: %w", err)
			}
		}
		b, err := rancher.CertManagerHelmChart(cm, tolerations)
		if err != nil {
			return nil, err
		}
		out = append(out, manifestFile(ManifestCertManager, b, false))
	}

	ri, err := rancherInstallInput(c)
	if err != nil {
		return nil, err
	}
	b, err = rancher.RancherHelmChart(ri)
	if err != nil {
		return nil, err
	}
	out = append(out, manifestFile(ManifestRancher, b, false))
	return out, nil
}

// rancherInstallInput fills the rancher template input from the inventory, defaults applied
// (hostname <first server>.sslip.io, replicas = servers up to 3, chart version and repository).
func rancherInstallInput(c *inventory.Cluster) (rancher.Install, error) {
	in := c.Spec.Rancher.Install
	ri := rancher.Install{
		Hostname:              c.RancherHostname(),
		Replicas:              c.RancherReplicas(),
		TLSSource:             string(in.EffectiveTLSSource()),
		PrivateCA:             in.PrivateCA,
		SystemDefaultRegistry: in.SystemDefaultRegistry,
		Tolerations:           inventory.CoreTolerations(in.Tolerations),
		Values:                in.Values,
		Rancher:               rancher.Chart{Repo: in.RancherRepo(), Version: in.RancherVersion()},
		BootstrapSecret:       true,
	}
	if le := in.LetsEncrypt; le != nil {
		ri.LetsEncryptEmail, ri.LetsEncryptEnvironment = le.Email, le.Environment
	}
	if in.Airgap != nil && in.Airgap.RancherChart != "" {
		var err error
		if ri.Rancher.Archive, err = os.ReadFile(c.ResolvePath(in.Airgap.RancherChart)); err != nil {
			return ri, fmt.Errorf("rancher chart archive: %w", err)
		}
	}
	return ri, nil
}
