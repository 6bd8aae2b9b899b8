// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package rancher

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/k3strap/k3strap/internal/golden"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
)

// helmChartDoc is the part of a HelmChart the tests read back.
type helmChartDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name, Namespace string
	} `yaml:"metadata"`
	Spec struct {
		Chart           string `yaml:"chart"`
		Repo            string `yaml:"repo"`
		Version         string `yaml:"version"`
		ChartContent    string `yaml:"chartContent"`
		TargetNamespace string `yaml:"targetNamespace"`
		CreateNamespace bool   `yaml:"createNamespace"`
		ValuesSecrets   []struct {
			Name string   `yaml:"name"`
			Keys []string `yaml:"keys"`
		} `yaml:"valuesSecrets"`
		ValuesContent string `yaml:"valuesContent"`
	} `yaml:"spec"`
}

func parseChart(t *testing.T, b []byte) (helmChartDoc, map[string]any) {
	t.Helper()
	var d helmChartDoc
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, b)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(d.Spec.ValuesContent), &vals); err != nil {
		t.Fatalf("valuesContent not YAML: %v", err)
	}
	return d, vals
}

func edgeToleration() corev1.Toleration {
	return corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoExecute}
}

func TestRancherHelmChartOnlineGolden(t *testing.T) {
	in := Install{Hostname: "10.0.0.10.sslip.io", Replicas: 1, Rancher: Chart{Repo: "https://releases.rancher.com/server-charts/stable", Version: "2.11.3"},
		BootstrapSecret: true}
	got, err := RancherHelmChart(in)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "rancher-online.yaml", got)
	d, vals := parseChart(t, got)
	if d.APIVersion != "helm.cattle.io/v1" || d.Kind != "HelmChart" || d.Metadata.Name != "rancher" || d.Metadata.Namespace != "kube-system" ||
		d.Spec.TargetNamespace != "cattle-system" || !d.Spec.CreateNamespace || d.Spec.Version != "2.11.3" || d.Spec.ChartContent != "" {
		t.Errorf("HelmChart %+v", d)
	}
	if len(d.Spec.ValuesSecrets) != 1 || d.Spec.ValuesSecrets[0].Name != BootstrapSecretName || d.Spec.ValuesSecrets[0].Keys[0] != BootstrapSecretKey {
		t.Errorf("valuesSecrets %+v", d.Spec.ValuesSecrets)
	}
	if vals["hostname"] != "10.0.0.10.sslip.io" || vals["replicas"] != 1 || vals["ingress"].(map[string]any)["tls"].(map[string]any)["source"] != "rancher" {
		t.Errorf("values %v", vals)
	}
	if _, ok := vals["useBundledSystemChart"]; ok {
		t.Error("online install sets useBundledSystemChart")
	}
}

func TestRancherHelmChartOptionsGolden(t *testing.T) {
	in := Install{Hostname: "rancher.example.com", Replicas: 3, TLSSource: "letsEncrypt", LetsEncryptEmail: "ops@example.com",
		PrivateCA: true, SystemDefaultRegistry: "registry.example.com:5000", Tolerations: []corev1.Toleration{edgeToleration()},
		Values:  map[string]any{"auditLog": map[string]any{"level": 2}, "ingress": map[string]any{"extraAnnotations": map[string]any{"a": "b"}}},
		Rancher: Chart{Repo: "https://charts.example.com/rancher", Version: "2.11.3"}, BootstrapSecret: true}
	got, err := RancherHelmChart(in)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "rancher-options.yaml", got)
	_, vals := parseChart(t, got)
	ing := vals["ingress"].(map[string]any)
	if ing["tls"].(map[string]any)["source"] != "letsEncrypt" || ing["extraAnnotations"].(map[string]any)["a"] != "b" {
		t.Errorf("user values did not merge with the typed ones: %v", ing)
	}
	if le := vals["letsEncrypt"].(map[string]any); le["email"] != "ops@example.com" || le["environment"] != "production" {
		t.Errorf("letsEncrypt %v", le)
	}
	tol := vals["tolerations"].([]any)[0].(map[string]any)
	if tol["key"] != "dedicated" || tol["effect"] != "NoExecute" || tol["value"] != "edge" {
		t.Errorf("tolerations %v", tol)
	}
	// Stable across renders (maps).
	for i := 0; i < 10; i++ {
		again, _ := RancherHelmChart(in)
		if string(again) != string(got) {
			t.Fatal("rendering is not stable")
		}
	}
}

