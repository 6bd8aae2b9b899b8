// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pki creates and loads the certificates, keys, token and kubeconfig a K3s server
// keeps under <data-dir>/server (docs/k3s.md#files, fixtures token-format.txt and
// k3s.yaml.redacted). Keys are real ECDSA P-256 keys, as K3s uses.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority: its PEM files and the parsed pair.
type CA struct {
	CertPEM []byte
	KeyPEM  []byte
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
}

// LoadOrCreateCA loads <dir>/<name>.crt and .key, or creates a self-signed CA with common
// name "<cnPrefix>@<unix seconds>" (as K3s names k3s-server-ca@...) valid ten years. Files
// are written mode 0600 for the key, 0644 for the certificate.
func LoadOrCreateCA(dir, name, cnPrefix string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, errC := os.ReadFile(certPath)
	keyPEM, errK := os.ReadFile(keyPath)
	if errC == nil && errK == nil {
		return ParseCA(certPEM, keyPEM)
	}
	if !errors.Is(errC, os.ErrNotExist) && errC != nil {
		return nil, errC
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(0),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cnPrefix, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := WriteCA(dir, name, certPEM, keyPEM); err != nil {
		return nil, err
	}
	return ParseCA(certPEM, keyPEM)
}

// WriteCA writes a CA's PEM files into dir (created 0700 if missing).
func WriteCA(dir, name string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, name+".key"), keyPEM, 0o600)
}

// ParseCA parses PEM certificate and EC private key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil {
		return nil, errors.New("CA certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	return &CA{CertPEM: certPEM, KeyPEM: keyPEM, Cert: cert, Key: key}, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Issue signs a new leaf certificate. For a serving certificate pass hosts (DNS names or IP
// addresses); for a client certificate pass the common name and organisations (e.g.
// "system:admin", ["system:masters"]). It returns the PEM certificate (leaf followed by the
// CA, as K3s writes client certs) and the PEM key.
func (ca *CA) Issue(cn string, orgs []string, hosts []string, client bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		seen := map[string]bool{}
		for _, h := range hosts {
			if h == "" || seen[h] {
				continue
			}
			seen[h] = true
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if client {
		certPEM = append(certPEM, ca.CertPEM...)
	}
	keyPEM, err = encodeKey(key)
	return certPEM, keyPEM, err
}

// ServingCert issues a TLS serving certificate for hosts and returns it ready for tls.Config.
func (ca *CA) ServingCert(hosts []string) (tls.Certificate, error) {
	c, k, err := ca.Issue("k3s", []string{"k3s"}, hosts, false)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(append(c, ca.CertPEM...), k)
}

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// HashCA returns the hex sha256 of a CA bundle, the 64-hex part of a K10 token.
func HashCA(caPEM []byte) string {
	d := sha256.Sum256(caPEM)
	return hex.EncodeToString(d[:])
}

// RandomHex returns n random bytes hex-encoded (2n characters).
func RandomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// WriteFileAtomic writes data to a temporary file next to path and renames it into place,
// creating the parent directory (0755) if missing.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
