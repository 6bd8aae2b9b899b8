// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package inventory

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k3strap/k3strap/k3s"
)

// Rancher validation rules (docs/rancher.md):
//   - exactly one of rancher.install and rancher.register; timeout not negative;
//   - install: version a chart version such as 2.11.3 (default DefaultRancherVersion); hostname a DNS name (not an IP
//     address: Rancher's ingress needs a host name, e.g. <ip>.sslip.io); replicas not negative;
//     tlsSource rancher, letsEncrypt (with letsEncrypt.email) or secret; letsEncrypt, tlsSecret
//     and privateCAFile only with the setting they belong to, their files present;
//     systemDefaultRegistry host[:port] without a scheme; values must not repeat a value
//     k3strap sets from a typed field; certManager only when the TLS source needs cert-manager;
//     airgap archives present (the cert-manager one too when cert-manager is needed). An airgap
//     K3s install may still reach a chart repository, so it does not require airgap charts;
//   - the bootstrap password travels in a Secret referenced by the HelmChart's valuesSecrets,
//     which K3s's helm-controller knows since K3s v1.30.12, v1.31.8 and v1.32.4
//     (k3s-io/helm-controller#268): an older spec.k3s.version is refused;
//   - register: an importURL, or a url (API mode) with an API token (apiToken or apiTokenEnv,
//     not both), both https (they carry tokens); clusterName a DNS-1123 label; caCertFile present and not combined
//     with insecure; rancherVersion a version;
//   - tolerations: operator Equal or Exists (Exists has no value, an empty key needs Exists),
//     effect NoSchedule, PreferNoSchedule, NoExecute or empty, key a qualified name.
func (v *validator) rancher() {
	r := v.c.Spec.Rancher
	if r == nil {
		return
	}
	const base = "spec.rancher"
	switch {
	case r.Install != nil && r.Register != nil:
		v.add(base+".register", atKey, "", "rancher.install and rancher.register are both set",
			"keep install (Rancher runs on this cluster) or register (the cluster joins a Rancher that runs elsewhere), not both")
	case r.Install == nil && r.Register == nil:
		v.add(base, atKey, "", "the rancher section has neither install nor register",
			"add rancher.install (with version) to install Rancher here, or rancher.register to join an existing Rancher; or remove the section")
	}
	if r.Timeout < 0 {
		v.add(base+".timeout", atValue, "", "rancher.timeout is negative", "write a duration such as 15m")
	}
	if r.Install != nil {
		v.rancherInstall(r.Install, base+".install")
	}
	if r.Register != nil {
		v.rancherRegister(r.Register, base+".register")
	}
}

var (
	chartVersionRE   = regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	registryHostRE   = regexp.MustCompile(`^[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._/-]+)?$`)
	tlsSources       = []string{string(TLSRancher), string(TLSLetsEncrypt), string(TLSSecret)}
	letsEncryptEnvs  = []string{"production", "staging"}
	rancherTypedKeys = map[string]string{
		"hostname": "hostname", "replicas": "replicas", "bootstrapPassword": "bootstrapPassword",
		"privateCA": "privateCA", "systemDefaultRegistry": "systemDefaultRegistry",
		"useBundledSystemChart": "airgap", "tolerations": "tolerations", "letsEncrypt": "letsEncrypt",
	}
)

