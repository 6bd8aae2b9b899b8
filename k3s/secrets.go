// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package k3s

import (
	"regexp"
	"strings"
)

// Masked is what Mask puts in place of a secret value.
const Masked = "********"

// SecretKeys returns the K3s config keys whose values are secrets (k3s-io/k3s
// pkg/cli/cmds/server.go and agent.go): the join tokens, the datastore endpoint (a connection
// string that may embed a password), the etcd S3 credentials and the VPN auth string. Paths to
// secret files (token-file, vpn-auth-file, ...) are not secrets. A new slice on every call.
func SecretKeys() []string {
	return []string{"token", "agent-token", "datastore-endpoint", "etcd-s3-access-key",
		"etcd-s3-secret-key", "etcd-s3-session-token", "vpn-auth"}
}

// SecretEnv returns the environment variables K3s and its install script read secrets from
// (k3s-io/k3s pkg/cli/cmds: K3S_TOKEN, K3S_AGENT_TOKEN, K3S_DATASTORE_ENDPOINT, K3S_VPN_AUTH,
// and the AWS_* variables of the etcd S3 flags). Mask also masks any other variable whose
// name contains TOKEN, PASSWORD or SECRET. A new slice on every call.
func SecretEnv() []string {
	return []string{"K3S_TOKEN", "K3S_AGENT_TOKEN", "K3S_DATASTORE_ENDPOINT", "K3S_VPN_AUTH",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
}

// IsSecretKey reports whether config key name (case-insensitive; a trailing "+" ignored) holds
// a secret: one of SecretKeys, or a key naming a password.
func IsSecretKey(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "+"))
	for _, k := range SecretKeys() {
		if k == name {
			return true
		}
	}
	return strings.Contains(name, "password") && !strings.HasSuffix(name, "-file")
}

// IsSecretEnv reports whether environment variable name holds a secret: one of SecretEnv, or
// a name containing TOKEN, PASSWORD or SECRET (case-insensitive), e.g. K3STRAP_K3S_TOKEN or
// SUDO_PASSWORD. Names ending in _FILE hold paths and are not secrets.
func IsSecretEnv(name string) bool {
	u := strings.ToUpper(strings.TrimSpace(name))
	for _, k := range SecretEnv() {
		if k == u {
			return true
		}
	}
	if strings.HasSuffix(u, "_FILE") {
		return false
	}
	return strings.Contains(u, "TOKEN") || strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET")
}

// The patterns Mask replaces (never written after initialisation).
var (
	// envPairRE: NAME=value with an upper-case environment-style name.
	envPairRE = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|\S+)`)
	// flagRE: --flag value or --flag=value.
	flagRE = regexp.MustCompile(`(--([a-z0-9-]+))([ =])("[^"]*"|'[^']*'|\S+)`)
	// yamlRE: a YAML line `key: value` (optionally a list item, quoted key).
	yamlRE = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?["']?([A-Za-z0-9_.+-]+)["']?\s*:)([ \t]+)(\S.*?)\s*$`)
	// tokenRE: a full K3s token K10<CA hash>::<user>:<password> (docs/k3s.md, token format)
	// or a bare <user>:<password> server token is not recognisable; the K10 form is.
	tokenRE = regexp.MustCompile(`\bK10[0-9a-fA-F]{16,}::[A-Za-z0-9_-]+:\S+`)
	// urlPasswordRE: the password of a URL's user information (a proxy URL
	// http://user:password@proxy:3128; docs/proxy.md).
	urlPasswordRE = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'"]*):([^\s/@'"]+)@`)
)

// Mask returns s with every secret value replaced by Masked. It is the one masking function
// of k3strap: for env pairs (NAME=value, IsSecretEnv), command-line flags (--token VALUE,
// --agent-token=VALUE, --password, --bootstrap-password, any IsSecretKey flag), YAML lines of a
// config file (`token: VALUE`, IsSecretKey), whole K3s tokens (K10…::user:password) and the
// password of a URL's user information (scheme://user:password@host, a proxy URL) in any
// text. Everything else is left as it is. Events never carry secrets (docs/k3s.md); Mask is the
// safety net for text shown to a user: remote output, diffs, rendered files, commands.
func Mask(s string) string {
	if s == "" {
		return s
	}
	s = tokenRE.ReplaceAllString(s, Masked)
	s = urlPasswordRE.ReplaceAllString(s, "${1}:"+Masked+"@")
	s = yamlRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := yamlRE.FindStringSubmatch(m)
		if !IsSecretKey(sub[2]) || sub[4] == Masked {
			return m
		}
		return sub[1] + sub[3] + Masked
	})
	s = flagRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := flagRE.FindStringSubmatch(m)
		if !IsSecretKey(sub[2]) || sub[4] == Masked {
			return m
		}
		return sub[1] + sub[3] + Masked
	})
	s = envPairRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := envPairRE.FindStringSubmatch(m)
		if sub[1] != strings.ToUpper(sub[1]) || !IsSecretEnv(sub[1]) || sub[2] == Masked {
			return m
		}
		return sub[1] + "=" + Masked
	})
	return s
}

// MaskEnv returns a copy of env (NAME=VALUE pairs) with the whole value of every secret
// variable (IsSecretEnv, any case) replaced by Masked, and Mask applied to the others (a
// value such as INSTALL_K3S_EXEC may carry a --token flag). Values may contain spaces.
func MaskEnv(env []string) []string {
	out := make([]string, len(env))
	for i, e := range env {
		k, _, ok := strings.Cut(e, "=")
		if ok && IsSecretEnv(k) {
			out[i] = k + "=" + Masked
			continue
		}
		out[i] = Mask(e)
	}
	return out
}
