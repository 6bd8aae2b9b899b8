// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// rancherDoc is an inventory with one server and the given rancher section (indented under
// spec) and K3s version.
func rancherDoc(k3sVersion, rancher string) string {
	return `apiVersion: k3strap.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  k3s:
    version: ` + k3sVersion + `
  hosts:
    - name: cp1
      address: 10.0.0.1
      role: server
  rancher:
` + rancher
}

func TestRancherInventoryDecodes(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"rancher.tgz", "cm.tgz", "ca.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := rancherDoc("v1.36.3+k3s1", `    timeout: 20m
    install:
      version: 2.11.3
      hostname: rancher.example.com
      replicas: 2
      bootstrapPassword: s3cret-pass
      tlsSource: letsEncrypt
      letsEncrypt: {email: ops@example.com, environment: staging}
      privateCA: true
      privateCAFile: ca.pem
      systemDefaultRegistry: registry.example.com:5000
      values:
        auditLog: {level: 1}
      tolerations:
        - {key: dedicated, operator: Equal, value: edge, effect: NoExecute}
      certManager: {version: v1.17.2}
      airgap: {rancherChart: rancher.tgz, certManagerChart: cm.tgz}
`)
	c, err := Parse(filepath.Join(dir, "c.yaml"), []byte(doc), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := c.Spec.Rancher.Install
	if c.Spec.Rancher.Timeout.D() != 20*time.Minute || in.Version != "2.11.3" || in.Hostname != "rancher.example.com" ||
		in.Replicas != 2 || in.BootstrapPassword.Reveal() != "s3cret-pass" || in.TLSSource != TLSLetsEncrypt ||
		in.LetsEncrypt.Email != "ops@example.com" || in.LetsEncrypt.Environment != "staging" || !in.PrivateCA ||
		in.SystemDefaultRegistry != "registry.example.com:5000" || in.CertManager.Version != "v1.17.2" ||
		in.Airgap.RancherChart != "rancher.tgz" {
		t.Errorf("decoded %+v", in)
	}
	if m, ok := in.Values["auditLog"].(map[string]any); !ok || m["level"] != 1 {
		t.Errorf("values %#v", in.Values)
	}
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoExecute}
	if got := CoreTolerations(in.Tolerations); len(got) != 1 || got[0] != want {
		t.Errorf("tolerations %+v", got)
	}
	if strings.Contains(in.BootstrapPassword.String(), "s3cret") {
		t.Error("the password is printed")
	}

	reg := rancherDoc("v1.36.3+k3s1", `    register:
      url: https://rancher.example.com
      apiTokenEnv: RANCHER_TOKEN
      clusterName: edge-lab
      insecure: true
      fleetAgentTolerations: [{key: dedicated, operator: Exists}]
`)
	c, err = Parse("", []byte(reg), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Spec.Rancher.Register
	if !r.APIMode() || r.APITokenEnv != "RANCHER_TOKEN" || r.ClusterName != "edge-lab" || !r.Insecure || len(r.FleetAgentTolerations) != 1 {
		t.Errorf("decoded %+v", r)
	}
}

func TestRancherInventoryErrors(t *testing.T) {
	tests := []struct {
		name, k3s, rancher string
		msgs               []string // one substring per expected problem, in order
	}{
		{"both", "", "    install: {version: 2.11.3, certManager: {version: v1.17.2}}\n    register: {importURL: https://r.example.com/v3/import/x.yaml}\n",
			[]string{"rancher.install and rancher.register are both set"}},
		{"neither", "", "    timeout: 5m\n", []string{"neither install nor register"}},
		{"bad version", "", "    install: {version: latest}\n", []string{`Rancher version "latest" is not a chart version`}},
		{"ip hostname", "", "    install: {version: 2.11.3, hostname: 10.0.0.1, certManager: {version: v1.17.2}}\n", []string{"is an IP address"}},
		{"tls source typo", "", "    install: {version: 2.11.3, tlsSource: letsencrypt}\n", []string{`unknown tlsSource "letsencrypt"`}},
		{"lets encrypt without email", "", "    install: {version: 2.11.3, tlsSource: letsEncrypt, certManager: {version: v1.17.2}}\n", []string{"needs letsEncrypt.email"}},
		{"airgap without cert-manager chart", "", "    install: {version: 2.11.3, airgap: {rancherChart: r.tgz}}\n", []string{"needs airgap.certManagerChart as well"}},
		{"cert-manager unused", "", "    install: {version: 2.11.3, tlsSource: secret, certManager: {version: v1.17.2}}\n", []string{"does not use cert-manager"}},
		{"typed value repeated", "", "    install: {version: 2.11.3, tlsSource: secret, values: {hostname: x.example.com, bootstrapPassword: p}}\n",
			[]string{"values.hostname repeats", "values.bootstrapPassword repeats"}},
		{"bad toleration", "", "    install: {version: 2.11.3, tlsSource: secret, tolerations: [{value: x}, {key: a, operator: In}]}\n",
			[]string{"without a key must use operator: Exists", "unknown toleration operator"}},
		{"old k3s", "v1.31.4+k3s1", "    install: {version: 2.11.3, tlsSource: secret}\n", []string{"does not know HelmChart valuesSecrets"}},
		{"register nothing", "", "    register: {insecure: true}\n", []string{"register needs importURL"}},
		{"register url without token", "", "    register: {url: https://rancher.example.com}\n", []string{"needs an API token"}},
		{"register import with api fields", "", "    register: {importURL: https://r.example.com/v3/import/x.yaml, clusterName: a}\n", []string{"clusterName is only used with url"}},
		{"register bad import url", "", "    register: {importURL: 'ftp://secret-token-here'}\n", []string{"importURL is not an https URL"}},
		{"register over http", "", "    register: {url: 'http://rancher.example.com', apiTokenEnv: T}\n", []string{"is not an https URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k3s := tt.k3s
			if k3s == "" {
				k3s = "v1.36.3+k3s1"
			}
			_, err := Parse("c.yaml", []byte(rancherDoc(k3s, tt.rancher)), LoadOptions{SkipFileChecks: true})
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v, want problems %q", err, tt.msgs)
			}
			if len(list) != len(tt.msgs) {
				t.Fatalf("got %d problems, want %d:\n%v", len(list), len(tt.msgs), list)
			}
			for i, want := range tt.msgs {
				if !strings.Contains(list[i].Message, want) {
					t.Errorf("problem %d %q does not contain %q", i, list[i].Message, want)
				}
				if list[i].Line == 0 {
					t.Errorf("problem %d has no line: %v", i, list[i])
				}
				if strings.Contains(list[i].Error(), "secret-token-here") {
					t.Errorf("problem %d echoes the import URL: %v", i, list[i])
				}
			}
		})
	}
}

func TestValuesSecretsSupported(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.29.15+k3s1": false, "v1.30.11+k3s1": false, "v1.30.12+k3s1": true, "v1.31.7+k3s1": false,
		"v1.31.8-rc1+k3s1": true, "v1.32.3+k3s1": false, "v1.32.4+k3s1": true, "v1.36.3+k3s1": true,
	} {
		if got := valuesSecretsSupported(v); got != want {
			t.Errorf("valuesSecretsSupported(%s) = %v, want %v", v, got, want)
		}
	}
}

func TestRancherDefaults(t *testing.T) {
	c := &Cluster{Spec: Spec{Rancher: &Rancher{Install: &RancherInstall{}}, Hosts: []Host{
		{Name: "a", Address: "10.0.0.1", Role: RoleAgent},
		{Name: "s1", Address: "10.0.0.2", Role: RoleServer},
		{Name: "s2", Address: "10.0.0.3", Role: RoleServer},
	}}}
	if got := c.RancherHostname(); got != "10.0.0.2.sslip.io" {
		t.Errorf("hostname %q, want the first server's address .sslip.io", got)
	}
	if got := c.RancherReplicas(); got != 2 {
		t.Errorf("replicas %d, want 2 (servers)", got)
	}
	for i := 0; i < 3; i++ {
		c.Spec.Hosts = append(c.Spec.Hosts, Host{Name: "x", Address: "10.0.1.1", Role: RoleServer})
	}
	if got := c.RancherReplicas(); got != MaxRancherReplicas {
		t.Errorf("replicas %d with 5 servers, want %d", got, MaxRancherReplicas)
	}
	c.Spec.Hosts[1].Address = "fd00::2"
	if got := c.RancherHostname(); got != "fd00--2.sslip.io" {
		t.Errorf("IPv6 hostname %q", got)
	}
	c.Spec.Rancher.Install.Hostname, c.Spec.Rancher.Install.Replicas = "r.example.com", 1
	if c.RancherHostname() != "r.example.com" || c.RancherReplicas() != 1 {
		t.Errorf("explicit values ignored: %s %d", c.RancherHostname(), c.RancherReplicas())
	}
	in := c.Spec.Rancher.Install
	if in.RancherVersion() != DefaultRancherVersion || in.CertManagerVersion() != DefaultCertManagerVersion ||
		in.RancherRepo() != DefaultRancherRepo || in.EffectiveTLSSource() != TLSRancher {
		t.Error("defaults not applied")
	}
}
