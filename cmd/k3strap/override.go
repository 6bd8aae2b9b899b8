// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The override layer: K3STRAP_* environment variables and command-line flags layered over the
// inventory file through viper. The command layer builds it; package inventory stays free of
// viper and only receives a function (inventory.LoadOptions.Override) that sets fields.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/k3strap/k3strap/inventory"
)

// EnvPrefix is the prefix of the environment variables that override inventory values:
// K3STRAP_ + the flag name (flagName) upper-cased with '-' turned into '_', so a flag and its
// variable are spelled alike (--ssh-key-path ↔ K3STRAP_SSH_KEY_PATH).
const EnvPrefix = "K3STRAP"

// Override keys: the viper keys (case-insensitive, as viper lowercases them) of the inventory
// values that K3STRAP_* environment variables and command-line flags may override. cmd binds a
// flag to a key with v.BindPFlag(key, flag) on the *viper.Viper from NewViper.
const (
	OverrideSSHUser           = "ssh.user"
	OverrideSSHPort           = "ssh.port"
	OverrideSSHKeyPath        = "ssh.keyPath"
	OverrideSSHKnownHosts     = "ssh.knownHosts"
	OverrideSSHAgent          = "ssh.agent"
	OverrideSSHConnectTimeout = "ssh.connectTimeout"
	OverrideSSHCertificate    = "ssh.certificatePath"
	OverrideSSHProxyCommand   = "ssh.proxyCommand"
	OverrideK3sVersion        = "k3s.version"
	OverrideK3sChannel        = "k3s.channel"
	OverrideK3sToken          = "k3s.token"
	OverrideK3sInstall        = "k3s.install"
)

// OverrideKey describes one overridable inventory value.
type OverrideKey struct {
	// Key is the viper key, e.g. "ssh.port".
	Key string
	// Env is the environment variable bound to Key by NewViper, e.g. "K3STRAP_SSH_KEY_PATH".
	Env string
	// OldEnv is the name Env had before v0.4 (the key upper-cased, "K3STRAP_SSH_KEYPATH"),
	// still read after Env with a deprecation warning (env.go); "" when it is Env.
	OldEnv string
	// Field is the inventory field path the value replaces, e.g. "spec.ssh.port".
	Field string
	// Usage is a one-line description suitable for a flag's help text.
	Usage string
	// Secret marks a value that must never be given on a command line, where ps and shell
	// history would show it: cmd must bind no flag to it; it is read from Env only.
	Secret bool
}

// OverrideKeys returns every override key in a fixed order. Precedence for each (viper's):
// a changed command-line flag, then the environment variable, then the inventory file.
//
// The values replace the cluster-wide fields (spec.ssh.*, spec.k3s.*); a host's own ssh
// settings in the file still apply to that host. Relative paths given through an override are
// relative to the current directory (not to the inventory file); "~" expands to $HOME.
// Overriding k3s.version clears a channel from the file and overriding k3s.channel clears a
// version, since both choose the release (unless both are overridden, which validation rejects).
func OverrideKeys() []OverrideKey {
	keys := []OverrideKey{
		{Key: OverrideSSHUser, Field: "spec.ssh.user", Usage: "SSH user for every host (default root)"},
		{Key: OverrideSSHPort, Field: "spec.ssh.port", Usage: "SSH port for every host (default 22)"},
		{Key: OverrideSSHKeyPath, Field: "spec.ssh.keyPath", Usage: "SSH private key file"},
		{Key: OverrideSSHKnownHosts, Field: "spec.ssh.knownHosts", Usage: "known_hosts file to verify host keys against (default ~/.ssh/known_hosts)"},
		{Key: OverrideSSHAgent, Field: "spec.ssh.agent", Usage: "use the ssh-agent at $SSH_AUTH_SOCK (true/false)"},
		{Key: OverrideSSHConnectTimeout, Field: "spec.ssh.connectTimeout", Usage: "deadline of the whole connect (ssh-agent, TCP, handshake, host key, auth), e.g. 10s"},
		{Key: OverrideSSHCertificate, Field: "spec.ssh.certificatePath", Usage: "OpenSSH user certificate for the key (default <key>-cert.pub when present)"},
		{Key: OverrideSSHProxyCommand, Field: "spec.ssh.proxyCommand", Usage: "local command whose stdin/stdout is the SSH connection, tokens %h %p %r %n (OpenSSH ProxyCommand)"},
		{Key: OverrideK3sVersion, Field: "spec.k3s.version", Usage: "K3s release, e.g. v1.31.4+k3s1 (replaces a channel)"},
		{Key: OverrideK3sChannel, Field: "spec.k3s.channel", Usage: "K3s release channel, e.g. stable (online installs; replaces a version)"},
		{Key: OverrideK3sToken, Field: "spec.k3s.token", Usage: "cluster join token (environment only, never a flag)", Secret: true},
		{Key: OverrideK3sInstall, Field: "spec.k3s.install", Usage: "online or airgap"},
	}
	for i := range keys {
		keys[i].Env = envName(keys[i].Key)
		if old := oldEnvName(keys[i].Key); old != keys[i].Env && !newSinceEnvRename(keys[i].Key) {
			keys[i].OldEnv = old
		}
	}
	return keys
}

// envName returns the environment variable of an override key: its flag's name upper-cased
// (ssh.keyPath → --ssh-key-path → K3STRAP_SSH_KEY_PATH).
func envName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName(key), "-", "_"))
}

// newSinceEnvRename reports whether an override key came after the environment names were
// derived from the flag names: it never had an old name to keep reading.
func newSinceEnvRename(key string) bool {
	switch key {
	case OverrideSSHCertificate, OverrideSSHProxyCommand:
		return true
	}
	return false
}

