// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"golang.org/x/crypto/ssh"
)

// PublicKey returns a fresh ed25519 public key whose private key is thrown away: a host key or
// signer nobody can use.
func PublicKey(t testing.TB) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// AllowedSigner returns one line of an OpenSSH allowed_signers file (ssh-keygen(1) "ALLOWED
// SIGNERS") pinning a fresh ed25519 key for principals (with their options, e.g.
// `admin@example.com namespaces="git"`), newline included: a pinned signer whose private key
// nobody has, for tests of pull mode's configuration.
func AllowedSigner(t testing.TB, principals string) string {
	t.Helper()
	return principals + " " + string(ssh.MarshalAuthorizedKey(PublicKey(t)))
}