func (v *validator) rancherInstall(in *RancherInstall, base string) {
	if in.Version != "" && !chartVersionRE.MatchString(in.Version) {
		v.add(base+".version", atValue, "", fmt.Sprintf("Rancher version %q is not a chart version", in.Version),
			"write a Rancher release such as "+DefaultRancherVersion)
	}
	if h := in.Hostname; h != "" {
		switch {
		case net.ParseIP(h) != nil:
			v.add(base+".hostname", atValue, "", fmt.Sprintf("hostname %q is an IP address; Rancher's ingress needs a host name", h),
				fmt.Sprintf("write hostname: %s.sslip.io (resolves to %s), or a DNS name pointing at the cluster", h, h))
		case len(validation.IsDNS1123Subdomain(h)) > 0:
			v.add(base+".hostname", atValue, "", fmt.Sprintf("hostname %q is not a DNS name", h),
				"use lower-case letters, digits, '-' and '.', e.g. rancher.example.com")
		}
	}
	if in.Replicas < 0 {
		v.add(base+".replicas", atValue, "", fmt.Sprintf("replicas %d is negative", in.Replicas), "leave replicas out (default: number of servers, at most 3) or give a positive number")
	}
	src := in.TLSSource
	switch src {
	case "", TLSRancher, TLSLetsEncrypt, TLSSecret:
	default:
		fix := "write tlsSource: rancher, letsEncrypt or secret"
		if s, ok := closest(string(src), tlsSources); ok {
			fix = "did you mean " + s + "?"
		}
		v.add(base+".tlsSource", atValue, "", fmt.Sprintf("unknown tlsSource %q", src), fix)
		return
	}
	if src == TLSLetsEncrypt {
		switch {
		case in.LetsEncrypt == nil || in.LetsEncrypt.Email == "":
			v.add(base+".tlsSource", atValue, "", "tlsSource: letsEncrypt needs letsEncrypt.email (the ACME account)",
				"add letsEncrypt: {email: you@example.com}")
		case !strings.Contains(in.LetsEncrypt.Email, "@"):
			v.add(base+".letsEncrypt.email", atValue, "", fmt.Sprintf("letsEncrypt.email %q is not an e-mail address", in.LetsEncrypt.Email), "write an address such as admin@example.com")
		}
		if in.LetsEncrypt != nil && in.LetsEncrypt.Environment != "" && !slices.Contains(letsEncryptEnvs, in.LetsEncrypt.Environment) {
			v.add(base+".letsEncrypt.environment", atValue, "", fmt.Sprintf("unknown Let's Encrypt environment %q", in.LetsEncrypt.Environment), "write production or staging")
		}
	} else if in.LetsEncrypt != nil {
		v.add(base+".letsEncrypt", atKey, "", fmt.Sprintf("letsEncrypt is set but tlsSource is %s", orRancher(src)),
			"set tlsSource: letsEncrypt, or remove letsEncrypt")
	}
	if in.TLSSecret != nil {
		if src != TLSSecret {
			v.add(base+".tlsSecret", atKey, "", fmt.Sprintf("tlsSecret is set but tlsSource is %s", orRancher(src)), "set tlsSource: secret, or remove tlsSecret")
		}
		if in.TLSSecret.CertFile == "" || in.TLSSecret.KeyFile == "" {
			v.add(base+".tlsSecret", atValue, "", "tlsSecret needs certFile and keyFile", "give both PEM files, or remove tlsSecret and create the Secret cattle-system/tls-rancher-ingress yourself")
		}
		v.file(base+".tlsSecret.certFile", "", v.c.ResolvePath(in.TLSSecret.CertFile), "TLS certificate", "write the certificate chain (PEM) there")
		v.file(base+".tlsSecret.keyFile", "", v.c.ResolvePath(in.TLSSecret.KeyFile), "TLS key", "write the private key (PEM) there")
	}
	if in.PrivateCAFile != "" {
		if !in.PrivateCA {
			v.add(base+".privateCAFile", atKey, "", "privateCAFile is set but privateCA is not true", "set privateCA: true, or remove privateCAFile")
		}
		v.file(base+".privateCAFile", "", v.c.ResolvePath(in.PrivateCAFile), "private CA file", "write the CA certificate (PEM) there")
	}
	if r := in.SystemDefaultRegistry; r != "" {
		if strings.Contains(r, "://") || !registryHostRE.MatchString(r) {
			v.add(base+".systemDefaultRegistry", atValue, "", fmt.Sprintf("systemDefaultRegistry %q is not a registry host", r),
				"write host[:port] without a scheme, e.g. registry.example.com:5000")
		}
	}
	keys := make([]string, 0, len(in.Values))
	for k := range in.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if field, ok := rancherTypedKeys[k]; ok {
			v.add(base+".values."+k, atKey, "", fmt.Sprintf("values.%s repeats a value k3strap sets", k), "set spec.rancher.install."+field+" instead")
		}
		if k == "ingress" {
			if m, ok := in.Values[k].(map[string]any); ok {
				if tls, ok := m["tls"].(map[string]any); ok {
					if _, ok := tls["source"]; ok {
						v.add(base+".values.ingress", atKey, "", "values.ingress.tls.source repeats a value k3strap sets", "set spec.rancher.install.tlsSource instead")
					}
				}
			}
		}
	}
	v.tolerations(in.Tolerations, base+".tolerations")

	needCM := src.NeedsCertManager()
	ag := in.Airgap
	switch {
	case !needCM && in.CertManager != nil:
		v.add(base+".certManager", atKey, "", "certManager is set but tlsSource secret does not use cert-manager", "remove certManager")
	}
	if in.CertManager != nil && in.CertManager.Version != "" && !chartVersionRE.MatchString(in.CertManager.Version) {
		v.add(base+".certManager.version", atValue, "", fmt.Sprintf("cert-manager version %q is not a chart version", in.CertManager.Version), "write a release such as v1.17.2")
	}
	if in.Repo != "" {
		v.httpURL(base+".repo", in.Repo, "chart repository")
	}
	if in.CertManager != nil && in.CertManager.Repo != "" {
		v.httpURL(base+".certManager.repo", in.CertManager.Repo, "chart repository")
	}
	if ag != nil {
		if ag.RancherChart == "" {
			v.add(base+".airgap", atValue, "", "airgap needs rancherChart", "set rancherChart: to the rancher-<version>.tgz chart archive")
		}
		v.file(base+".airgap.rancherChart", "", v.c.ResolvePath(ag.RancherChart), "Rancher chart archive", "download rancher-"+in.Version+".tgz from "+DefaultRancherRepo)
		switch {
		case needCM && ag.CertManagerChart == "":
			v.add(base+".airgap", atValue, "", "an airgap Rancher install needs airgap.certManagerChart as well (tlsSource "+string(orRancher(src))+" uses cert-manager)",
				"set certManagerChart: to the cert-manager-<version>.tgz chart archive")
		case !needCM && ag.CertManagerChart != "":
			v.add(base+".airgap.certManagerChart", atKey, "", "airgap.certManagerChart is set but tlsSource secret does not use cert-manager", "remove certManagerChart")
		}
		v.file(base+".airgap.certManagerChart", "", v.c.ResolvePath(ag.CertManagerChart), "cert-manager chart archive", "download it from "+DefaultCertManagerRepo)
	}
	if kv := v.c.Spec.K3s.Version; kv != "" && !valuesSecretsSupported(kv) {
		v.add("spec.k3s.version", atValue, "", fmt.Sprintf("K3s %s's helm-controller does not know HelmChart valuesSecrets, which carries Rancher's bootstrap password (k3s-io/helm-controller#268)", kv),
			"use K3s v1.30.12, v1.31.8, v1.32.4 or newer")
	}
}

