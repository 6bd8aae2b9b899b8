// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pull

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Signer is one line of an allowed_signers file: the principals it names and the public key.
type Signer struct {
	Principals string
	Key        ssh.PublicKey
	// Namespaces is the namespaces="..." option's list (nil: every namespace).
	Namespaces []string
}

// LoadAllowedSigners reads an OpenSSH allowed_signers file (ssh-keygen(1) "ALLOWED SIGNERS":
// `principals [options] keytype base64-key [comment]`, # comments, empty lines). The options
// cert-authority, valid-after and valid-before are refused (not supported: pin plain keys).
// Errors name the file and line, never the key material.
func LoadAllowedSigners(path string) ([]Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Signer
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		principals, rest := cutField(line)
		if rest == "" {
			return nil, fmt.Errorf("%s:%d: a principal and a key are needed", path, n)
		}
		key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(rest))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a public key (%v)", path, n, err)
		}
		s := Signer{Principals: principals, Key: key}
		for _, o := range opts {
			name, val, _ := strings.Cut(o, "=")
			switch strings.ToLower(name) {
			case "namespaces":
				s.Namespaces = strings.Split(strings.Trim(val, `"`), ",")
			case "cert-authority", "valid-after", "valid-before":
				return nil, fmt.Errorf("%s:%d: option %s is not supported by k3strap pull (pin the signers' plain public keys)", path, n, name)
			default:
				return nil, fmt.Errorf("%s:%d: unknown option %s", path, n, name)
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no signer in the file", path)
	}
	return out, nil
}

// cutField splits the first field (principals: possibly "double-quoted") from the rest.
func cutField(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		if i := strings.Index(s[1:], `"`); i >= 0 {
			return s[1 : i+1], strings.TrimSpace(s[i+2:])
		}
	}
	f, rest, _ := strings.Cut(s, " ")
	if i := strings.IndexAny(f, "\t"); i >= 0 {
		f, rest = s[:i], s[i+1:]
	}
	return f, strings.TrimSpace(rest)
}

// allows says whether s may sign in namespace ns.
func (s Signer) allows(ns string) bool {
	if s.Namespaces == nil {
		return true
	}
	for _, n := range s.Namespaces {
		if strings.TrimSpace(n) == ns {
			return true
		}
	}
	return false
}
