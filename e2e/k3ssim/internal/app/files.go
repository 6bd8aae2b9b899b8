// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/k3strap/k3strap/e2e/k3ssim/internal/pki"
)

// ensureToken writes <data-dir>/server/token = K10<sha256 of server-ca.crt>::server:<password>
// (mode 0600) and the node-token / agent-token symlinks (token-format.txt). The password is
// the configured token's (a K10 token counts as its password part), else the one already on
// disk (restarts keep it), else 32 random hex characters. It returns the password.
func (e *runtimeEnv) ensureToken(serverCA []byte) (string, error) {
	dir := filepath.Join(e.dataDir, "server")
	tokenPath := filepath.Join(dir, "token")
	configured := e.s.Token
	if configured == "" && e.s.TokenFile != "" {
		b, err := os.ReadFile(e.opts.Root.Path(e.s.TokenFile))
		if err != nil {
			return "", err
		}
		configured = strings.TrimSpace(string(b))
	}
	var pw string
	switch {
	case configured != "":
		t, err := pki.ParseToken(configured)
		if err != nil {
			return "", err
		}
		pw = t.Password
	default:
		if b, err := os.ReadFile(tokenPath); err == nil {
			if t, err := pki.ParseToken(string(b)); err == nil {
				pw = t.Password
			}
		}
		if pw == "" {
			var err error
			if pw, err = pki.RandomHex(16); err != nil {
				return "", err
			}
		}
	}
	if err := writeTokenFiles(dir, serverCA, pw, e.s.AgentToken); err != nil {
		return "", err
	}
	return pw, nil
}

func writeTokenFiles(dir string, serverCA []byte, pw, agentToken string) error {
	tokenPath := filepath.Join(dir, "token")
	content := pki.FormatToken(serverCA, "server", pw) + "\n"
	if cur, err := os.ReadFile(tokenPath); err != nil || string(cur) != content {
		if err := pki.WriteFileAtomic(tokenPath, []byte(content), 0o600); err != nil {
			return err
		}
	}
	if err := symlink(tokenPath, filepath.Join(dir, "node-token")); err != nil {
		return err
	}
	agentPath := filepath.Join(dir, "agent-token")
	if agentToken == "" {
		return symlink(tokenPath, agentPath)
	}
	t, err := pki.ParseToken(agentToken)
	if err != nil {
		return err
	}
	_ = os.Remove(agentPath)
	return pki.WriteFileAtomic(agentPath, []byte(pki.FormatToken(serverCA, "node", t.Password)+"\n"), 0o600)
}

func symlink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Symlink(target, link)
}

// loadOrIssueClient returns <dir>/<name>.crt/.key, issuing them from ca when missing.
func loadOrIssueClient(dir, name string, ca *pki.CA, cn string, orgs []string) (certPEM, keyPEM []byte, err error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	c, errC := os.ReadFile(certPath)
	k, errK := os.ReadFile(keyPath)
	if errC == nil && errK == nil {
		return c, k, nil
	}
	if certPEM, keyPEM, err = ca.Issue(cn, orgs, nil, true); err != nil {
		return nil, nil, err
	}
	if err := pki.WriteFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, pki.WriteFileAtomic(keyPath, keyPEM, 0o600)
}
