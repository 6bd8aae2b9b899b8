// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"errors"
	"fmt"
	"strings"
)

// Token is a parsed K3s join token: K10<ca hash>::<user>:<password>, or a bare password
// (then CAHash and User are empty). Source: k3s-io/k3s pkg/clientaccess/token.go.
type Token struct {
	CAHash   string
	User     string
	Password string // secret: never log
}

// ParseToken parses a K3s token. A bare string counts as the password. It returns an error
// for an empty token, a CA hash of the wrong length or a K10 token without user:password.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, errors.New("token must not be empty")
	}
	if !strings.HasPrefix(s, "K10") {
		return Token{Password: s}, nil
	}
	rest := s[3:]
	var t Token
	if hash, creds, ok := strings.Cut(rest, "::"); ok {
		if len(hash) > 0 && len(hash) != 64 {
			return Token{}, errors.New("invalid token CA hash length")
		}
		t.CAHash, rest = hash, creds
	}
	user, pw, ok := strings.Cut(rest, ":")
	if !ok || pw == "" {
		return Token{}, errors.New("invalid token format")
	}
	t.User, t.Password = user, pw
	return t, nil
}

// FormatToken returns K10<sha256 hex of caPEM>::<user>:<password>, the content of
// <data-dir>/server/token without the trailing newline (token-format.txt).
func FormatToken(caPEM []byte, user, password string) string {
	return fmt.Sprintf("K10%s::%s:%s", HashCA(caPEM), user, password)
}