func TestHelmChartsAirgapGolden(t *testing.T) {
	archive := []byte("\x1f\x8b fake rancher chart archive")
	cmArchive := []byte("\x1f\x8b fake cert-manager chart archive")
	got, err := RancherHelmChart(Install{Hostname: "rancher.lab", Replicas: 2, SystemDefaultRegistry: "registry.lab:5000",
		Rancher: Chart{Version: "2.11.3", Archive: archive}, BootstrapSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "rancher-airgap.yaml", got)
	d, vals := parseChart(t, got)
	content, err := base64.StdEncoding.DecodeString(d.Spec.ChartContent)
	if err != nil || string(content) != string(archive) {
		t.Errorf("chartContent does not decode to the archive: %v", err)
	}
	if d.Spec.Repo != "" {
		t.Errorf("airgap chart names a repository %q", d.Spec.Repo)
	}
	if vals["useBundledSystemChart"] != true || vals["systemDefaultRegistry"] != "registry.lab:5000" {
		t.Errorf("airgap values %v", vals)
	}

	cm, err := CertManagerHelmChart(Chart{Version: "v1.17.2", Archive: cmArchive}, []corev1.Toleration{edgeToleration()})
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "cert-manager-airgap.yaml", cm)
	d, vals = parseChart(t, cm)
	if content, _ := base64.StdEncoding.DecodeString(d.Spec.ChartContent); string(content) != string(cmArchive) {
		t.Error("cert-manager chartContent does not decode to the archive")
	}
	if d.Metadata.Name != "cert-manager" || d.Spec.TargetNamespace != "cert-manager" || len(d.Spec.ValuesSecrets) != 0 {
		t.Errorf("cert-manager HelmChart %+v", d)
	}
	for _, sub := range []string{"webhook", "cainjector", "startupapicheck"} {
		if _, ok := vals[sub].(map[string]any)["tolerations"]; !ok {
			t.Errorf("%s has no tolerations: %v", sub, vals)
		}
	}
}

func TestCertManagerHelmChartOnlineGolden(t *testing.T) {
	got, err := CertManagerHelmChart(Chart{Repo: "https://charts.jetstack.io", Version: "v1.17.2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "cert-manager-online.yaml", got)
	_, vals := parseChart(t, got)
	if vals["crds"].(map[string]any)["enabled"] != true {
		t.Errorf("CRDs not enabled: %v", vals)
	}
	old, _ := CertManagerValues(Chart{Version: "v1.14.5"}, nil)
	if old["installCRDs"] != true || old["crds"] != nil {
		t.Errorf("cert-manager before v1.15 needs installCRDs: %v", old)
	}
}

func TestBootstrapSecretRoundTrip(t *testing.T) {
	const pw = `Xy7"q:p#w-'long`
	got, err := BootstrapSecret(pw)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParseBootstrapSecret(got); err != nil || back != pw {
		t.Fatalf("ParseBootstrapSecret = %q, %v", back, err)
	}
	// The golden file uses a fixed, obviously fake password.
	fixed, _ := BootstrapSecret("not-a-real-password")
	golden.Assert(t, "bootstrap-secret.yaml", fixed)
	if _, err := ParseBootstrapSecret([]byte("kind: Secret\n")); err == nil {
		t.Error("a Secret without the values file parsed")
	}
	// The rancher HelmChart never carries the password, whatever the values say.
	if _, err := RancherHelmChart(Install{Hostname: "h.example", Replicas: 1, Values: map[string]any{"bootstrapPassword": pw}}); err == nil {
		t.Error("bootstrapPassword accepted as a plain chart value")
	}
	chart, _ := RancherHelmChart(Install{Hostname: "h.example", Replicas: 1, BootstrapSecret: true, Rancher: Chart{Repo: "r", Version: "1.0.0"}})
	if strings.Contains(string(chart), "bootstrapPassword") {
		t.Error("the HelmChart mentions bootstrapPassword")
	}
}

func TestTLSSecretsGolden(t *testing.T) {
	got, err := TLSSecrets(TLSFiles{Cert: []byte("CERT PEM\n"), Key: []byte("KEY PEM\n"), CA: []byte("CA PEM\n")})
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "tls-secrets.yaml", got)
	dec := yaml.NewDecoder(strings.NewReader(string(got)))
	var kinds []string
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct{ Name string }
		}
		if err := dec.Decode(&o); err != nil {
			break
		}
		kinds = append(kinds, o.Kind+"/"+o.Metadata.Name)
	}
	if strings.Join(kinds, " ") != "Namespace/cattle-system Secret/tls-rancher-ingress Secret/tls-ca" {
		t.Errorf("objects %v", kinds)
	}
	if _, err := TLSSecrets(TLSFiles{Cert: []byte("c")}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}
