// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// KnownHosts verifies SSH host keys against an OpenSSH known_hosts file. An unknown host's key
// is recorded (trust on first use) and reported through OnRecord; a key that differs from the
// recorded one is refused with both fingerprints. One KnownHosts is shared by every connection
// of a run; it is safe for concurrent use and locks the file while appending (other k3strap
// processes may append at the same time).
type KnownHosts struct {
	// Path is the known_hosts file; created (0600, parent 0700) when missing.
	Path string
	// OnRecord is called after a new host key was recorded, with the host address and the
	// key's SHA256 fingerprint.
	OnRecord func(address, fingerprint string)

	mu sync.Mutex
}

// HostKeyMismatchError is returned when a host offers a key other than the recorded one.
type HostKeyMismatchError struct {
	Address string
	// Offered is the SHA256 fingerprint the host presented.
	Offered string
	// Known lists the recorded entries as "FILE:LINE (TYPE SHA256:...)".
	Known []string
	Path  string
}

func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("host key mismatch for %s: it offered %s but %s records %s; "+
		"this is what a man-in-the-middle attack looks like — if the host was really reinstalled, remove the old entry "+
		"with `ssh-keygen -R '%s' -f %s` and re-run",
		e.Address, e.Offered, e.Path, strings.Join(e.Known, ", "), knownhosts.Normalize(e.Address), e.Path)
}

// KnownHostsError is a known_hosts file that cannot be read, parsed, created or appended to:
// a local problem that no retry mends.
type KnownHostsError struct {
	Path string
	// Op is what failed ("reading", "recording a host key in", ...).
	Op  string
	Err error
}

func (e *KnownHostsError) Error() string {
	return fmt.Sprintf("%s known_hosts %s: %v (fix the file or its permissions, or point ssh.knownHosts elsewhere)", e.Op, e.Path, e.Err)
}

func (e *KnownHostsError) Unwrap() error { return e.Err }

func (k *KnownHosts) ensureFile() error {
	if err := os.MkdirAll(filepath.Dir(k.Path), 0o700); err != nil {
		return &KnownHostsError{Path: k.Path, Op: "creating", Err: err}
	}
	// A FIFO or a device would block the open: refuse what is not a regular file.
	if err := regularFile(k.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return &KnownHostsError{Path: k.Path, Op: "reading", Err: err}
	}
	f, err := os.OpenFile(k.Path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return &KnownHostsError{Path: k.Path, Op: "reading", Err: err}
	}
	return f.Close()
}

// db loads the file as it is now (another connection may have appended to it).
func (k *KnownHosts) db() (*knownhosts.HostKeyDB, error) {
	if err := k.ensureFile(); err != nil {
		return nil, err
	}
	db, err := knownhosts.NewDB(k.Path)
	if err != nil {
		return nil, &KnownHostsError{Path: k.Path, Op: "reading", Err: err}
	}
	return db, nil
}

// HostKeyAlgorithms returns the host key algorithms to ask address (host:port) for: when an
// @cert-authority line covers the host, every certificate algorithm first (the certificate's
// type is the host key's, not the CA's), then the plain ones; else the algorithms of the keys
// recorded for it; for a host the file does not know, the plain (non-certificate) algorithms,
// so that a host presenting a certificate from a CA nobody trusts is recorded by its plain
// key, as OpenSSH falls back to it.
func (k *KnownHosts) HostKeyAlgorithms(address string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	db, err := k.db()
	if err != nil {
		return nil
	}
	recorded := db.HostKeyAlgorithms(address)
	if len(caKeys(db, address)) > 0 {
		return append(slices.Clone(certHostKeyAlgorithms), plainHostKeyAlgorithms...)
	}
	if len(recorded) > 0 {
		return recorded
	}
	return plainHostKeyAlgorithms
}

// caKeys returns the CA keys of the @cert-authority lines of db that cover address.
func caKeys(db *knownhosts.HostKeyDB, address string) []ssh.PublicKey {
	var out []ssh.PublicKey
	for _, key := range db.HostKeys(address) {
		if key.Cert {
			out = append(out, key.PublicKey)
		}
	}
	return out
}

func isCAKey(cas []ssh.PublicKey, key ssh.PublicKey) bool {
	for _, c := range cas {
		if bytes.Equal(c.Marshal(), key.Marshal()) {
			return true
		}
	}
	return false
}

