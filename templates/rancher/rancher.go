// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rancher renders the manifests k3strap places in the first server's manifests folder
// to install Rancher without a local helm (docs/rancher.md): helm.cattle.io/v1 HelmChart
// objects for cert-manager and rancher (release rancher, namespace cattle-system), applied by
// K3s's deploy controller and installed by its helm-controller; the Secret that carries the
// bootstrap password (referenced through the HelmChart's valuesSecrets, so the HelmChart itself
// holds no secret); and the TLS Secrets made from local files. Templates are embedded; render
// functions are pure and pinned by golden tests. Nothing here knows about SSH.
package rancher

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
)

//go:embed files/*.tmpl
var files embed.FS

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"quote":  quote,
	"indent": indent,
	"b64":    func(b []byte) string { return base64.StdEncoding.EncodeToString(b) },
}).ParseFS(files, "files/*.tmpl"))

// Names of the objects k3strap renders (docs/rancher.md: release rancher in cattle-system,
// cert-manager from the jetstack repository).
const (
	// RancherRelease is the rancher HelmChart's name = the Helm release; the chart's Deployment
	// cattle-system/rancher carries the same name.
	RancherRelease = "rancher"
	// RancherNamespace is the release's namespace.
	RancherNamespace = "cattle-system"
	// CertManagerRelease and CertManagerNamespace name the cert-manager release.
	CertManagerRelease   = "cert-manager"
	CertManagerNamespace = "cert-manager"
	// HelmChartNamespace is where K3s's helm-controller looks for HelmCharts.
	HelmChartNamespace = "kube-system"
	// BootstrapSecretName is the Secret (in HelmChartNamespace) holding the rancher values
	// file with bootstrapPassword; BootstrapSecretKey is its key.
	BootstrapSecretName = "k3strap-rancher-bootstrap"
	BootstrapSecretKey  = "values.yaml"
)

// Chart is where one Helm chart comes from: a repository and version (online), or the chart
// archive itself (airgap: sent base64 in spec.chartContent, which overrides repo and version).
type Chart struct {
	Repo    string
	Version string
	// Archive is the chart .tgz; nil for online installs.
	Archive []byte
}

// Install is what the rancher HelmChart is rendered from; the installer fills it from the
// inventory with defaults applied.
type Install struct {
	// Hostname is the Rancher URL's host (chart value hostname).
	Hostname string
	// Replicas is the chart value replicas (> 0).
	Replicas int
	// TLSSource is ingress.tls.source: rancher, letsEncrypt or secret.
	TLSSource string
	// LetsEncryptEmail and LetsEncryptEnvironment (production or staging) go to letsEncrypt.*
	// with tlsSource letsEncrypt.
	LetsEncryptEmail       string
	LetsEncryptEnvironment string
	// PrivateCA is the chart value privateCA.
	PrivateCA bool
	// SystemDefaultRegistry is the chart value systemDefaultRegistry ("" = unset).
	SystemDefaultRegistry string
	// Tolerations go to the chart value tolerations (and the cert-manager pods').
	Tolerations []corev1.Toleration
	// Values are further chart values merged over the ones above (a key here wins; maps merge).
	Values map[string]any
	// Rancher is the rancher chart; with an Archive, useBundledSystemChart is set (airgap).
	Rancher Chart
	// BootstrapSecret references the Secret BootstrapSecretName through valuesSecrets.
	BootstrapSecret bool
}

// helmChart is the data of helmchart.yaml.tmpl.
type helmChart struct {
	Comment, Name, Chart, Repo, Version, TargetNamespace string
	ChartContent                                         string
	ArchiveBytes                                         int
	ArchiveSHA256                                        string
	ValuesSecret, ValuesSecretKey                        string
	Values                                               string
}

func (h *helmChart) setSource(c Chart) {
	if len(c.Archive) > 0 {
		h.ChartContent = base64.StdEncoding.EncodeToString(c.Archive)
		h.ArchiveBytes = len(c.Archive)
		sum := sha256.Sum256(c.Archive)
		h.ArchiveSHA256 = hex.EncodeToString(sum[:])
		return
	}
	h.Repo, h.Version = c.Repo, c.Version
}