// oldEnvName is the environment variable of an override key before v0.4: the key
// upper-cased with '.' turned into '_' (K3STRAP_SSH_KEYPATH). Read for one more release.
func oldEnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// NewViper returns a viper instance with every override key bound to its K3STRAP_*
// environment variable (OverrideKeys lists them). The root command binds flags to the same keys
// and loads the inventory with overrideLayer of the instance. The inventory document itself is never decoded through
// viper: viper lowercases keys, and label keys are case-sensitive.
func NewViper() *viper.Viper {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	for _, k := range OverrideKeys() {
		// BindEnv fails only when called without a key. With several names viper takes the
		// first one set: the current name wins over the deprecated one.
		if k.OldEnv != "" {
			_ = v.BindEnv(k.Key, k.Env, k.OldEnv)
		} else {
			_ = v.BindEnv(k.Key, k.Env)
		}
	}
	return v
}

// overrideSource describes where an override may have come from, for messages.
func overrideSource(key string) string {
	for _, k := range OverrideKeys() {
		if strings.EqualFold(k.Key, key) {
			if k.Secret {
				return "$" + envName(k.Key)
			}
			return fmt.Sprintf("override %s (a command-line flag or $%s)", k.Key, envName(k.Key))
		}
	}
	return "override " + key
}

// overrideLayer returns the inventory.LoadOptions.Override function of v: it applies
// applyOverrides. nil for a nil v (no overrides, the environment is not read).
func overrideLayer(v *viper.Viper) func(*inventory.Cluster) inventory.ErrorList {
	if v == nil {
		return nil
	}
	return func(c *inventory.Cluster) inventory.ErrorList { return applyOverrides(c, v) }
}

// applyOverrides sets every override key that v has a value for (from a changed flag or the
// environment) over c's value from the file, and records it in c.Overridden (field path →
// overrideSource). Values that do not convert are reported without a file position; a
// secret's value is never echoed. Paths are resolved against the current directory.
func applyOverrides(c *inventory.Cluster, v *viper.Viper) inventory.ErrorList {
	if v == nil {
		return nil
	}
	var errs inventory.ErrorList
	bad := func(k OverrideKey, val, want, fix string) {
		errs = append(errs, &inventory.FieldError{Path: k.Field,
			Message: fmt.Sprintf("%s from %s must be %s, not %q", k.Field, overrideSource(k.Key), want, val), Fix: fix})
	}
	set := map[string]bool{}
	for _, k := range OverrideKeys() {
		set[k.Key] = v.IsSet(k.Key)
	}
	if c.Overridden == nil {
		c.Overridden = map[string]string{}
	}
	for _, k := range OverrideKeys() {
		if !set[k.Key] {
			continue
		}
		raw := strings.TrimSpace(v.GetString(k.Key))
		ok := true
		switch k.Key {
		case OverrideSSHUser:
			c.Spec.SSH.User = raw
		case OverrideSSHPort:
			p, err := strconv.Atoi(raw)
			if err != nil {
				bad(k, raw, "a whole number", "give a TCP port between 1 and 65535")
				ok = false
				break
			}
			// 0 would read as "unset" (port 22) and 022 as 22: refused here; other values
			// out of range are validation's (SSH port N is out of range).
			if p == 0 || strings.HasPrefix(strings.TrimLeft(raw, "+-"), "0") {
				bad(k, raw, "a TCP port from 1 to 65535 without leading zeros", "give a TCP port between 1 and 65535")
				ok = false
				break
			}
			c.Spec.SSH.Port = p
		case OverrideSSHKeyPath:
			c.Spec.SSH.KeyPath = cwdPath(raw)
		case OverrideSSHKnownHosts:
			c.Spec.SSH.KnownHosts = cwdPath(raw)
		case OverrideSSHAgent:
			b, err := strconv.ParseBool(raw)
			if err != nil {
				bad(k, raw, "true or false", "write true or false")
				ok = false
				break
			}
			c.Spec.SSH.Agent = inventory.Bool(b)
		case OverrideSSHConnectTimeout:
			d, err := time.ParseDuration(raw)
			if err != nil {
				bad(k, raw, "a duration", "write a duration such as 10s or 1m30s")
				ok = false
				break
			}
			if d <= 0 {
				bad(k, raw, "a positive duration", "write a duration greater than zero such as 10s or 1m30s")
				ok = false
				break
			}
			if d > inventory.MaxDuration {
				bad(k, raw, "at most "+inventory.MaxDuration.String(), "write a shorter duration such as 10s or 1m30s")
				ok = false
				break
			}
			c.Spec.SSH.ConnectTimeout = inventory.Duration(d)
		case OverrideSSHCertificate:
			c.Spec.SSH.CertificatePath = cwdPath(raw)
		case OverrideSSHProxyCommand:
			c.Spec.SSH.ProxyCommand = raw
		case OverrideK3sVersion:
			c.Spec.K3s.Version = raw
			if !set[OverrideK3sChannel] {
				c.Spec.K3s.Channel = ""
			}
		case OverrideK3sChannel:
			c.Spec.K3s.Channel = raw
			if !set[OverrideK3sVersion] {
				c.Spec.K3s.Version = ""
			}
		case OverrideK3sToken:
			c.Spec.K3s.Token = inventory.Secret(v.GetString(k.Key))
		case OverrideK3sInstall:
			c.Spec.K3s.Install = inventory.InstallMode(raw)
		}
		if ok {
			c.Overridden[k.Field] = overrideSource(k.Key)
		}
	}
	return errs
}

// cwdPath resolves a path given through an override: relative to the current directory, "~"
// expanded (inventory.Cluster.ResolvePath of a cluster without a source file).
func cwdPath(p string) string { return (&inventory.Cluster{}).ResolvePath(p) }