// plainHostKeyAlgorithms are x/crypto/ssh's host key algorithms without the certificate ones,
// in its order of preference; certHostKeyAlgorithms the certificate ones.
var (
	plainHostKeyAlgorithms = []string{
		ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA,
	}
	certHostKeyAlgorithms = []string{
		ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
		ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01,
	}
)

// HostCertError is a host that presented a host certificate the known_hosts file does not
// accept: signed by a CA no @cert-authority line trusts for the host, expired, or for other
// names (principals). Trust on first use never applies to a certificate.
type HostCertError struct {
	Address string
	// CA is the SHA256 fingerprint of the key that signed the certificate.
	CA   string
	Path string
	Err  error
}

func (e *HostCertError) Error() string {
	if e.CA == "" {
		return fmt.Sprintf("%s presented a plain host key although %s trusts a CA for it (@cert-authority): %v "+
			"(give the host a HostCertificate signed by that CA, or record its key with ssh-keyscan if it really has none)", e.Address, e.Path, e.Err)
	}
	return fmt.Sprintf("%s presented a host certificate signed by the CA %s that %s does not accept: %v "+
		"(add the right CA as `@cert-authority <host pattern> <CA public key>` to %s, or fix the host's certificate)",
		e.Address, e.CA, e.Path, e.Err, e.Path)
}

func (e *HostCertError) Unwrap() error { return e.Err }

// Callback returns the ssh.HostKeyCallback implementing verify-or-record, waiting for the
// file's lock (another k3strap process recording a key) as long as it takes; Dial uses
// CallbackContext.
func (k *KnownHosts) Callback() ssh.HostKeyCallback { return k.CallbackContext(context.Background()) }

// CallbackContext is Callback whose wait for the file's lock ends when ctx is done (the
// connect deadline).
func (k *KnownHosts) CallbackContext(ctx context.Context) ssh.HostKeyCallback {
	return func(hostname string, remoteAddr net.Addr, key ssh.PublicKey) error {
		k.mu.Lock()
		defer k.mu.Unlock()
		db, err := k.db()
		if err != nil {
			return err
		}
		err = db.HostKeyCallback()(hostname, remoteAddr, key)
		switch {
		case err == nil:
			return nil
		case knownhosts.IsHostKeyChanged(err):
			var ke *xknownhosts.KeyError
			errors.As(err, &ke)
			m := &HostKeyMismatchError{Address: hostname, Offered: ssh.FingerprintSHA256(key), Path: k.Path}
			cas := caKeys(db, hostname)
			for _, w := range ke.Want {
				if isCAKey(cas, w.Key) {
					continue // an @cert-authority line: not a recorded key of the host
				}
				m.Known = append(m.Known, fmt.Sprintf("%s:%d (%s %s)", w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
			}
			if len(m.Known) == 0 {
				// Only a CA covers the host, and it offered a plain key: no trust on first use.
				return &HostCertError{Address: hostname, Path: k.Path, Err: fmt.Errorf("no certificate, a %s key %s", key.Type(), ssh.FingerprintSHA256(key))}
			}
			return m
		case isCert(key):
			// A certificate is trusted through its CA (@cert-authority) or not at all.
			cert := key.(*ssh.Certificate)
			return &HostCertError{Address: hostname, CA: ssh.FingerprintSHA256(cert.SignatureKey), Path: k.Path, Err: err}
		case knownhosts.IsHostUnknown(err):
			return k.record(ctx, hostname, key)
		default:
			return err
		}
	}
}

func (k *KnownHosts) record(ctx context.Context, hostname string, key ssh.PublicKey) error {
	lock := flock.New(k.Path + ".lock")
	if ok, err := lock.TryLockContext(ctx, 20*time.Millisecond); err != nil || !ok {
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("locking %s: %w", k.Path, err)
	}
	defer func() { _ = lock.Unlock(); _ = os.Remove(k.Path + ".lock") }()
	f, err := os.OpenFile(k.Path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return &KnownHostsError{Path: k.Path, Op: "recording a host key in", Err: err}
	}
	_, werr := f.WriteString(knownhosts.Line([]string{hostname}, key) + "\n")
	cerr := f.Close()
	if werr != nil || cerr != nil {
		return &KnownHostsError{Path: k.Path, Op: "recording a host key in", Err: errors.Join(werr, cerr)}
	}
	if k.OnRecord != nil {
		k.OnRecord(hostname, ssh.FingerprintSHA256(key))
	}
	return nil
}

func isCert(key ssh.PublicKey) bool {
	_, ok := key.(*ssh.Certificate)
	return ok
}
