// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package edge renders the files of edge and enterprise hosts: K3s's
// registries.yaml (with a masked twin for `render` and dry-run) and the example kube-vip
// manifest. Pure functions over the inventory; secrets come in through a resolver.
package edge

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"path"
	"sort"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/k3strap/k3strap/inventory"
	"github.com/k3strap/k3strap/k3s"
)

//go:embed kube-vip.yaml
var kubeVIPTemplate string

// KubeVIP renders the kube-vip DaemonSet for e (nil when e has no kubeVIP).
func KubeVIP(e *inventory.APIEndpoint) ([]byte, error) {
	if e == nil || e.KubeVIP == nil {
		return nil, nil
	}
	image := e.KubeVIP.Image
	if image == "" {
		image = inventory.DefaultKubeVIPImage
	}
	t, err := template.New("kube-vip").Parse(kubeVIPTemplate)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	// The VIP is a host address: /32 for IPv4, /128 for IPv6 (docs/ipv6.md).
	cidr := "32"
	if a, perr := netip.ParseAddr(e.VIP()); perr == nil && a.Unmap().Is6() {
		cidr = "128"
	}
	err = t.Execute(&buf, struct{ Address, Interface, Image, CIDR string }{e.VIP(), e.KubeVIP.Interface, image, cidr})
	return buf.Bytes(), err
}

// Masked stands in for a secret in the masked rendering.
const Masked = "********"

// TLSFile is one registry TLS file to place on the hosts.
type TLSFile struct {
	// Local is the file on the workstation; Remote its path on the host.
	Local, Remote string
	// Secret is true for private keys.
	Secret bool
}

// TLSFiles returns the TLS files of r's configs with their remote paths
// (k3s.DirRegistryTLS/<host>/{cert,key,ca}.pem), in order.
func TLSFiles(r *inventory.Registries) []TLSFile {
	var out []TLSFile
	for _, host := range r.RegistryHosts() {
		t := r.Configs[host].TLS
		if t == nil {
			continue
		}
		dir := path.Join(k3s.DirRegistryTLS, safeDir(host))
		if t.CertFile != "" {
			out = append(out, TLSFile{Local: t.CertFile, Remote: path.Join(dir, "cert.pem")})
		}
		if t.KeyFile != "" {
			out = append(out, TLSFile{Local: t.KeyFile, Remote: path.Join(dir, "key.pem"), Secret: true})
		}
		if t.CAFile != "" {
			out = append(out, TLSFile{Local: t.CAFile, Remote: path.Join(dir, "ca.pem")})
		}
	}
	return out
}

// safeDir turns a registry host (host[:port]) into a directory name.
func safeDir(host string) string {
	b := []byte(host)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Password returns the password of the registry host (configs key) for the real rendering.
type Password func(host string, a *inventory.RegistryAuth) (string, error)

type mirrorOut struct {
	Endpoint []string          `yaml:"endpoint,omitempty"`
	Rewrite  map[string]string `yaml:"rewrite,omitempty"`
}

type authOut struct {
	Username string `yaml:"username,omitempty"`
	Password string `yaml:"password,omitempty"`
}

type tlsOut struct {
	CertFile           string `yaml:"cert_file,omitempty"`
	KeyFile            string `yaml:"key_file,omitempty"`
	CAFile             string `yaml:"ca_file,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify,omitempty"`
}

type configOut struct {
	Auth *authOut `yaml:"auth,omitempty"`
	TLS  *tlsOut  `yaml:"tls,omitempty"`
}

type registriesOut struct {
	Mirrors map[string]mirrorOut `yaml:"mirrors,omitempty"`
	Configs map[string]configOut `yaml:"configs,omitempty"`
}

const registriesHeader = "# Managed by k3strap (spec.registries): edit the inventory and re-run `k3strap apply`.\n" +
	"# K3s reads this file at start (docs/registries.md).\n"

// Registries renders /etc/rancher/k3s/registries.yaml twice: the real file (passwords from
// password) and the masked one shown by `render` and dry-run (passwords replaced by Masked).
// A nil password renders only the masked one (real is then nil).
func Registries(r *inventory.Registries, password Password) (real, masked []byte, err error) {
	if r == nil {
		return nil, nil, nil
	}
	build := func(mask bool) ([]byte, error) {
		out := registriesOut{}
		if len(r.Mirrors) > 0 {
			out.Mirrors = map[string]mirrorOut{}
			for name, m := range r.Mirrors {
				out.Mirrors[name] = mirrorOut{Endpoint: m.Endpoint, Rewrite: m.Rewrite}
			}
		}
		hosts := r.RegistryHosts()
		sort.Strings(hosts)
		for _, host := range hosts {
			c := r.Configs[host]
			co := configOut{}
			if a := c.Auth; a != nil {
				ao := &authOut{Username: a.Username}
				if a.PasswordFile != "" || a.PasswordEnv != "" {
					if mask {
						ao.Password = Masked
					} else {
						pw, err := password(host, a)
						if err != nil {
							return nil, err
						}
						ao.Password = pw
					}
				}
				co.Auth = ao
			}
			if t := c.TLS; t != nil {
				dir := path.Join(k3s.DirRegistryTLS, safeDir(host))
				to := &tlsOut{InsecureSkipVerify: t.InsecureSkipVerify}
				if t.CertFile != "" {
					to.CertFile = path.Join(dir, "cert.pem")
				}
				if t.KeyFile != "" {
					to.KeyFile = path.Join(dir, "key.pem")
				}
				if t.CAFile != "" {
					to.CAFile = path.Join(dir, "ca.pem")
				}
				co.TLS = to
			}
			if out.Configs == nil {
				out.Configs = map[string]configOut{}
			}
			out.Configs[host] = co
		}
		var buf bytes.Buffer
		buf.WriteString(registriesHeader)
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(out); err != nil {
			return nil, fmt.Errorf("rendering registries.yaml: %w", err)
		}
		return buf.Bytes(), enc.Close()
	}
	masked, err = build(true)
	if err != nil || password == nil {
		return nil, masked, err
	}
	real, err = build(false)
	return real, masked, err
}

// MaskRegistries masks the passwords of a registries.yaml read from a host (for dry-run
// diffs); content that does not parse is replaced entirely.
func MaskRegistries(b []byte) []byte {
	var out registriesOut
	if err := yaml.Unmarshal(b, &out); err != nil {
		return []byte("# (unreadable registries.yaml, not shown)\n")
	}
	for k, c := range out.Configs {
		if c.Auth != nil && c.Auth.Password != "" {
			c.Auth.Password = Masked
			out.Configs[k] = c
		}
	}
	var buf bytes.Buffer
	buf.WriteString(registriesHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(out)
	_ = enc.Close()
	return buf.Bytes()
}