// RancherValues returns the rancher chart values k3strap sets for in, Values merged over them.
func RancherValues(in Install) (map[string]any, error) {
	if in.Hostname == "" || in.Replicas <= 0 {
		return nil, fmt.Errorf("rancher values need a hostname and replicas > 0 (got %q, %d)", in.Hostname, in.Replicas)
	}
	src := in.TLSSource
	if src == "" {
		src = "rancher"
	}
	v := map[string]any{
		"hostname": in.Hostname,
		"replicas": in.Replicas,
		"ingress":  map[string]any{"tls": map[string]any{"source": src}},
	}
	if src == "letsEncrypt" {
		env := in.LetsEncryptEnvironment
		if env == "" {
			env = "production"
		}
		v["letsEncrypt"] = map[string]any{"email": in.LetsEncryptEmail, "environment": env}
	}
	if in.PrivateCA {
		v["privateCA"] = true
	}
	if in.SystemDefaultRegistry != "" {
		v["systemDefaultRegistry"] = in.SystemDefaultRegistry
	}
	if len(in.Rancher.Archive) > 0 {
		v["useBundledSystemChart"] = true
	}
	if len(in.Tolerations) > 0 {
		t, err := tolerationValues(in.Tolerations)
		if err != nil {
			return nil, err
		}
		v["tolerations"] = t
	}
	if _, ok := in.Values["bootstrapPassword"]; ok {
		return nil, fmt.Errorf("the bootstrap password must not be a plain chart value: it goes through the Secret %s", BootstrapSecretName)
	}
	merge(v, in.Values)
	return v, nil
}

// RancherHelmChart renders the rancher HelmChart (release rancher, namespace cattle-system).
// The bootstrap password is never in it: with in.BootstrapSecret the HelmChart reads it from
// the Secret BootstrapSecretName through valuesSecrets (K3s helm-controller,
// k3s-io/helm-controller#268).
func RancherHelmChart(in Install) ([]byte, error) {
	vals, err := RancherValues(in)
	if err != nil {
		return nil, err
	}
	y, err := yamlOf(vals)
	if err != nil {
		return nil, err
	}
	h := helmChart{Comment: "Rancher " + rancherVersionLabel(in.Rancher), Name: RancherRelease, Chart: "rancher",
		TargetNamespace: RancherNamespace, Values: y}
	h.setSource(in.Rancher)
	if in.BootstrapSecret {
		h.ValuesSecret, h.ValuesSecretKey = BootstrapSecretName, BootstrapSecretKey
	}
	return execute("helmchart.yaml.tmpl", h)
}

func rancherVersionLabel(c Chart) string {
	if c.Version == "" {
		return "from a chart archive"
	}
	return c.Version
}

// CertManagerValues returns the cert-manager chart values: CRDs installed by the chart
// (crds.enabled since v1.15, installCRDs before), and tolerations for every cert-manager pod.
func CertManagerValues(c Chart, tolerations []corev1.Toleration) (map[string]any, error) {
	v := map[string]any{}
	if versionAtLeast(c.Version, 1, 15) {
		v["crds"] = map[string]any{"enabled": true}
	} else {
		v["installCRDs"] = true
	}
	if len(tolerations) > 0 {
		t, err := tolerationValues(tolerations)
		if err != nil {
			return nil, err
		}
		v["tolerations"] = t
		for _, sub := range []string{"webhook", "cainjector", "startupapicheck"} {
			v[sub] = map[string]any{"tolerations": t}
		}
	}
	return v, nil
}