func orRancher(s RancherTLSSource) RancherTLSSource {
	if s == "" {
		return TLSRancher
	}
	return s
}

// valuesSecretsSupported reports whether K3s release kv (vX.Y.Z[-rcN]+k3sN) ships a
// helm-controller with HelmChart.spec.valuesSecrets: v1.30.12, v1.31.8, v1.32.4 and later
// (k3s-io/helm-controller#268, validated on those release candidates). Unparsable versions
// pass (release validation reports them).
func valuesSecretsSupported(kv string) bool {
	r, ok := k3s.ParseRelease(kv)
	if !ok {
		return true
	}
	n := [3]int{r.Major, r.Minor, r.Patch}
	if n[0] != 1 {
		return n[0] > 1
	}
	switch {
	case n[1] >= 33:
		return true
	case n[1] == 32:
		return n[2] >= 4
	case n[1] == 31:
		return n[2] >= 8
	case n[1] == 30:
		return n[2] >= 12
	}
	return false
}

func (v *validator) rancherRegister(r *RancherRegister, base string) {
	switch {
	case r.ImportURL != "" && r.URL != "":
		v.add(base+".url", atKey, "", "register has both importURL and url",
			"keep importURL (apply that import manifest) or url with an API token (k3strap creates the cluster in Rancher), not both")
	case r.ImportURL == "" && r.URL == "":
		v.add(base, atKey, "", "register needs importURL, or url with an API token",
			"copy the import URL from Rancher (Cluster Management > Import Existing > Generic), or give url: and apiTokenEnv:")
	}
	if r.ImportURL != "" {
		u, err := url.Parse(r.ImportURL.Reveal())
		if err != nil || u.Scheme != "https" || u.Host == "" {
			// Never echo the URL: it embeds the registration token (and so must not travel
			// over plain http).
			v.add(base+".importURL", atValue, "", "importURL is not an https URL",
				"copy the URL of Rancher's import command: https://RANCHER/v3/import/TOKEN_CLUSTERID.yaml")
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"apiToken", r.APIToken != ""}, {"apiTokenEnv", r.APITokenEnv != ""}, {"clusterName", r.ClusterName != ""}} {
			if f.set {
				v.add(base+"."+f.name, atKey, "", f.name+" is only used with url (API mode), not with importURL", "remove "+f.name+", or use url instead of importURL")
			}
		}
	}
	if r.URL != "" {
		if u, err := url.Parse(r.URL); err != nil || u.Scheme != "https" || u.Host == "" {
			v.add(base+".url", atValue, "", fmt.Sprintf("Rancher URL %q is not an https URL (the API token must not travel in clear text)", r.URL),
				"write Rancher's address such as https://rancher.example.com")
		}
		if r.ImportURL == "" {
			switch {
			case r.APIToken == "" && r.APITokenEnv == "":
				v.add(base, atKey, "", "register.url needs an API token to create the cluster in Rancher",
					"create an API key in Rancher (account > API Keys) and name the environment variable holding it in apiTokenEnv:")
			case r.APIToken != "" && r.APITokenEnv != "":
				v.add(base+".apiTokenEnv", atKey, "", "register has both apiToken and apiTokenEnv", "keep one (apiTokenEnv keeps the token out of the file)")
			}
		}
	}
	if r.ClusterName != "" && len(validation.IsDNS1123Label(r.ClusterName)) > 0 {
		v.add(base+".clusterName", atValue, "", fmt.Sprintf("cluster name %q is not a DNS-1123 label", r.ClusterName),
			"use at most 63 lower-case letters, digits and '-'"+suggestName(r.ClusterName, validation.IsDNS1123Label))
	}
	if r.CACertFile != "" {
		if r.Insecure {
			v.add(base+".insecure", atKey, "", "insecure: true skips verification, so caCertFile would be ignored", "keep caCertFile (verify against it) or insecure, not both")
		}
		v.file(base+".caCertFile", "", v.c.ResolvePath(r.CACertFile), "Rancher CA file", "write Rancher's CA certificate (PEM) there")
	}
	if rv := r.RancherVersion; rv != "" && !chartVersionRE.MatchString(rv) {
		v.add(base+".rancherVersion", atValue, "", fmt.Sprintf("rancherVersion %q is not a version", rv), "write the version Rancher shows, e.g. v2.11.3")
	}
	v.tolerations(r.ClusterAgentTolerations, base+".clusterAgentTolerations")
	v.tolerations(r.FleetAgentTolerations, base+".fleetAgentTolerations")
}

