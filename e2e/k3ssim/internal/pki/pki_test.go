// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "server-ca", "k3s-server-ca")
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := RandomHex(16)
	tok := FormatToken(ca.CertPEM, "server", pw)
	if !regexp.MustCompile(`^K10[0-9a-f]{64}::server:[0-9a-f]{32}$`).MatchString(tok) || len(tok) != 108 {
		t.Fatalf("token %q (len %d) not in token-format.txt shape", tok, len(tok))
	}
	p, err := ParseToken(tok)
	if err != nil || p.Password != pw || p.User != "server" || p.CAHash != HashCA(ca.CertPEM) {
		t.Fatalf("parse %+v %v", p, err)
	}
	if p, _ := ParseToken("plainsecret"); p.Password != "plainsecret" || p.CAHash != "" {
		t.Fatalf("bare token %+v", p)
	}
	if _, err := ParseToken("K10abc::server:x"); err == nil {
		t.Fatal("short CA hash must fail")
	}
	again, err := LoadOrCreateCA(dir, "server-ca", "k3s-server-ca")
	if err != nil || string(again.CertPEM) != string(ca.CertPEM) {
		t.Fatal("a second load must return the same CA")
	}
	if st, _ := os.Stat(filepath.Join(dir, "server-ca.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode())
	}
}