// CertManagerHelmChart renders the cert-manager HelmChart (release cert-manager, namespace
// cert-manager), which Rancher's tlsSource rancher and letsEncrypt need first.
func CertManagerHelmChart(c Chart, tolerations []corev1.Toleration) ([]byte, error) {
	vals, err := CertManagerValues(c, tolerations)
	if err != nil {
		return nil, err
	}
	y, err := yamlOf(vals)
	if err != nil {
		return nil, err
	}
	h := helmChart{Comment: "cert-manager " + rancherVersionLabel(c) + " for Rancher's certificates", Name: CertManagerRelease,
		Chart: "cert-manager", TargetNamespace: CertManagerNamespace, Values: y}
	h.setSource(c)
	return execute("helmchart.yaml.tmpl", h)
}

// BootstrapSecret renders the Secret kube-system/BootstrapSecretName whose key
// BootstrapSecretKey is a rancher values file setting bootstrapPassword. The output holds the
// password: callers keep it 0600 and never print it.
func BootstrapSecret(password string) ([]byte, error) {
	if password == "" {
		return nil, fmt.Errorf("empty bootstrap password")
	}
	y, err := yamlOf(map[string]any{"bootstrapPassword": password})
	if err != nil {
		return nil, err
	}
	return execute("bootstrap-secret.yaml.tmpl", struct{ Name, Key, Values string }{BootstrapSecretName, BootstrapSecretKey, y})
}

// ParseBootstrapSecret returns the bootstrap password from a manifest rendered by
// BootstrapSecret (read back from a server on a later run).
func ParseBootstrapSecret(manifest []byte) (string, error) {
	var s struct {
		Kind       string            `yaml:"kind"`
		StringData map[string]string `yaml:"stringData"`
	}
	if err := yaml.Unmarshal(manifest, &s); err != nil {
		return "", fmt.Errorf("reading the bootstrap Secret manifest: %w", err)
	}
	var vals struct {
		BootstrapPassword string `yaml:"bootstrapPassword"`
	}
	if err := yaml.Unmarshal([]byte(s.StringData[BootstrapSecretKey]), &vals); err != nil || s.Kind != "Secret" || vals.BootstrapPassword == "" {
		return "", fmt.Errorf("the bootstrap Secret manifest holds no bootstrapPassword")
	}
	return vals.BootstrapPassword, nil
}

// TLSFiles are PEM contents for TLSSecrets.
type TLSFiles struct {
	// Cert and Key make cattle-system/tls-rancher-ingress (tlsSource secret); CA makes
	// cattle-system/tls-ca (privateCA). Either pair may be empty.
	Cert, Key, CA []byte
}

// TLSSecrets renders the namespace cattle-system and the Secrets Rancher's chart reads for
// tlsSource secret (tls-rancher-ingress) and privateCA (tls-ca). The output holds a private
// key: callers keep it 0600 and never print it.
func TLSSecrets(f TLSFiles) ([]byte, error) {
	if len(f.Cert) == 0 != (len(f.Key) == 0) {
		return nil, fmt.Errorf("the ingress certificate needs both the certificate and its key")
	}
	if len(f.Cert) == 0 && len(f.CA) == 0 {
		return nil, fmt.Errorf("no TLS files")
	}
	return execute("tls-secrets.yaml.tmpl", f)
}

func tolerationValues(ts []corev1.Toleration) ([]any, error) {
	b, err := json.Marshal(ts)
	if err != nil {
		return nil, err
	}
	var out []any
	err = json.Unmarshal(b, &out)
	return out, err
}

// merge copies src into dst; maps on both sides merge recursively, anything else in src wins.
func merge(dst, src map[string]any) {
	for k, sv := range src {
		if sm, ok := sv.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				cp := map[string]any{}
				merge(cp, dm)
				merge(cp, sm)
				dst[k] = cp
				continue
			}
		}
		dst[k] = sv
	}
}

// yamlOf renders v as YAML with two-space indentation and sorted map keys, without the
// trailing newline.
func yamlOf(v any) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("rendering values: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func execute(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// quote renders s as a YAML double-quoted scalar (JSON string syntax is valid YAML).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

// versionAtLeast reports whether chart version v (v1.17.2, 1.17.2) is at least major.minor;
// an unparsable version counts as new.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}