func (v *validator) httpURL(path, raw, what string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		v.add(path, atValue, "", fmt.Sprintf("%s %q is not an http(s) URL", what, raw), "write a URL such as https://rancher.example.com")
	}
}

// tolerations checks inventory tolerations the way the API server validates them
// (kubernetes pkg/apis/core/validation ValidateTolerations).
func (v *validator) tolerations(ts []Toleration, base string) {
	for i, t := range ts {
		p := fmt.Sprintf("%s[%d]", base, i)
		switch corev1.TolerationOperator(t.Operator) {
		case "", corev1.TolerationOpEqual:
			if t.Key == "" {
				v.add(p, atValue, "", "a toleration without a key must use operator: Exists (it then tolerates every taint)", "add key:, or write operator: Exists")
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				v.add(p+".value", atKey, "", "a toleration with operator Exists has no value", "remove value:, or use operator: Equal")
			}
		default:
			v.add(p+".operator", atValue, "", fmt.Sprintf("unknown toleration operator %q", t.Operator), "write Equal or Exists")
		}
		switch corev1.TaintEffect(t.Effect) {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			v.add(p+".effect", atValue, "", fmt.Sprintf("unknown effect %q", t.Effect), "write NoSchedule, PreferNoSchedule or NoExecute (or leave it out for every effect)")
		}
		if t.Key != "" {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				v.add(p+".key", atValue, "", fmt.Sprintf("toleration key %q is invalid: %s", t.Key, strings.Join(errs, "; ")), "use a taint key such as dedicated or example.com/edge")
			}
		}
		if t.TolerationSeconds != nil && t.Effect != string(corev1.TaintEffectNoExecute) {
			v.add(p+".tolerationSeconds", atKey, "", "tolerationSeconds only applies to effect NoExecute", "remove tolerationSeconds, or set effect: NoExecute")
		}
	}
}
