// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrNoPassphrase is what a Config.Passphrase function returns when it has no way to get the
// passphrase of a key (no environment variable, no file, no terminal): the key is then left
// to the ssh-agent when one is on, else refused with how to give the passphrase.
var ErrNoPassphrase = errors.New("no passphrase source")

// CertificateError is a user certificate that cannot be used: unreadable, not a user
// certificate, for none of the keys, or outside its validity window. It is found locally,
// before anything is dialed.
type CertificateError struct {
	// Path is the certificate file (OpenSSH CertificateFile, ssh.certificatePath, or
	// <key>-cert.pub next to a key).
	Path string
	Err  error
}

func (e *CertificateError) Error() string {
	return fmt.Sprintf("certificate %s: %v", e.Path, e.Err)
}

func (e *CertificateError) Unwrap() error { return e.Err }

// certTime formats a certificate time stamp (seconds since the epoch; CertTimeInfinity is
// "forever").
func certTime(t uint64) string {
	if t == ssh.CertTimeInfinity {
		return "forever"
	}
	if t > 1<<62 {
		return fmt.Sprint(t)
	}
	return time.Unix(int64(t), 0).UTC().Format(time.RFC3339)
}

// CheckCertValidity returns an error when now lies outside cert's validity window
// [ValidAfter, ValidBefore) — the window ssh-keygen -V set (ssh-keygen(1), CERTIFICATES) —
// naming the window, so that an expired certificate is reported here rather than as the
// host's bare "permission denied".
func CheckCertValidity(cert *ssh.Certificate, now time.Time) error {
	window := fmt.Sprintf("valid from %s to %s", certTime(cert.ValidAfter), certTime(cert.ValidBefore))
	unix := uint64(now.Unix())
	if unix < cert.ValidAfter {
		return fmt.Errorf("not yet valid (%s; now %s): check this machine's clock or have the CA issue one valid now", window, now.UTC().Format(time.RFC3339))
	}
	if cert.ValidBefore != ssh.CertTimeInfinity && unix >= cert.ValidBefore {
		return fmt.Errorf("expired (%s; now %s): have the CA sign a new one (ssh-keygen -s, Vault, Teleport…)", window, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// readCertificate reads an OpenSSH user certificate (the "-cert.pub" format) from path.
func readCertificate(path string) (*ssh.Certificate, error) {
	b, err := ReadRegularFile(path)
	if err != nil {
		return nil, &CertificateError{Path: path, Err: err}
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, &CertificateError{Path: path, Err: fmt.Errorf("not an OpenSSH certificate: %w", err)}
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, &CertificateError{Path: path, Err: fmt.Errorf("is a plain %s public key, not a certificate (sign it with ssh-keygen -s)", pub.Type())}
	}
	if cert.CertType != ssh.UserCert {
		return nil, &CertificateError{Path: path, Err: errors.New("is a host certificate, not a user certificate")}
	}
	return cert, nil
}

// keySigners loads the key files of cfg (KeyPath, then KeyPaths: every IdentityFile in order)
// and their certificates, and returns the signers in the order OpenSSH offers them: for each
// key its certificate first, then the key itself. Certificates outside their validity window
// are refused here (CheckCertValidity). An encrypted key is decrypted with cfg.Passphrase;
// when that has no source (ErrNoPassphrase) the key is skipped if the agent is on (deferred
// reports it), else refused with the ways to give the passphrase. A wrong passphrase is an
// error naming the key file and the source.
func keySigners(ctx context.Context, cfg Config, now time.Time) (signers []ssh.Signer, deferred []string, err error) {
	var paths []string
	for _, p := range append([]string{cfg.KeyPath}, cfg.KeyPaths...) {
		if p != "" && !contains(paths, p) {
			paths = append(paths, p)
		}
	}
	type loaded struct {
		path   string
		signer ssh.Signer
		cert   *ssh.Certificate
	}
	var keys []*loaded
	for _, p := range paths {
		s, err := loadKey(ctx, cfg, p)
		if errors.Is(err, ErrNoPassphrase) && cfg.UseAgent && os.Getenv("SSH_AUTH_SOCK") != "" {
			// An encrypted key without a passphrase source is the agent's to use.
			deferred = append(deferred, p)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, &loaded{path: p, signer: s})
	}
	pair := func(cpath string, explicit bool) error {
		cert, err := readCertificate(cpath)
		if err != nil {
			return err
		}
		want := cert.Key.Marshal()
		for _, k := range keys {
			if bytes.Equal(k.signer.PublicKey().Marshal(), want) {
				if err := CheckCertValidity(cert, now); err != nil {
					return &CertificateError{Path: cpath, Err: err}
				}
				k.cert = cert
				return nil
			}
		}
		if explicit {
			return &CertificateError{Path: cpath, Err: fmt.Errorf("certifies the key %s, which is none of the keys given (%s): set ssh.keyPath to the key it was signed for",
				ssh.FingerprintSHA256(cert.Key), strings.Join(paths, ", "))}
		}
		return nil
	}
	for _, c := range cfg.CertificatePaths {
		if c != "" {
			if err := pair(c, true); err != nil {
				return nil, nil, err
			}
		}
	}
	// OpenSSH loads <key>-cert.pub next to every identity that has no certificate given.
	for _, k := range keys {
		if k.cert != nil {
			continue
		}
		c := k.path + "-cert.pub"
		if _, err := os.Stat(c); err != nil {
			continue
		}
		if err := pair(c, false); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range keys {
		if k.cert != nil {
			cs, err := ssh.NewCertSigner(k.cert, k.signer)
			if err != nil {
				return nil, nil, &CertificateError{Path: k.path, Err: err}
			}
			signers = append(signers, cs)
		}
		signers = append(signers, k.signer)
	}
	return signers, deferred, nil
}

// loadKey reads and parses the private key file p, decrypting it with cfg.Passphrase. An
// encrypted key without a passphrase source returns an error wrapping ErrNoPassphrase.
func loadKey(ctx context.Context, cfg Config, p string) (ssh.Signer, error) {
	pem, err := ReadRegularFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading private key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	var ppe *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return s, nil
	case !errors.As(err, &ppe):
		return nil, fmt.Errorf("parsing private key %s: %w", p, err)
	}
	noSource := fmt.Errorf("private key %s is encrypted: give its passphrase with ssh.keyPassphraseEnv or ssh.keyPassphraseFile, type it on a terminal, or load the key into ssh-agent (ssh-add %s): %w", p, p, ErrNoPassphrase)
	if cfg.Passphrase == nil {
		return nil, noSource
	}
	pass, source, err := cfg.Passphrase(ctx, p)
	switch {
	case errors.Is(err, ErrNoPassphrase):
		return nil, noSource
	case err != nil:
		return nil, fmt.Errorf("passphrase for private key %s: %w", p, err)
	}
	s, err = ssh.ParsePrivateKeyWithPassphrase(pem, pass)
	clear(pass)
	if errors.Is(err, x509.IncorrectPasswordError) { //nolint:staticcheck // what x/crypto/ssh returns for a wrong passphrase
		return nil, fmt.Errorf("private key %s: the passphrase from %s is wrong", p, source)
	}
	if err != nil {
		return nil, fmt.Errorf("decrypting private key %s (passphrase from %s): %w", p, source, err)
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
